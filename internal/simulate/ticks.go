package simulate

import (
	"math"
	"time"

	"gonum.org/v1/plot"
)

// timeSteps are the spacings time ticks may take: each a round number of its unit.
var timeSteps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
}

// maxTimeTicks bounds the labelled ticks of a time axis, so that labels never crowd.
const maxTimeTicks = 7

// timeTicks labels a time axis (Unix seconds, UTC) at round instants: 10:05, 10:10, … and not
// 08:06:40, 09:30:00, 10:53:20.
func timeTicks(lo, hi float64) []plot.Tick {
	span := time.Duration((hi - lo) * float64(time.Second))
	step := timeStep(span, maxTimeTicks)
	layout := "15:04"
	switch {
	case step < time.Minute:
		layout = "15:04:05"
	case step > timeSteps[len(timeSteps)-1]:
		layout = "Jan 2 2006" // over months: the year matters
	case step >= 24*time.Hour:
		layout = "Jan 2"
	case span > 24*time.Hour:
		// Labels about twice as wide: fewer of them.
		step, layout = timeStep(span, 5), "Jan 2 15:04"
		if step >= 24*time.Hour {
			layout = "Jan 2"
		}
	}
	var ticks []plot.Tick
	first := time.Unix(0, int64(lo*1e9)).UTC().Truncate(step)
	for t := first; !t.After(time.Unix(0, int64(hi*1e9))); t = t.Add(step) {
		v := float64(t.UnixNano()) / 1e9
		if v >= lo {
			ticks = append(ticks, plot.Tick{Value: v, Label: t.Format(layout)})
		}
	}
	return ticks
}

// timeStep is the smallest of timeSteps that gives fewer than n ticks over span.
func timeStep(span time.Duration, n int) time.Duration {
	for _, s := range timeSteps {
		if span/s < time.Duration(n) {
			return s
		}
	}
	// Longer than the steps go: whole multiples of the longest.
	longest := timeSteps[len(timeSteps)-1]
	return longest * (span/longest/time.Duration(n-1) + 1)
}

// niceStep is a round spacing (1, 2 or 5 times a power of ten) giving at most about n ticks
// over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	power := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*power >= raw {
			return m * power
		}
	}
	return 10 * power
}

// countTicks labels a count or rate axis at round values, written as people write them
// (2,500 and not 2500.00; 0.5 and not 0.50).
func countTicks(lo, hi float64) []plot.Tick {
	step := niceStep(hi-lo, 5)
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: formatCount(v)})
	}
	return ticks
}

// formatCount writes a value with thousands separators, with decimals only when it has some.
func formatCount(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return Thousands(int64(v))
	}
	return trimFloat(v)
}
