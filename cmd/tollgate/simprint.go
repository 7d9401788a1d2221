package main

import (
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/tollgate-proxy/tollgate/internal/simulate"
)

// printAlone says, for each shadow rule, what it would limit enforced alone beside what it
// shadow-limited among the requests the enforced rules let through.
func printAlone(w io.Writer, r *simulate.Result) {
	for _, name := range r.RuleNames() {
		rr := r.Rules[name]
		if rr.EnforcedAlone == nil {
			continue
		}
		a := rr.EnforcedAlone
		fmt.Fprintf(w, "  shadow rule %s enforced alone would limit %s of its %s requests (%s keys); with the other rules it shadow-limited %s\n",
			name, simulate.Thousands(a.Limited), simulate.Thousands(rr.Requests), simulate.Thousands(int64(a.KeysLimited)),
			simulate.Thousands(rr.ShadowLimited))
	}
}

// printPhases writes, for a configuration replayed at several phases of its windows, each
// rule's range over them.
func printPhases(w io.Writer, r *simulate.Result) {
	for _, name := range r.RuleNames() {
		if p := r.Rules[name].WindowPhases; p != nil {
			fmt.Fprintf(w, "  rule %s: %s\n", name, p.Describe(r.Rules[name].Shadow))
		}
	}
}

// printChanges writes what the second configuration changes from the first, a line per rule.
func printChanges(w io.Writer, c *simulate.Changes) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\n%s against %s: %s requests newly limited, %s newly admitted\n", c.To, c.From,
		simulate.Thousands(c.NewlyLimited), simulate.Thousands(c.NewlyAdmitted))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rule\tnewly limited\tnewly admitted\tkeys newly limited\tkeys newly admitted\tkey moved most (limited before → after)\t")
	for _, name := range changedRuleNames(c) {
		rc := c.Rules[name]
		moved := "-"
		if len(rc.MovedMost) > 0 {
			k := rc.MovedMost[0]
			moved = fmt.Sprintf("%s (%s → %s)", k.Key, simulate.Thousands(k.LimitedFrom), simulate.Thousands(k.LimitedTo))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", name, simulate.Thousands(rc.NewlyLimited), simulate.Thousands(rc.NewlyAdmitted),
			simulate.Thousands(int64(rc.KeysNewlyLimited)), simulate.Thousands(int64(rc.KeysNewlyAdmitted)), moved)
	}
	tw.Flush()
}

// changedRuleNames lists the rules of a comparison by name.
func changedRuleNames(c *simulate.Changes) []string {
	return slices.Sorted(maps.Keys(c.Rules))
}

// printSuggestion writes --suggest's limits per rule and what they did in their replay.
func printSuggestion(w io.Writer, s *simulate.Suggestion, outDir string) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "\nsuggested limits (%s): at most %g %% of each rule's keys limited, the keys limited most left out\n",
		filepath.Join(outDir, "suggested.json"), s.KeysPercent)
	for _, name := range s.Result.RuleNames() {
		rs, rr := s.Rules[name], s.Result.Rules[name]
		fmt.Fprintf(w, "  rule %s (%s keys left out): replayed, %s requests limited from %s of %s keys\n", name,
			simulate.Thousands(int64(rs.KeysExcluded)), simulate.Thousands(rr.Limited+rr.ShadowLimited),
			simulate.Thousands(int64(rr.KeysLimited)), simulate.Thousands(int64(rr.Keys)))
		for i, l := range rs.Limits {
			text := l.Text
			if l.Kept != "" {
				text += " (kept: " + l.Kept + ")"
			}
			fmt.Fprintf(w, "    limit %d: %s\n", i+1, text)
		}
	}
}

// printWarnings writes every configuration's warnings, each naming its configuration.
func printWarnings(w io.Writer, results []*simulate.Result) {
	for _, r := range results {
		for _, warning := range r.Warnings {
			fmt.Fprintf(w, "tollgate simulate: warning: %s: %s\n", r.Config, warning.Message)
		}
	}
}
