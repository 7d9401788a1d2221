package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Raw output of two `go test` runs of one report, with the floor ratios under their current units
// in one and their former ones in the other.
const raw = `goos: linux
cpu: AMD EPYC
BenchmarkFloor/admitted-known-2   	   20000	      4000 ns/op	      2.50 vs-floor	      2.40 vs-clocked-floor
BenchmarkFloor/admitted-known-2   	   20000	      4100 ns/op	      2.70 tollgate/floor	      2.60 tollgate/floor+clock
BenchmarkSurface/admitted-known-2 	   20000	      4000 ns/op	      1.25 surface-over-clocked-floor	      1.50 glue-over-clocked-floor	      2.20 vs-clocked-floor	      1.76 vs-surface
BenchmarkSurface/admitted-known-2 	   20000	      4000 ns/op	      1.27 surface-over-clocked-floor	      1.56 glue-over-clocked-floor	      2.30 vs-clocked-floor	      1.81 vs-surface
BenchmarkDirect/admitted-known-2  	   20000	      4000 ns/op	      1.64 direct-over-clocked-floor	      2.20 vs-clocked-floor	      1.34 vs-direct
BenchmarkDirect/admitted-known-2  	   20000	      4000 ns/op	      1.70 direct-over-clocked-floor	      2.30 vs-clocked-floor	      1.35 vs-direct
PASS
goos: linux
cpu: AMD EPYC
BenchmarkHTTP/rejected-2          	    5120	     46446 ns/op	         2.915 filter/passthrough	      7385 passthrough-req/s	     21530 req/s
BenchmarkStartup/example/compiled-2         	      50	   3403573 ns/op	    519936 configure-ns/op	   2878670 instantiate-ns/op
BenchmarkStartup/64-rules/with-compile-2    	       5	 671916389 ns/op	 662208962 compile-ns/op	   6587318 configure-ns/op	   3108517 instantiate-ns/op
PASS
`

// Each ratio of the floor is read under its own unit, whichever name the run used; no other
// unit takes its values.
func TestParseReadsFormerUnitsUnderCurrentNames(t *testing.T) {
	r, err := parseBench([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		unit string
		want []float64
	}{
		{"vs-floor", []float64{2.5, 2.7}},
		{"vs-clocked-floor", []float64{2.4, 2.6}},
		{"tollgate/floor", nil},
		{"tollgate/floor+clock", nil},
	} {
		if got := r["Floor/admitted-known"][c.unit]; !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.unit, got, c.want)
		}
	}
}

// Every generated section lands between its own markers, with the figures of the run, and the
// text around the markers stays as it was.
func TestSectionsReplaceTheirMarkers(t *testing.T) {
	r, err := parseBench([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(t.TempDir(), "doc.md")
	const before = "intro\n<!-- bench-report:begin -->\nold\n<!-- bench-report:end -->\nmiddle\n" +
		"<!-- bench-report:http:begin -->\nold\n<!-- bench-report:http:end -->\n" +
		"<!-- bench-report:startup:begin -->\n<!-- bench-report:startup:end -->\nend\n"
	if err := os.WriteFile(doc, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceSections(doc, render(r, header([]byte(raw)))); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := string(data)
	for _, c := range []struct{ marker, want string }{
		{"bench-report", "Run: cpu: AMD EPYC; go: "},
		{"bench-report", "| **2.60 [2.50..2.70]** |"},
		{"bench-report", "| (bound) admitted, known key: the surface probe (Tollgate's crossings and nothing else) / clocked floor, same run | 1.26 [1.25..1.27] | – |"},
		// 1 - (1.8-1.25)/(2.20-1.25) = 0.42, 1 - (1.8-1.27)/(2.30-1.27) = 0.49
		{"bench-report", "| (bound) admitted, known key: Tollgate / clocked floor in the same benchmark; its time beyond the surface probe's must fall by | 2.25 [2.20..2.30]; 45 % [42..49] | – |"},
		{"bench-report", "| (bound) admitted, known key: the glue probe (the same crossings through Tollgate's ABI layer, deciding nothing) / clocked floor, same run | 1.53 [1.50..1.56] | – |"},
		// 1 - (1.8-1.50)/(2.20-1.50) = 0.57, 1 - (1.8-1.56)/(2.30-1.56) = 0.68
		{"bench-report", "| (bound) admitted, known key: with the ABI layer as it is, the decision's time (Tollgate's beyond the glue probe's) must fall by | 62 % [57..68] | – |"},
		{"bench-report", "| (bound) admitted, known key: the direct-decision probe (the same crossings through Tollgate's ABI layer, the benchmarks' one rule decided in one function) / clocked floor, same run | 1.67 [1.64..1.70] | – |"},
		{"bench-report", "| (bound) admitted, known key: Tollgate / the direct-decision probe, same run | 1.35 [1.34..1.35] | – |"},
		{"bench-report", "| **0.52** ms | yes |"},
		{"bench-report:http", "| rejected: every key over its limit | 21,530 | 7,385 | **2.92** |"},
		{"bench-report:startup", "| example (`examples/tollgate.json`), compiled | – | 2.88 | 0.52 | 3.40 |"},
		{"bench-report:startup", "| 64 rules, with compilation | 662 | 3.11 | 6.59 | 672 |"},
	} {
		_, inside, _ := strings.Cut(got, "<!-- "+c.marker+":begin -->")
		inside, _, _ = strings.Cut(inside, "<!-- "+c.marker+":end -->")
		if !strings.Contains(inside, c.want) {
			t.Errorf("section %s lacks %q:\n%s", c.marker, c.want, inside)
		}
	}
	for _, kept := range []string{"intro\n<!--", "-->\nmiddle\n<!--", "-->\nend\n"} {
		if !strings.Contains(got, kept) {
			t.Errorf("the text around the markers changed: %q is gone:\n%s", kept, got)
		}
	}
	if strings.Contains(got, "old") {
		t.Errorf("a section kept its former content:\n%s", got)
	}
}

// A document without one of the sections is refused, naming the missing marker.
func TestMissingSectionIsRefused(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(doc, []byte("<!-- bench-report:begin -->\n<!-- bench-report:end -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := replaceSections(doc, []section{{"bench-report", "x\n"}, {"bench-report:http", "y\n"}})
	if err == nil || !strings.Contains(err.Error(), "<!-- bench-report:http:begin -->") {
		t.Errorf("error %v, want one naming the http section's marker", err)
	}
}

// A run whose benchmark failed after its name was printed (go test then prints "--- FAIL" on the
// same line), or a run without results, is an error: never tables with figures missing.
func TestParseRefusesFailedRuns(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"cpu: AMD EPYC\nBenchmarkFloor/admitted-known-2  \t--- FAIL: BenchmarkFloor/admitted-known\n" +
			"    floor_test.go:12: boom\nFAIL\n", "a benchmark failed"},
		{"--- FAIL: BenchmarkFloor/admitted-known\nFAIL\n", "no benchmark results"},
	} {
		if _, err := parseBench([]byte(c.raw)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.raw, err, c.want)
		}
	}
}
