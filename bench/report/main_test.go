package main

import "testing"

// Raw output of two runs, with the floor ratios under their current units in one and their
// former ones in the other.
const raw = `goos: linux
cpu: AMD EPYC
BenchmarkFloor/admitted-known-2   	   20000	      4000 ns/op	      2.50 vs-floor	      2.40 vs-clocked-floor
BenchmarkFloor/admitted-known-2   	   20000	      4100 ns/op	      2.70 tollgate/floor	      2.60 tollgate/floor+clock
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
		if got := r["Floor/admitted-known"][c.unit]; !equalFloats(got, c.want) {
			t.Errorf("%s: %v, want %v", c.unit, got, c.want)
		}
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
