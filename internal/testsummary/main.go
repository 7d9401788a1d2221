// Command testsummary reads `go test -json` on standard input and prints what `go test` prints
// without -v — the output of failed tests and one line per package — then every skipped test with
// its reason, so that a skip is never silent, and a closing count, which stays the last line. It
// exits 1 when a test, a package or a build failed. make test pipes the suite through it.
//
// Each file named with -report (a report a test wrote, such as build/global-latency.txt) is
// printed before the closing count, when it exists.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json), including the build events of
// `go test -json`, which name the package in ImportPath.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// summary is the state of the run.
type summary struct {
	out      io.Writer
	running  map[string]map[string][]string // package → test → output lines so far
	skipped  []string                       // "package TestName: reason"
	failed   []string                       // failed packages
	passed   int                            // tests
	failures int                            // tests
	broken   bool                           // a build failed, or a line was not an event
	reports  []string                       // files to print before the closing count
}

// files is a flag that may be given several times.
type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	s := &summary{out: os.Stdout, running: map[string]map[string][]string{}}
	flag.Var((*files)(&s.reports), "report", "a `file` to print before the closing count, if it exists (repeatable)")
	flag.Parse()
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	if !s.close() {
		os.Exit(1)
	}
}

func (s *summary) read(r io.Reader) error {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for scanner.Scan() {
		line := scanner.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not an event: go test's own complaints (a flag it refuses, a pattern that
			// matches nothing) go straight through, and count as a failure.
			fmt.Fprintln(s.out, string(line))
			s.broken = true
			continue
		}
		s.handle(e)
	}
	return scanner.Err()
}

func (s *summary) handle(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.out, e.Output)
		return
	case "build-fail":
		s.broken = true
		return
	}
	tests := s.running[e.Package]
	if tests == nil {
		tests = map[string][]string{}
		s.running[e.Package] = tests
	}
	if e.Test == "" {
		s.handlePackage(e, tests)
		return
	}
	switch e.Action {
	case "output":
		tests[e.Test] = append(tests[e.Test], e.Output)
	case "pass":
		s.passed++
		delete(tests, e.Test)
	case "fail":
		s.failures++
		s.print(tests[e.Test])
		delete(tests, e.Test)
	case "skip":
		s.skipped = append(s.skipped, shortPackage(e.Package)+" "+e.Test+": "+skipReason(tests[e.Test]))
		delete(tests, e.Test)
	}
}

func (s *summary) handlePackage(e event, tests map[string][]string) {
	switch e.Action {
	case "output":
		// The framing lines of -v, which go test without -v does not print.
		if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
			fmt.Fprint(s.out, e.Output)
		}
	case "fail":
		// Tests that never ended (a panic, a timeout) show what they printed.
		names := make([]string, 0, len(tests))
		for name := range tests {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			fmt.Fprintf(s.out, "--- %s did not finish:\n", name)
			s.print(tests[name])
		}
		s.failed = append(s.failed, e.Package)
		delete(s.running, e.Package)
	case "pass", "skip":
		delete(s.running, e.Package)
	}
}

// print writes a test's output without the framing lines of -v.
func (s *summary) print(lines []string) {
	for _, line := range lines {
		if !strings.HasPrefix(line, "=== ") {
			fmt.Fprint(s.out, line)
		}
	}
}

// skipReason is what a skipped test logged: the lines after its "--- SKIP" line, joined.
func skipReason(lines []string) string {
	var reason []string
	for _, line := range lines {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "=== ") || strings.HasPrefix(trimmed, "--- SKIP") {
			continue
		}
		reason = append(reason, trimmed)
	}
	if len(reason) == 0 {
		return "(no reason given)"
	}
	return strings.Join(reason, " ")
}

func shortPackage(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, "github.com/tollgate-proxy/tollgate"), "/")
}

// close prints the closing lines and reports whether everything passed.
func (s *summary) close() bool {
	fmt.Fprintln(s.out)
	if len(s.skipped) > 0 {
		fmt.Fprintf(s.out, "skipped (%d):\n", len(s.skipped))
		for _, skip := range s.skipped {
			fmt.Fprintln(s.out, "  "+skip)
		}
	}
	for _, path := range s.reports {
		if data, err := os.ReadFile(path); err == nil {
			fmt.Fprint(s.out, string(data))
		}
	}
	ok := !s.broken && len(s.failed) == 0 && s.failures == 0
	verdict := "PASS"
	if !ok {
		verdict = "FAIL"
	}
	fmt.Fprintf(s.out, "%s: %d tests passed, %d skipped, %d failed", verdict, s.passed, len(s.skipped), s.failures)
	if len(s.failed) > 0 {
		names := make([]string, len(s.failed))
		for i, p := range s.failed {
			names[i] = shortPackage(p)
		}
		fmt.Fprintf(s.out, "; failed packages: %s", strings.Join(names, ", "))
	}
	if s.broken {
		fmt.Fprint(s.out, "; go test reported errors above")
	}
	fmt.Fprintln(s.out)
	return ok
}
