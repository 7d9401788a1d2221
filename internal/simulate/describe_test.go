package simulate

import (
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"

	"github.com/tollgate-proxy/tollgate/config"
)

func TestLimitsInWords(t *testing.T) {
	tests := []struct {
		limit config.Limit
		unit  string
		want  string
	}{
		{config.Limit{Algorithm: config.TokenBucket, Capacity: 20, RefillTokens: 5, RefillInterval: time.Second}, "requests",
			"20 requests at once, then 5 per second"},
		{config.Limit{Algorithm: config.TokenBucket, Capacity: 300, RefillTokens: 300, RefillInterval: time.Minute}, "units",
			"300 units at once, then 300 per minute"},
		{config.Limit{Algorithm: config.TokenBucket, Capacity: 4, RefillTokens: 3, RefillInterval: 250 * time.Millisecond}, "requests",
			"4 requests at once, then 3 every 250ms"},
		{config.Limit{Algorithm: config.FixedWindow, Capacity: 1000, Window: time.Hour}, "requests",
			"1,000 requests per 1-hour window (fixed windows, one after the other)"},
		{config.Limit{Algorithm: config.FixedWindow, Capacity: 5000, Calendar: config.CalendarDay}, "requests",
			"5,000 requests per calendar day (UTC)"},
		{config.Limit{Algorithm: config.SlidingWindow, Capacity: 10, Window: 10 * time.Minute}, "requests",
			"10 requests in any 10 minutes (sliding window)"},
		{config.Limit{Algorithm: config.Concurrency, MaxInFlight: 8}, "requests", "8 requests in flight at once"},
	}
	for _, tt := range tests {
		if got := describeLimitWords(tt.limit, tt.unit); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.limit, got, tt.want)
		}
	}
}

// Time ticks fall on round instants and count ticks are written as people write numbers.
func TestTicksAreRound(t *testing.T) {
	at := func(s string) float64 {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return float64(v.Unix())
	}
	tests := []struct {
		name string
		got  func() []string
		want string
	}{
		{"ten minutes", func() []string { return labels(timeTicks(at("2026-11-30T10:00:07Z"), at("2026-11-30T10:11:08Z"))) }, "10:02 10:04 10:06 10:08 10:10"},
		{"three hours", func() []string { return labels(timeTicks(at("2026-11-30T08:06:40Z"), at("2026-11-30T11:00:00Z"))) }, "08:30 09:00 09:30 10:00 10:30 11:00"},
		{"a minute", func() []string { return labels(timeTicks(at("2026-11-30T10:00:00Z"), at("2026-11-30T10:01:00Z"))) }, "10:00:00 10:00:10 10:00:20 10:00:30 10:00:40 10:00:50 10:01:00"},
		{"three days", func() []string { return labels(timeTicks(at("2026-11-30T00:00:00Z"), at("2026-12-03T00:00:00Z"))) }, "Nov 30 Dec 1 Dec 2 Dec 3"},
		{"a day and a half", func() []string { return labels(timeTicks(at("2026-11-30T00:00:00Z"), at("2026-12-01T12:00:00Z"))) }, "Nov 30 00:00 Nov 30 12:00 Dec 1 00:00 Dec 1 12:00"},
		{"two years", func() []string { return labels(timeTicks(at("2025-01-01T00:00:00Z"), at("2027-01-01T00:00:00Z"))) },
			"Mar 31 2025 Aug 18 2025 Jan 5 2026 May 25 2026 Oct 12 2026"},
		{"thousands", func() []string { return labels(countTicks(0, 5000)) }, "0 1,000 2,000 3,000 4,000 5,000"},
		{"fractions", func() []string { return labels(countTicks(0, 2.5)) }, "0 0.5 1 1.5 2 2.5"},
	}
	for _, tt := range tests {
		if got := strings.Join(tt.got(), " "); got != tt.want {
			t.Errorf("%s: ticks %q, want %q", tt.name, got, tt.want)
		}
	}
}

func labels(ticks []plot.Tick) []string {
	out := make([]string, len(ticks))
	for i, t := range ticks {
		out[i] = t.Label
	}
	return out
}

// A key's peak is also counted in the units its rule's limits count: the requests' cost, fixed
// or read from a header (clamped to max; a bad value charges nothing).
func TestPeakIsInTheLimitsUnits(t *testing.T) {
	t.Parallel()
	withCost := func(cost string) logRequest {
		return logRequest{path: "/api", headers: map[string]string{"x-api-key": "a", "x-cost": cost}}
	}
	path := writeEnvoyLog(t, []logRequest{withCost("2"), withCost("70"), withCost("abc")})
	s, _ := simulateFile(t, path, EnvoyJSON, true, `{"rules": [
	  {"name": "fixed", "cost": 5, "key": [{"header": "x-api-key"}], "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "header", "cost": {"header": "x-cost", "max": 50}, "key": [{"header": "x-api-key"}],
	   "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	tests := []struct {
		rule               string
		requests, units    int64
		cost, limitInWords string
	}{
		{"fixed", 3, 15, "a request costs 5 units", "100 units at once, then 1 per second"},
		{"header", 3, 52, "a request costs its x-cost header's value, 1 to 50 units (1 without the header)", "100 units at once, then 1 per second"},
	}
	for _, tt := range tests {
		r := s.Rules[tt.rule]
		if len(r.BusiestKeys) != 1 {
			t.Fatalf("rule %s: busiest keys %+v", tt.rule, r.BusiestKeys)
		}
		k := r.BusiestKeys[0]
		if k.PeakPerSecond != tt.requests || k.PeakUnitsPerSecond != tt.units || r.Cost != tt.cost || r.Limits[0].Text != tt.limitInWords {
			t.Errorf("rule %s: peak %d requests, %d units, %q, %q; want %d, %d, %q, %q", tt.rule, k.PeakPerSecond, k.PeakUnitsPerSecond,
				r.Cost, r.Limits[0].Text, tt.requests, tt.units, tt.cost, tt.limitInWords)
		}
	}
}

// Thousands groups the digits of n, a sign before them.
func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 800_000: "800,000", 1_000_000: "1,000,000", -1234: "-1,234"} {
		if got := Thousands(int64(n)); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
