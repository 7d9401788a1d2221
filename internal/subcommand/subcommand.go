// Package subcommand answers, for the commands tollgate and tollgate-image, a first argument that
// names none of their subcommands: the same help and usage errors for both.
package subcommand

import (
	"fmt"
	"io"
)

// Unmatched is what program does when args does not start with one of its subcommands: help,
// -h and --help print usage on stdout (exit 0); no argument prints it on stderr, and an unknown
// one is named there before it (exit 2, bad usage).
func Unmatched(program, usage string, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, usage)
	case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "%s: unknown command %q\n%s", program, args[0], usage)
	}
	return 2
}
