package ratelimit

import (
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// latencyPath is one path's request durations, sorted.
type latencyPath struct {
	name      string
	durations []time.Duration
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1))]
}

// latencyReport is build/global-latency.txt: each path's own quantiles side by side, never a
// difference of two quantiles, which two noisy measurements can make negative and which is no
// quantile of anything.
func latencyReport(at time.Time, n int, paths []latencyPath) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Global limit latency (e2e/ratelimit TestGlobalPathLatency, %s): %d sequential requests per path, interleaved, "+
		"through `tollgate serve` (envoyproxy/ratelimit on Redis, loopback)\n", at.UTC().Format(time.RFC3339), n)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  path\tp50\tp90\tp99")
	for _, p := range paths {
		fmt.Fprintf(tw, "  %s\t%v\t%v\t%v\n", p.name, quantile(p.durations, .5).Round(time.Microsecond),
			quantile(p.durations, .9).Round(time.Microsecond), quantile(p.durations, .99).Round(time.Microsecond))
	}
	tw.Flush()
	b.WriteString("  (what the global check adds is the distance between the rows)\n")
	return b.String()
}

// The report lists each path's quantiles, even where the slower path's tail is below the faster
// one's (as noise can make it), so that no figure is negative.
func TestLatencyReportPrintsEachPathsQuantiles(t *testing.T) {
	ms := func(count int, value float64, rest ...float64) []time.Duration {
		d := make([]time.Duration, 0, count+len(rest))
		for range count {
			d = append(d, time.Duration(value*float64(time.Millisecond)))
		}
		for _, v := range rest {
			d = append(d, time.Duration(v*float64(time.Millisecond)))
		}
		return d
	}
	local := ms(97, 1, 9, 9, 9)        // three slow outliers
	global := ms(97, 2, 2.5, 2.5, 2.5) // slower at the median, faster at the tail
	got := latencyReport(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), 100, []latencyPath{{"local only", local}, {"with global", global}})
	want := "Global limit latency (e2e/ratelimit TestGlobalPathLatency, 2026-12-01T10:00:00Z): 100 sequential requests per path, " +
		"interleaved, through `tollgate serve` (envoyproxy/ratelimit on Redis, loopback)\n" +
		"  path         p50  p90  p99\n" +
		"  local only   1ms  1ms  9ms\n" +
		"  with global  2ms  2ms  2.5ms\n" +
		"  (what the global check adds is the distance between the rows)\n"
	if got != want {
		t.Errorf("report\n%s\nwant\n%s", got, want)
	}
}
