package main

import (
	"fmt"
	"io"

	"github.com/tollgate-proxy/tollgate/config"
)

// printSettlement says, for `tollgate check`, what a rule with count, refund or usage does at the
// response.
func printSettlement(w io.Writer, file string, r config.Rule) {
	switch {
	case r.Count != nil:
		fmt.Fprintf(w, "%s: rule %s: charges only the requests whose response status is %s "+
			"(a request in flight holds its charge until its response)\n", file, r.Name, r.Count)
	case r.Refund != nil:
		fmt.Fprintf(w, "%s: rule %s: gives the charge back when the response status is %s\n", file, r.Name, r.Refund)
	case r.Usage != nil:
		fmt.Fprintf(w, "%s: rule %s: charges what the response reports (%s), reserving %d when a request is admitted; "+
			"a response whose usage cannot be read is charged %d\n", file, r.Name, usageWords(r.Usage), r.Usage.Reserve, r.Usage.Unknown)
	}
}

// usageWords names where a rule's usage is read: "openai total tokens", "the header x-usage".
func usageWords(u *config.Usage) string {
	switch u.Source {
	case config.UsageHeader:
		return "the response header or trailer " + u.Header
	case config.UsageResponseBytes:
		return "the response body's bytes"
	}
	return u.Source.String() + " " + u.Count.String() + " tokens"
}
