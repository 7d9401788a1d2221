package duration

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// parseCases are inputs at the edges of the syntax: signs, fractions, units, overflow.
var parseCases = []string{
	"0", "+0", "-0", "", "+", "-", ".", "1", "1.", ".5s", "1.s", "1.5s", "5.0s", "0.000000001s",
	"0.0000000005s", "1.0000000015s", "300ms", "-1.5h", "2h45m", "1h30m0.5s", "1us", "1µs", "1μs",
	"1ns", "1d", "1S", "s", "1h1", "1h ", " 1h", "1e3s", "9223372036854775807ns",
	"9223372036854775808ns", "-9223372036854775808ns", "-9223372036854775809ns",
	"2562047h47m16.854775807s", "2562047h47m16.854775808s", "2562048h", "18446744073709551616ns",
	"0.99999999999999999999999999s", "1.12345678901234567890123456789h", "9223372036.854775807s",
	"1h-1m", "1..5s", "1.5.5s",
}

func TestParseAgreesWithPackageTime(t *testing.T) {
	for _, text := range parseCases {
		checkParse(t, text)
	}
}

func FuzzParse(f *testing.F) {
	for _, text := range parseCases {
		f.Add(text)
	}
	f.Fuzz(checkParse)
}

func checkParse(t *testing.T, text string) {
	got, gotErr := Parse(text)
	want, wantErr := time.ParseDuration(text)
	if (gotErr != nil) != (wantErr != nil) || got != want {
		t.Fatalf("Parse(%q) = %d, %v; time.ParseDuration: %d, %v", text, got, gotErr, want, wantErr)
	}
}

// formatCases cover each unit, fractions with and without trailing zeros, and the extremes.
var formatCases = []int64{
	0, 1, -1, 999, 1000, 1500, 999_999, 1_000_000, 1_234_567, 20_000_000, 999_999_999,
	1_000_000_000, 1_500_000_000, 60_000_000_000, 61_000_000_001, 3_600_000_000_000,
	3_661_250_000_000, -3_661_250_000_000, 1 << 40, math.MaxInt64, math.MinInt64, math.MinInt64 + 1,
}

func TestFormatAgreesWithPackageTime(t *testing.T) {
	for _, d := range formatCases {
		checkFormat(t, d)
	}
}

func FuzzFormat(f *testing.F) {
	for _, d := range formatCases {
		f.Add(d)
	}
	f.Fuzz(checkFormat)
}

func checkFormat(t *testing.T, d int64) {
	if got, want := Format(Duration(d)), time.Duration(d).String(); got != want {
		t.Fatalf("Format(%d) = %q, time.Duration.String: %q", d, got, want)
	}
}

func ExampleParse() {
	d, err := Parse("1h30m")
	fmt.Println(d == 90*Minute, err, Format(d))
	_, err = Parse("90")
	fmt.Println(err)
	// Output:
	// true <nil> 1h30m0s
	// not a duration
}
