package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/config"
)

// check validates one configuration file: one line per problem, each naming the field.
func check(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintf(stderr, "tollgate check: expected one FILE argument (use - for stdin), got %d\n", len(args))
		return 2
	}
	name := args[0]
	_, cfg, ok := loadConfig("check", name, stdin, stderr)
	if !ok {
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid: %d rule(s), failure_mode %s\n", name, len(cfg.Rules), cfg.FailureMode)
	// Valid but probably not meant: one line each, and still exit 0.
	for _, w := range config.Warnings(cfg) {
		fmt.Fprintf(stderr, "%s: warning: %s\n", name, w)
	}
	printOperatorEndpoint(stdout, name, cfg.Operator)
	for _, r := range cfg.Rules {
		if by := r.LimitsBy; by != nil {
			fmt.Fprintf(stdout, "%s: rule %s: limits by tier from %s: %s\n", name, r.Name, describeTierPart(by.Part), describeTiers(by))
		}
		if g := r.Global; g != nil {
			lease := ""
			if l := g.Lease; l != nil {
				lease = fmt.Sprintf(", leases of up to %d tokens for %s", l.MaxTokens, l.TTL)
			}
			fmt.Fprintf(stdout, "%s: rule %s: global limit from cluster %s, domain %s, timeout %s, failure_mode %s%s\n",
				name, r.Name, g.Cluster, g.Domain, g.Timeout, g.FailureMode, lease)
		}
		printSettlement(stdout, name, r)
	}
	return 0
}

// printProblems writes one line per configuration problem, prefixed with the file name.
func printProblems(w io.Writer, name string, err error) {
	var cfgErr *config.Error
	if errors.As(err, &cfgErr) {
		for _, p := range cfgErr.Problems {
			fmt.Fprintf(w, "%s: %s\n", name, p)
		}
		return
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
}

// describeTierPart names the key part a rule's tier is read from.
func describeTierPart(p config.KeyPart) string {
	switch p.Kind {
	case config.KeyHeader:
		return "header " + p.Header
	case config.KeyQuery:
		return "query parameter " + p.Query
	case config.KeyAttribute:
		return "attribute " + strings.Join(p.Attribute, ".")
	}
	return p.Kind.String()
}

// describeTiers lists the tiers with their number of limits, the default marked.
func describeTiers(by *config.LimitsBy) string {
	tiers := make([]string, len(by.Tiers))
	for i, t := range by.Tiers {
		tiers[i] = strconv.Quote(t.Name) + " (" + strconv.Itoa(len(t.Limits)) + " limit"
		if len(t.Limits) != 1 {
			tiers[i] += "s"
		}
		if i == by.Default {
			tiers[i] += ", the default"
		}
		tiers[i] += ")"
	}
	return strings.Join(tiers, ", ")
}
