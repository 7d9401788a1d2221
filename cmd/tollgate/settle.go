package main

import (
	"fmt"
	"io"

	"github.com/tollgate-proxy/tollgate/config"
)

// printSettlement says, for `tollgate check`, what a rule with count or refund does at the response.
func printSettlement(w io.Writer, file string, r config.Rule) {
	switch {
	case r.Count != nil:
		fmt.Fprintf(w, "%s: rule %s: charges only the requests whose response status is %s "+
			"(a request in flight holds its charge until its response)\n", file, r.Name, r.Count)
	case r.Refund != nil:
		fmt.Fprintf(w, "%s: rule %s: gives the charge back when the response status is %s\n", file, r.Name, r.Refund)
	}
}
