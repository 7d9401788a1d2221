package limiter_test

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// windowLimiter is FixedWindow or SlidingWindow, so that one test can run
// against both.
type windowLimiter interface {
	limiter.Algorithm[limiter.WindowState]
	Limit() limiter.WindowLimit
}

var (
	_ windowLimiter = limiter.FixedWindow{}
	_ windowLimiter = limiter.SlidingWindow{}
)

func mustFixed(t testing.TB, l limiter.WindowLimit) limiter.FixedWindow {
	t.Helper()
	w, err := limiter.NewFixedWindow(l)
	if err != nil {
		t.Fatalf("NewFixedWindow(%+v): %v", l, err)
	}
	return w
}

func mustSliding(t testing.TB, l limiter.WindowLimit) limiter.SlidingWindow {
	t.Helper()
	w, err := limiter.NewSlidingWindow(l)
	if err != nil {
		t.Fatalf("NewSlidingWindow(%+v): %v", l, err)
	}
	return w
}

// windowStep is one request of a window trace at a fixed instant.
type windowStep struct {
	at   int64 // nanoseconds on the trace's time base
	n    int64
	want limiter.Decision
}

// runWindowTrace plays steps in order from Initial(start) and reports every
// step whose decision differs from its want, or whose state is invalid or
// not in the window containing the step's instant. It returns the last
// state.
func runWindowTrace(t *testing.T, w windowLimiter, start int64, steps []windowStep) limiter.WindowState {
	t.Helper()
	window := int64(w.Limit().Window)
	s := w.Initial(start)
	for i, st := range steps {
		next, got := w.Take(s, st.at, st.n)
		if got != st.want {
			t.Errorf("step %d: take %d at %v: got %+v, want %+v",
				i, st.n, time.Duration(st.at), got, st.want)
		}
		if !w.Valid(next) || next.Start > st.at || st.at-next.Start >= window {
			t.Errorf("step %d: take %d at %v: state %+v invalid or not the window of now",
				i, st.n, time.Duration(st.at), next)
		}
		s = next
	}
	return s
}

// The comparison trace of the product design: a fixed window admits the
// burst at the boundary (four requests within 150ms for a limit of two per
// second), and then makes the client wait for the window's end.
func TestFixedWindowSeedTrace(t *testing.T) {
	w := mustFixed(t, limiter.WindowLimit{Capacity: 2, Window: time.Second})
	runWindowTrace(t, w, 0, []windowStep{
		{at: 900 * ms, n: 1, want: allowed(1, 100*time.Millisecond)},
		{at: 950 * ms, n: 1, want: allowed(0, 50*time.Millisecond)},
		{at: 1000 * ms, n: 1, want: allowed(1, 1000*time.Millisecond)},
		{at: 1050 * ms, n: 1, want: allowed(0, 950*time.Millisecond)},
		{at: 1400 * ms, n: 1, want: rejected(0, 600*time.Millisecond, 600*time.Millisecond)},
	})
}

// The same requests through a sliding window, worked out by hand. W = 1000
// (all in ms), C = 2, e = now - Start, P = Previous, K = Count; a request
// for n is admitted when P×(W-e) + (K+n)×W <= C×W = 2000. Remaining is
// C - K - ⌈P×(W-e)/W⌉ after the decision; Reset is 2W-e if K > 0, else W-e if
// P > 0. A rejection with room = C-K-n >= 0 retries at W-e - ⌊room×W/P⌋;
// with room < 0 at (W-e) + W - ⌊(C-n)×W/K⌋.
func TestSlidingWindowSeedTrace(t *testing.T) {
	w := mustSliding(t, limiter.WindowLimit{Capacity: 2, Window: time.Second})
	runWindowTrace(t, w, 0, []windowStep{
		// Start 0, P 0, K 0, e 900: 0 + 1×1000 = 1000 <= 2000. K 1;
		// remaining 2-1-0 = 1; reset 2000-900 = 1100.
		{at: 900 * ms, n: 1, want: allowed(1, 1100*time.Millisecond)},
		// e 950: 0 + 2×1000 = 2000 <= 2000. K 2; remaining 0; reset 1050.
		{at: 950 * ms, n: 1, want: allowed(0, 1050*time.Millisecond)},
		// Start 1000, P 2, K 0, e 0: 2×1000 + 1×1000 = 3000 > 2000.
		// room 1: retry 1000-0 - ⌊1×1000/2⌋ = 500; remaining 2-0-⌈2⌉ = 0;
		// reset (K 0, P 2) 1000.
		{at: 1000 * ms, n: 1, want: rejected(0, 500*time.Millisecond, 1000*time.Millisecond)},
		// e 50: 2×950 + 1000 = 2900 > 2000. Retry 950 - 500 = 450;
		// remaining 2-⌈1.9⌉ = 0; reset 950.
		{at: 1050 * ms, n: 1, want: rejected(0, 450*time.Millisecond, 950*time.Millisecond)},
		// e 400: 2×600 + 1000 = 2200 > 2000. Retry 600 - 500 = 100;
		// remaining 2-⌈1.2⌉ = 0; reset 600.
		{at: 1400 * ms, n: 1, want: rejected(0, 100*time.Millisecond, 600*time.Millisecond)},
		// e 600: 2×400 + 1000 = 1800 <= 2000. K 1; remaining
		// 2-1-⌈0.8⌉ = 0; reset 2000-600 = 1400.
		{at: 1600 * ms, n: 1, want: allowed(0, 1400*time.Millisecond)},
		// Start 2000, P 1, K 0, e 100: 1×900 + 1000 = 1900 <= 2000. K 1;
		// remaining 2-1-⌈0.9⌉ = 0; reset 2000-100 = 1900.
		{at: 2100 * ms, n: 1, want: allowed(0, 1900*time.Millisecond)},
		// e 200: 1×800 + 2×1000 = 2800 > 2000. room 0: retry
		// 800 - ⌊0/1⌋ = 800, the next window's start, where P' = 1 and
		// 1×1000 + 1000 = 2000 fits; remaining 2-1-⌈0.8⌉ = 0; reset
		// 2000-200 = 1800.
		{at: 2200 * ms, n: 1, want: rejected(0, 800*time.Millisecond, 1800*time.Millisecond)},
		// Start 3000, P 1, K 0, e 0: 1×1000 + 1000 = 2000 <= 2000. K 1;
		// remaining 2-1-⌈1⌉ = 0; reset 2000.
		{at: 3000 * ms, n: 1, want: allowed(0, 2000*time.Millisecond)},
		// Start 5000: window 3000 is not the previous one, P 0, K 0,
		// e 500: 1000 <= 2000. K 1; remaining 1; reset 2000-500 = 1500.
		{at: 5500 * ms, n: 1, want: allowed(1, 1500*time.Millisecond)},
	})
}

// A fixed window admits twice its capacity across a boundary; a sliding
// window does not.
func TestWindowBoundaryBurst(t *testing.T) {
	l := limiter.WindowLimit{Capacity: 2, Window: time.Second}
	t.Run("fixed", func(t *testing.T) {
		runWindowTrace(t, mustFixed(t, l), 0, []windowStep{
			{at: 999 * ms, n: 2, want: allowed(0, 1*time.Millisecond)},
			{at: 1000 * ms, n: 2, want: allowed(0, 1000*time.Millisecond)},
		})
	})
	t.Run("sliding", func(t *testing.T) {
		runWindowTrace(t, mustSliding(t, l), 0, []windowStep{
			// K 2; reset 2000-999 = 1001.
			{at: 999 * ms, n: 2, want: allowed(0, 1001*time.Millisecond)},
			// P 2, K 0, e 0: 2000 + 2000 > 2000; room 0: retry 1000.
			{at: 1000 * ms, n: 2, want: rejected(0, 1000*time.Millisecond, 1000*time.Millisecond)},
			// room 1: retry 1000 - ⌊1000/2⌋ = 500.
			{at: 1000 * ms, n: 1, want: rejected(0, 500*time.Millisecond, 1000*time.Millisecond)},
			// Start 2000, P 0 (K was 0), K 0: admitted.
			{at: 2000 * ms, n: 2, want: allowed(0, 2000*time.Millisecond)},
		})
	})
}

func TestWindowTakeMoreThanOne(t *testing.T) {
	l := limiter.WindowLimit{Capacity: 10, Window: time.Second}
	t.Run("fixed", func(t *testing.T) {
		runWindowTrace(t, mustFixed(t, l), 0, []windowStep{
			{at: 0, n: 7, want: allowed(3, 1000*time.Millisecond)},
			{at: 500 * ms, n: 5, want: rejected(3, 500*time.Millisecond, 500*time.Millisecond)},
			{at: 500 * ms, n: 3, want: allowed(0, 500*time.Millisecond)},
			{at: 1200 * ms, n: 4, want: allowed(6, 800*time.Millisecond)},
			{at: 1200 * ms, n: 10, want: rejected(6, 800*time.Millisecond, 800*time.Millisecond)},
		})
	})
	t.Run("sliding", func(t *testing.T) {
		// W 1000ms, C 10, as in TestSlidingWindowSeedTrace.
		runWindowTrace(t, mustSliding(t, l), 0, []windowStep{
			// 7×1000 <= 10000. K 7; reset 2000.
			{at: 0, n: 7, want: allowed(3, 2000*time.Millisecond)},
			// room 10-7-5 < 0: next window, where 7×(W-e'') <= 5×W
			// from e'' = W - ⌊5e9/7⌋ns = 1e9 - 714285714 ns: retry
			// 500ms + 1000ms - 714285714ns = 785714286ns.
			{at: 500 * ms, n: 5, want: rejected(3, 785714286, 1500*time.Millisecond)},
			// room 0, P 0: admitted. K 10.
			{at: 500 * ms, n: 3, want: allowed(0, 1500*time.Millisecond)},
			// P 10, K 0, e 200: 10×800 + 4×1000 = 12000 > 10000. room
			// 6: retry 800 - ⌊6×1000/10⌋ = 200; remaining
			// 10-0-⌈8⌉ = 2; reset 800.
			{at: 1200 * ms, n: 4, want: rejected(2, 200*time.Millisecond, 800*time.Millisecond)},
			// e 400: 10×600 + 4000 = 10000 <= 10000. K 4; remaining
			// 10-4-6 = 0; reset 600+1000.
			{at: 1400 * ms, n: 4, want: allowed(0, 1600*time.Millisecond)},
			// e 450: 10×550 + 5000 = 10500 > 10000. room 5: retry
			// 550 - ⌊5000/10⌋ = 50; reset 550+1000.
			{at: 1450 * ms, n: 1, want: rejected(0, 50*time.Millisecond, 1550*time.Millisecond)},
			// room 10-4-10 < 0, next window: ⌊0×W/4⌋ = 0, so only
			// when everything has expired, at 3000: retry 550+1000.
			{at: 1450 * ms, n: 10, want: rejected(0, 1550*time.Millisecond, 1550*time.Millisecond)},
			{at: 3000 * ms, n: 10, want: allowed(0, 2000*time.Millisecond)},
		})
	})
}

func TestWindowTakeNonPositiveCountsAsOne(t *testing.T) {
	l := limiter.WindowLimit{Capacity: 3, Window: time.Second}
	for _, w := range []windowLimiter{mustFixed(t, l), mustSliding(t, l)} {
		s := w.Initial(0)
		for i, n := range []int64{0, -5, math.MinInt64} {
			var d limiter.Decision
			s, d = w.Take(s, 0, n)
			if !d.Allowed || s.Count != int64(i+1) || d.Remaining != int64(2-i) {
				t.Errorf("%T: take %d: %+v, %+v; want allowed, count %d", w, n, s, d, i+1)
			}
		}
		if _, d := w.Take(s, 0, 0); d.Allowed {
			t.Errorf("%T: take 0 when full: %+v; want rejected", w, d)
		}
	}
}

func TestWindowTakeMoreThanCapacityNeverAdmitted(t *testing.T) {
	never := time.Duration(math.MaxInt64)
	l := limiter.WindowLimit{Capacity: 3, Window: time.Second}
	t.Run("fixed", func(t *testing.T) {
		runWindowTrace(t, mustFixed(t, l), 0, []windowStep{
			{at: 0, n: 4, want: rejected(3, never, 0)},
			{at: 0, n: math.MaxInt64, want: rejected(3, never, 0)},
			{at: 0, n: 3, want: allowed(0, 1000*time.Millisecond)},
			{at: 500 * ms, n: 4, want: rejected(0, never, 500*time.Millisecond)},
			// Still advanced to now, but nothing counted.
			{at: 1500 * ms, n: 4, want: rejected(3, never, 0)},
			{at: 1500 * ms, n: 3, want: allowed(0, 500*time.Millisecond)},
		})
	})
	t.Run("sliding", func(t *testing.T) {
		runWindowTrace(t, mustSliding(t, l), 0, []windowStep{
			{at: 0, n: 4, want: rejected(3, never, 0)},
			{at: 0, n: math.MaxInt64, want: rejected(3, never, 0)},
			{at: 0, n: 3, want: allowed(0, 2000*time.Millisecond)},
			{at: 500 * ms, n: 4, want: rejected(0, never, 1500*time.Millisecond)},
			// Advanced: P 3, e 500, remaining 3-⌈1.5⌉ = 1, reset 500.
			{at: 1500 * ms, n: 4, want: rejected(1, never, 500*time.Millisecond)},
			{at: 1500 * ms, n: 1, want: allowed(0, 1500*time.Millisecond)},
		})
	})
}

// windowCase is one Take from a given state, with the state and decision
// it must produce.
type windowCase struct {
	name      string
	s         limiter.WindowState
	now       int64
	n         int64
	wantState limiter.WindowState
	want      limiter.Decision
}

func runWindowCases(t *testing.T, w windowLimiter, cases []windowCase) {
	t.Helper()
	for _, tt := range cases {
		s, d := w.Take(tt.s, tt.now, tt.n)
		if s != tt.wantState || d != tt.want {
			t.Errorf("%T %s: Take(%+v, %d, %d) = %+v, %+v; want %+v, %+v",
				w, tt.name, tt.s, tt.now, tt.n, s, d, tt.wantState, tt.want)
		}
	}
}

// Time never goes backwards: a now behind Start, by any amount, is read as
// Start. The state stays in its window, and every duration is counted from
// Start.
func TestWindowClockSteps(t *testing.T) {
	second := int64(time.Second)
	start := 10 * second
	l := limiter.WindowLimit{Capacity: 3, Window: time.Second}
	behind := []struct {
		name string
		by   int64
	}{
		{"1ns behind", 1}, {"600ms behind", 600 * ms}, {"1s behind", second}, {"1s and 1ns behind", second + 1},
		{"1h behind", hour}, {"a year behind", year},
	}
	t.Run("fixed", func(t *testing.T) {
		full := limiter.WindowState{Start: start, Count: 3}
		two := limiter.WindowState{Start: start, Count: 2}
		cases := []windowCase{
			{"same instant", full, start, 1, full, rejected(0, time.Second, time.Second)},
			{"at MinInt64", full, math.MinInt64, 1, full, rejected(0, time.Second, time.Second)},
			{"forward in the window", full, start + 100*ms, 1, full, rejected(0, 900*time.Millisecond, 900*time.Millisecond)},
			{"next window", full, start + 1200*ms, 1,
				limiter.WindowState{Start: start + second, Count: 1}, allowed(2, 800*time.Millisecond)},
		}
		for _, b := range behind {
			cases = append(cases,
				windowCase{b.name + ": read as Start", full, start - b.by, 1, full, rejected(0, time.Second, time.Second)},
				windowCase{b.name + ": counted at Start", two, start - b.by, 1, full, allowed(0, time.Second)})
		}
		runWindowCases(t, mustFixed(t, l), cases)
	})
	t.Run("sliding", func(t *testing.T) {
		s := limiter.WindowState{Start: start, Count: 2, Previous: 1}
		cases := []windowCase{
			// e 0: 1×1000 + 3×1000 > 3000; room 0: retry 1000; remaining
			// 3-2-1 = 0; reset 2000.
			{"same instant", s, start, 1, s, rejected(0, time.Second, 2*time.Second)},
			{"at MinInt64", s, math.MinInt64, 1, s, rejected(0, time.Second, 2*time.Second)},
			// e 100: 900 + 3000 > 3000; room 0: retry 900.
			{"forward in the window", s, start + 100*ms, 1, s, rejected(0, 900*time.Millisecond, 1900*time.Millisecond)},
			// P 2, e 200: 2×800 + 1000 <= 3000; remaining 3-1-⌈1.6⌉ = 0.
			{"next window", s, start + 1200*ms, 1,
				limiter.WindowState{Start: start + second, Count: 1, Previous: 2}, allowed(0, 1800*time.Millisecond)},
			{"two windows on", s, start + 2500*ms, 1,
				limiter.WindowState{Start: start + 2*second, Count: 1}, allowed(2, 1500*time.Millisecond)},
		}
		one := limiter.WindowState{Start: start, Count: 1, Previous: 1}
		for _, b := range behind {
			cases = append(cases,
				windowCase{b.name + ": read as Start", s, start - b.by, 1, s, rejected(0, time.Second, 2*time.Second)},
				// e 0: 1×1000 + 2×1000 <= 3000; remaining 3-2-1 = 0.
				windowCase{b.name + ": counted at Start", one, start - b.by, 1, s, allowed(0, 2*time.Second)})
		}
		runWindowCases(t, mustSliding(t, l), cases)
	})
	// With windows of 1ms, a state a second, an hour or a year of windows
	// ahead keeps its window all the same.
	short := limiter.WindowLimit{Capacity: 3, Window: time.Millisecond}
	fixedFull := limiter.WindowState{Start: start, Count: 3}
	slidingFull := limiter.WindowState{Start: start, Count: 3, Previous: 3}
	var fixedCases, slidingCases []windowCase
	for _, b := range behind[2:] {
		fixedCases = append(fixedCases, windowCase{b.name, fixedFull, start - b.by, 1,
			fixedFull, rejected(0, time.Millisecond, time.Millisecond)})
		// K 3, room < 0: next window, from W - ⌊2×W/3⌋ = 333334ns.
		slidingCases = append(slidingCases, windowCase{b.name, slidingFull, start - b.by, 1,
			slidingFull, rejected(0, 2*time.Millisecond-666666, 2*time.Millisecond)})
	}
	runWindowCases(t, mustFixed(t, short), fixedCases)
	runWindowCases(t, mustSliding(t, short), slidingCases)

	// After a read behind Start, the next request in the window sees what
	// that one counted: nothing was given away.
	for _, w := range []windowLimiter{mustFixed(t, l), mustSliding(t, l)} {
		for _, b := range behind {
			s := limiter.WindowState{Start: start, Count: 2}
			s, d := w.Take(s, start-b.by, 1)
			if !d.Allowed || s != (limiter.WindowState{Start: start, Count: 3}) {
				t.Errorf("%T, %s: take: %+v, %+v; want allowed in the window at Start", w, b.name, s, d)
			}
			if _, d := w.Take(s, start+500*ms, 1); d.Allowed {
				t.Errorf("%T, %s: then at Start+500ms: %+v; want rejected", w, b.name, d)
			}
		}
	}
}

// The review's reproduction for the windows, with workers sharing one key:
// Capacity 3 per second. Worker A reads the clock at 10.5s and the empty
// window, then stalls until after worker B has taken 3 at 12.2s. A's store
// fails, so A decides again on B's state, still with now = 10.5s. The
// former rule restarted that state empty in A's window, admitting A, and B's
// next take at 12.3s restarted it again in window 12: 3+1+3 = 7 units in
// [12s, 13s). Read as of Start, A is counted in window 12 and every worker
// behind it is too.
func TestStalledWorkerCannotOverAdmitWindows(t *testing.T) {
	l := limiter.WindowLimit{Capacity: 3, Window: time.Second}
	type result struct {
		want      limiter.Decision
		wantState limiter.WindowState
	}
	steps := []struct {
		worker         string
		now            int64 // the worker's clock read
		n              int64
		fixed, sliding result
	}{
		// Fixed: Count 3, reset 800ms. Sliding: window 10 is not the
		// previous one: P 0, e 200; reset 800+1000.
		{"B", 12200 * ms, 3,
			result{allowed(0, 800*time.Millisecond), limiter.WindowState{Start: 12000 * ms, Count: 3}},
			result{allowed(0, 1800*time.Millisecond), limiter.WindowState{Start: 12000 * ms, Count: 3}}},
		// A, 1.7s behind: read as Start, e 0. Sliding: K 3, room < 0:
		// next window from W - ⌊2×W/3⌋: retry 2s - 666666666ns.
		{"A", 10500 * ms, 1,
			result{rejected(0, time.Second, time.Second), limiter.WindowState{Start: 12000 * ms, Count: 3}},
			result{rejected(0, 2*time.Second-666666666, 2*time.Second), limiter.WindowState{Start: 12000 * ms, Count: 3}}},
		{"B", 12300 * ms, 1,
			result{rejected(0, 700*time.Millisecond, 700*time.Millisecond), limiter.WindowState{Start: 12000 * ms, Count: 3}},
			result{rejected(0, 1700*time.Millisecond-666666666, 1700*time.Millisecond), limiter.WindowState{Start: 12000 * ms, Count: 3}}},
		{"C", 12300*ms - hour, 1,
			result{rejected(0, time.Second, time.Second), limiter.WindowState{Start: 12000 * ms, Count: 3}},
			result{rejected(0, 2*time.Second-666666666, 2*time.Second), limiter.WindowState{Start: 12000 * ms, Count: 3}}},
		{"D", 12300*ms - year, 1,
			result{rejected(0, time.Second, time.Second), limiter.WindowState{Start: 12000 * ms, Count: 3}},
			result{rejected(0, 2*time.Second-666666666, 2*time.Second), limiter.WindowState{Start: 12000 * ms, Count: 3}}},
		// Window 13. Sliding: P 3, e 0: 3000 + 1000 > 3000; room 2:
		// retry 1000ms - ⌊2000ms/3⌋; remaining 3-⌈3⌉ = 0; reset 1000.
		{"B", 13000 * ms, 1,
			result{allowed(2, time.Second), limiter.WindowState{Start: 13000 * ms, Count: 1}},
			result{rejected(0, time.Second-666666666, time.Second), limiter.WindowState{Start: 13000 * ms, Previous: 3}}},
		// A again, behind window 13: counted in it.
		{"A", 12500 * ms, 1,
			result{allowed(1, time.Second), limiter.WindowState{Start: 13000 * ms, Count: 2}},
			result{rejected(0, time.Second-666666666, time.Second), limiter.WindowState{Start: 13000 * ms, Previous: 3}}},
	}
	for _, alg := range windowLimiters(t, l) {
		w := alg.w
		// A's first attempt, on the empty window it read. Its store fails:
		// nothing of it is kept.
		shared := w.Initial(10500 * ms)
		if _, d := w.Take(shared, 10500*ms, 1); !d.Allowed {
			t.Fatalf("%T: A's first attempt: %+v", w, d)
		}
		var admitted []admission
		for i, st := range steps {
			r := st.fixed
			if alg.sliding {
				r = st.sliding
			}
			next, d := w.Take(shared, st.now, st.n)
			if d != r.want || next != r.wantState {
				t.Errorf("%T step %d: %s takes %d at %v: %+v, %+v; want %+v, %+v",
					w, i, st.worker, st.n, time.Duration(st.now), d, next, r.want, r.wantState)
			}
			if d.Allowed {
				// At the instant the decision was made as of: after the
				// worker read its clock, before it stored.
				admitted = append(admitted, admission{at: max(st.now, shared.Start), tokens: st.n})
			}
			shared = next
		}
		checkWindowBounds(t, 0, w, alg.sliding, admitted)
	}
}

func TestWindowGarbageStateIsClamped(t *testing.T) {
	never := time.Duration(math.MaxInt64)
	l := limiter.WindowLimit{Capacity: 3, Window: time.Second}
	second := int64(time.Second)
	t.Run("fixed", func(t *testing.T) {
		runWindowCases(t, mustFixed(t, l), []windowCase{
			{"negative count", limiter.WindowState{Count: -1}, 0, 1,
				limiter.WindowState{Count: 1}, allowed(2, time.Second)},
			{"MinInt64 count", limiter.WindowState{Count: math.MinInt64}, 500 * ms, 3,
				limiter.WindowState{Count: 3}, allowed(0, 500*time.Millisecond)},
			{"count above capacity", limiter.WindowState{Count: 4}, 0, 1,
				limiter.WindowState{Count: 3}, rejected(0, time.Second, time.Second)},
			{"Previous dropped", limiter.WindowState{Count: 1, Previous: 3}, 0, 1,
				limiter.WindowState{Count: 2}, allowed(1, time.Second)},
			{"previous window not kept", limiter.WindowState{Start: -second, Count: 3}, 0, 1,
				limiter.WindowState{Count: 1}, allowed(2, time.Second)},
			{"Start not aligned, behind now", limiter.WindowState{Start: 1, Count: 3}, 700 * ms, 1,
				limiter.WindowState{Count: 1}, allowed(2, 300*time.Millisecond)},
			{"Start not aligned, just ahead", limiter.WindowState{Start: 900 * ms, Count: 3}, 700 * ms, 1,
				limiter.WindowState{Count: 1}, allowed(2, 300*time.Millisecond)},
			{"Start MaxInt64", limiter.WindowState{Start: math.MaxInt64, Count: 3}, 0, 1,
				limiter.WindowState{Count: 1}, allowed(2, time.Second)},
			{"Start MinInt64", limiter.WindowState{Start: math.MinInt64, Count: 3}, 0, 1,
				limiter.WindowState{Count: 1}, allowed(2, time.Second)},
			// An aligned Start far in the future, which only a corrupt
			// value can hold, freezes the key until the clock reaches
			// it: never admit more.
			{"aligned Start far in the future: frozen", limiter.WindowState{Start: 9223372036 * second, Count: 3}, 0, 1,
				limiter.WindowState{Start: 9223372036 * second, Count: 3}, rejected(0, time.Second, time.Second)},
			{"everything extreme, n too large", limiter.WindowState{Start: math.MaxInt64, Count: math.MinInt64, Previous: math.MaxInt64},
				math.MinInt64, math.MaxInt64, limiter.WindowState{Start: -9223372036 * second}, rejected(3, never, 0)},
		})
	})
	t.Run("sliding", func(t *testing.T) {
		runWindowCases(t, mustSliding(t, l), []windowCase{
			{"negative counts", limiter.WindowState{Count: -1, Previous: -1}, 0, 1,
				limiter.WindowState{Count: 1}, allowed(2, 2*time.Second)},
			// P 3, e 500: 3×500 + 1000 <= 3000; remaining 3-1-⌈1.5⌉ = 0.
			{"MinInt64 count, MaxInt64 previous", limiter.WindowState{Count: math.MinInt64, Previous: math.MaxInt64}, 500 * ms, 1,
				limiter.WindowState{Count: 1, Previous: 3}, allowed(0, 1500*time.Millisecond)},
			// K 3, room < 0: next window from W - ⌊2×W/3⌋ = 333333334ns.
			{"count above capacity", limiter.WindowState{Count: 4}, 0, 1,
				limiter.WindowState{Count: 3}, rejected(0, 2*time.Second-666666666, 2*time.Second)},
			// P 3, e 0, room 2: retry W - ⌊2×W/3⌋.
			{"count above capacity becomes Previous", limiter.WindowState{Start: -second, Count: 9}, 0, 1,
				limiter.WindowState{Previous: 3}, rejected(0, time.Second-666666666, time.Second)},
			{"Start not aligned, behind now", limiter.WindowState{Start: 1, Count: 3, Previous: 3}, 700 * ms, 1,
				limiter.WindowState{Count: 1}, allowed(2, 1300*time.Millisecond)},
			{"Start not aligned, one window back", limiter.WindowState{Start: -second + 1, Count: 3}, 0, 1,
				limiter.WindowState{Count: 1}, allowed(2, 2*time.Second)},
			{"Start MaxInt64", limiter.WindowState{Start: math.MaxInt64, Count: 3, Previous: 3}, 0, 1,
				limiter.WindowState{Count: 1}, allowed(2, 2*time.Second)},
			{"Start MinInt64", limiter.WindowState{Start: math.MinInt64, Count: 3, Previous: 3}, 0, 1,
				limiter.WindowState{Count: 1}, allowed(2, 2*time.Second)},
			// Frozen, as for a fixed window. K 3, room < 0: next window
			// from W - ⌊2×W/3⌋.
			{"aligned Start far in the future: frozen", limiter.WindowState{Start: 9223372036 * second, Count: 3, Previous: 3}, 0, 1,
				limiter.WindowState{Start: 9223372036 * second, Count: 3, Previous: 3}, rejected(0, 2*time.Second-666666666, 2*time.Second)},
			{"everything extreme, n too large", limiter.WindowState{Start: math.MaxInt64, Count: math.MinInt64, Previous: math.MaxInt64},
				math.MinInt64, math.MaxInt64, limiter.WindowState{Start: -9223372036 * second}, rejected(3, never, 0)},
		})
	})
}

// Windows are aligned on the time base with floor division, so the window
// of -1ns is [-W, 0).
func TestWindowNegativeNow(t *testing.T) {
	l := limiter.WindowLimit{Capacity: 2, Window: time.Second}
	for _, tt := range []struct{ now, start int64 }{
		{-1, -1000 * ms}, {-999 * ms, -1000 * ms}, {-1000 * ms, -1000 * ms}, {-1000*ms - 1, -2000 * ms},
		{0, 0}, {1, 0}, {-1500 * ms, -2000 * ms},
	} {
		for _, w := range []windowLimiter{mustFixed(t, l), mustSliding(t, l)} {
			if got := w.Initial(tt.now); got != (limiter.WindowState{Start: tt.start}) {
				t.Errorf("%T: Initial(%d) = %+v, want Start %d", w, tt.now, got, tt.start)
			}
		}
	}
	t.Run("fixed", func(t *testing.T) {
		runWindowTrace(t, mustFixed(t, l), -1500*ms, []windowStep{
			{at: -1500 * ms, n: 1, want: allowed(1, 500*time.Millisecond)},
			{at: -1001 * ms, n: 1, want: allowed(0, 1*time.Millisecond)},
			{at: -1000 * ms, n: 1, want: allowed(1, 1000*time.Millisecond)},
			{at: -1 * ms, n: 1, want: allowed(0, 1*time.Millisecond)},
			{at: -1, n: 1, want: rejected(0, 1, 1)},
			{at: 0, n: 1, want: allowed(1, 1000*time.Millisecond)},
		})
	})
	t.Run("sliding", func(t *testing.T) {
		// In ms, as in TestSlidingWindowSeedTrace.
		runWindowTrace(t, mustSliding(t, l), -1500*ms, []windowStep{
			// Start -2000, e 500: K 1; reset 500+1000.
			{at: -1500 * ms, n: 1, want: allowed(1, 1500*time.Millisecond)},
			// e 999: K 2; reset 1+1000.
			{at: -1001 * ms, n: 1, want: allowed(0, 1001*time.Millisecond)},
			// Start -1000, P 2, e 0: 2000+1000 > 2000; room 1: retry
			// 1000 - ⌊1000/2⌋ = 500; reset 1000.
			{at: -1000 * ms, n: 1, want: rejected(0, 500*time.Millisecond, 1000*time.Millisecond)},
			// e 500: 2×500 + 1000 <= 2000; K 1; remaining 2-1-1 = 0.
			{at: -500 * ms, n: 1, want: allowed(0, 1500*time.Millisecond)},
			// e 999: 2×1 + 2×1000 > 2000; room 0: retry 1; remaining
			// 2-1-⌈0.002⌉ = 0; reset 1+1000.
			{at: -1 * ms, n: 1, want: rejected(0, 1*time.Millisecond, 1001*time.Millisecond)},
			// Start 0, P 1, e 0: 1000 + 1000 <= 2000; remaining 2-1-1 = 0.
			{at: 0, n: 1, want: allowed(0, 2000*time.Millisecond)},
		})
	})
}

// Times at the ends of int64. The window containing math.MinInt64 starts
// below it, and a now inside it is read as the start of the next window.
func TestWindowExtremeTimes(t *testing.T) {
	const maxWindow = time.Duration(1 << 61)
	second := int64(time.Second)
	tests := []struct {
		window    time.Duration
		now       int64
		wantStart int64
		wantReset time.Duration // fixed, after one admitted unit
	}{
		{time.Second, math.MinInt64, -9223372036 * second, time.Second},
		{time.Second, -9223372036 * second, -9223372036 * second, time.Second},
		{time.Second, -9223372036*second - 1, -9223372036 * second, time.Second},
		{time.Second, math.MaxInt64, 9223372036 * second, time.Duration(second - (math.MaxInt64 - 9223372036*second))},
		{maxWindow, math.MinInt64, math.MinInt64, maxWindow},
		{maxWindow, math.MaxInt64, 3 << 61, 1},
		{maxWindow, 0, 0, maxWindow},
		{maxWindow, -1, -1 << 61, 1},
		// -2^63 = 1 (mod 3): its window would start at -2^63-1.
		{3, math.MinInt64, math.MinInt64 + 2, 3},
		{3, math.MinInt64 + 1, math.MinInt64 + 2, 3},
		{3, math.MinInt64 + 2, math.MinInt64 + 2, 3},
		{3, math.MinInt64 + 3, math.MinInt64 + 2, 2},
		{1, math.MinInt64, math.MinInt64, 1},
		{1, math.MaxInt64, math.MaxInt64, 1},
	}
	for _, tt := range tests {
		l := limiter.WindowLimit{Capacity: 1, Window: tt.window}
		fixed, sliding := mustFixed(t, l), mustSliding(t, l)
		want := limiter.WindowState{Start: tt.wantStart, Count: 1}
		if s, d := fixed.Take(fixed.Initial(tt.now), tt.now, 1); s != want || d != allowed(0, tt.wantReset) {
			t.Errorf("fixed %v at %d: %+v, %+v; want %+v, reset %v", tt.window, tt.now, s, d, want, tt.wantReset)
		}
		if s, d := sliding.Take(sliding.Initial(tt.now), tt.now, 1); s != want || d != allowed(0, tt.wantReset+tt.window) {
			t.Errorf("sliding %v at %d: %+v, %+v; want %+v, reset %v", tt.window, tt.now, s, d, want, tt.wantReset+tt.window)
		}
		// A full previous window: the longest wait there is.
		prev := limiter.WindowState{Start: tt.wantStart, Previous: 1, Count: 1}
		if _, d := sliding.Take(prev, tt.now, 1); d.Allowed || d.RetryAfter != tt.wantReset+tt.window {
			t.Errorf("sliding %v at %d, full: %+v; want retry %v", tt.window, tt.now, d, tt.wantReset+tt.window)
		}
	}
}

func TestWindowGive(t *testing.T) {
	second := int64(time.Second)
	l := limiter.WindowLimit{Capacity: 3, Window: time.Second}
	for _, sliding := range []bool{false, true} {
		var w windowLimiter = mustFixed(t, l)
		previous := int64(0) // what a fixed window keeps of Previous
		if sliding {
			w = mustSliding(t, l)
			previous = 1
		}
		s := limiter.WindowState{Start: second, Count: 2, Previous: 1}
		stored := limiter.WindowState{Start: second, Count: 2, Previous: previous} // valid for w
		tests := []struct {
			name string
			s    limiter.WindowState
			now  int64
			n    int64
			want limiter.WindowState
		}{
			{"undo one", s, second + 500*ms, 1, limiter.WindowState{Start: second, Count: 1, Previous: previous}},
			{"zero counts as one", s, second, 0, limiter.WindowState{Start: second, Count: 1, Previous: previous}},
			{"negative counts as one", s, second, math.MinInt64, limiter.WindowState{Start: second, Count: 1, Previous: previous}},
			{"not below zero", s, second, 3, limiter.WindowState{Start: second, Previous: previous}},
			{"more than capacity", s, second, math.MaxInt64, limiter.WindowState{Start: second, Previous: previous}},
			// A now in an earlier window than the stored one: the state has moved on since
			// the units were counted, so the refund is dropped (never over-admit).
			{"now behind Start: dropped", stored, second - 1, 1, stored},
			{"garbage count", limiter.WindowState{Start: second, Count: math.MaxInt64}, second, 1, limiter.WindowState{Start: second, Count: 2}},
			// A refund for an older window is dropped; the state still
			// advances to now.
			{"next window: dropped", s, 2 * second, 1, limiter.WindowState{Start: 2 * second, Previous: 2 * previous}},
			{"later window: dropped", s, 5 * second, 1, limiter.WindowState{Start: 5 * second}},
			{"an hour behind: dropped", stored, second - hour, 1, stored},
			{"a year behind: dropped", stored, -year, 1, stored},
		}
		for _, tt := range tests {
			if got := w.Give(tt.s, tt.now, tt.n); got != tt.want {
				t.Errorf("%T %s: Give(%+v, %v, %d) = %+v, want %+v", w, tt.name, tt.s, time.Duration(tt.now), tt.n, got, tt.want)
			}
		}
		// Give undoes Take for every n that Take admits.
		for _, n := range []int64{-1, 0, 1, 2} {
			start := limiter.WindowState{Start: second, Previous: previous}
			taken, d := w.Take(start, second+300*ms, n)
			if back := w.Give(taken, second+300*ms, n); !d.Allowed || back != start {
				t.Errorf("%T: Take(%d) then Give(%d): %+v, %+v; want allowed and %+v", w, n, n, d, back, start)
			}
		}
	}
}

func TestWindowValid(t *testing.T) {
	second := int64(time.Second)
	l := limiter.WindowLimit{Capacity: 3, Window: time.Second}
	fixed, sliding := mustFixed(t, l), mustSliding(t, l)
	for _, tt := range []struct {
		s                 limiter.WindowState
		wantFixed, wantSl bool
	}{
		{limiter.WindowState{}, true, true},
		{limiter.WindowState{Start: 5 * second, Count: 3}, true, true},
		{limiter.WindowState{Start: -5 * second, Count: 1}, true, true},
		{limiter.WindowState{Start: 5 * second, Count: 1, Previous: 3}, false, true},
		{limiter.WindowState{Start: 5*second + 1}, false, false},
		{limiter.WindowState{Start: -1}, false, false},
		{limiter.WindowState{Start: math.MinInt64}, false, false},
		{limiter.WindowState{Start: math.MaxInt64}, false, false},
		{limiter.WindowState{Count: -1}, false, false},
		{limiter.WindowState{Count: 4}, false, false},
		{limiter.WindowState{Count: math.MinInt64}, false, false},
		{limiter.WindowState{Previous: -1}, false, false},
		{limiter.WindowState{Previous: 4}, false, false},
		{limiter.WindowState{Previous: math.MaxInt64}, false, false},
	} {
		if got := fixed.Valid(tt.s); got != tt.wantFixed {
			t.Errorf("fixed Valid(%+v) = %v, want %v", tt.s, got, tt.wantFixed)
		}
		if got := sliding.Valid(tt.s); got != tt.wantSl {
			t.Errorf("sliding Valid(%+v) = %v, want %v", tt.s, got, tt.wantSl)
		}
	}
}

func TestZeroWindowsAdmitNothing(t *testing.T) {
	s := limiter.WindowState{Start: 5, Count: 1, Previous: 2}
	for _, w := range []windowLimiter{limiter.FixedWindow{}, limiter.SlidingWindow{}} {
		got, d := w.Take(s, 100, 1)
		if d.Allowed || d.RetryAfter != time.Duration(math.MaxInt64) || got != s {
			t.Errorf("zero %T Take = %+v, %+v; want rejected forever, state unchanged", w, got, d)
		}
		if got := w.Give(s, 100, 1); got != s {
			t.Errorf("zero %T Give = %+v, want state unchanged", w, got)
		}
		if w.Valid(limiter.WindowState{}) || w.Valid(w.Initial(100)) {
			t.Errorf("zero %T finds a state valid", w)
		}
		if w.Limit() != (limiter.WindowLimit{}) {
			t.Errorf("zero %T BucketLimit = %+v", w, w.Limit())
		}
	}
}

func TestNewWindowValidates(t *testing.T) {
	tests := []struct {
		l       limiter.WindowLimit
		wantErr string // "" if accepted; else a word the error must name
	}{
		{limiter.WindowLimit{Capacity: 2, Window: time.Second}, ""},
		{limiter.WindowLimit{Capacity: 1, Window: 1}, ""},
		{limiter.WindowLimit{Capacity: 1_000_000_000, Window: 24 * time.Hour}, ""},
		{limiter.WindowLimit{Capacity: 1_000_000_000, Window: 1 << 61}, ""},
		{limiter.WindowLimit{Capacity: 7, Window: time.Millisecond}, ""},
		{limiter.WindowLimit{Capacity: 0, Window: time.Second}, "Capacity"},
		{limiter.WindowLimit{Capacity: -1, Window: time.Second}, "Capacity"},
		{limiter.WindowLimit{Capacity: math.MinInt64, Window: time.Second}, "Capacity"},
		{limiter.WindowLimit{Capacity: 1_000_000_001, Window: time.Second}, "Capacity"},
		{limiter.WindowLimit{Capacity: math.MaxInt64, Window: time.Second}, "Capacity"},
		{limiter.WindowLimit{Capacity: 2, Window: 0}, "Window"},
		{limiter.WindowLimit{Capacity: 2, Window: -time.Second}, "Window"},
		{limiter.WindowLimit{Capacity: 2, Window: math.MinInt64}, "Window"},
		{limiter.WindowLimit{Capacity: 2, Window: 1<<61 + 1}, "Window"},
		{limiter.WindowLimit{Capacity: 2, Window: math.MaxInt64}, "Window"},
	}
	for _, tt := range tests {
		fixed, errFixed := limiter.NewFixedWindow(tt.l)
		sliding, errSliding := limiter.NewSlidingWindow(tt.l)
		for _, r := range []struct {
			w   windowLimiter
			err error
		}{{fixed, errFixed}, {sliding, errSliding}} {
			switch {
			case tt.wantErr == "" && r.err != nil:
				t.Errorf("New%T(%+v): unexpected error %v", r.w, tt.l, r.err)
			case tt.wantErr == "" && r.w.Limit() != tt.l:
				t.Errorf("New%T(%+v).Limit() = %+v", r.w, tt.l, r.w.Limit())
			case tt.wantErr != "" && r.err == nil:
				t.Errorf("New%T(%+v): accepted, want error naming %q", r.w, tt.l, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(r.err.Error(), tt.wantErr):
				t.Errorf("New%T(%+v): error %q does not name %q", r.w, tt.l, r.err, tt.wantErr)
			}
		}
	}
}

// fnvWindowFingerprint is the windows' documented hash, computed with
// hash/fnv: a tag byte, then Capacity and Window.
func fnvWindowFingerprint(tag byte, l limiter.WindowLimit) uint32 {
	var buf [17]byte
	buf[0] = tag
	binary.LittleEndian.PutUint64(buf[1:], uint64(l.Capacity))
	binary.LittleEndian.PutUint64(buf[9:], uint64(l.Window))
	h := fnv.New32a()
	h.Write(buf[:])
	return h.Sum32()
}

func TestWindowFingerprint(t *testing.T) {
	limits := []limiter.WindowLimit{
		{Capacity: 2, Window: time.Second},
		{Capacity: 3, Window: time.Second},
		{Capacity: 2, Window: time.Second + 1},
		{Capacity: 1, Window: 2 * time.Second},
		{Capacity: 1, Window: 3 * time.Second},
		{Capacity: 3, Window: time.Millisecond},
		{Capacity: 1_000_000, Window: 24 * time.Hour},
	}
	seen := map[uint32]string{}
	note := func(fp uint32, what string) {
		if other, dup := seen[fp]; dup {
			t.Errorf("Fingerprint %#x shared by %s and %s", fp, what, other)
		}
		seen[fp] = what
	}
	for _, l := range limits {
		fixed, sliding := mustFixed(t, l), mustSliding(t, l)
		note(fixed.Fingerprint(), "fixed "+l.Window.String())
		note(sliding.Fingerprint(), "sliding "+l.Window.String())
		if fixed.Fingerprint() != mustFixed(t, l).Fingerprint() || sliding.Fingerprint() != mustSliding(t, l).Fingerprint() {
			t.Errorf("Fingerprint of %+v not stable", l)
		}
		if got, want := fixed.Fingerprint(), fnvWindowFingerprint('F', l); got != want {
			t.Errorf("fixed Fingerprint of %+v = %#x, want FNV-1a %#x", l, got, want)
		}
		if got, want := sliding.Fingerprint(), fnvWindowFingerprint('S', l); got != want {
			t.Errorf("sliding Fingerprint of %+v = %#x, want FNV-1a %#x", l, got, want)
		}
		// Buckets of the same numbers: Capacity per Window, and (when
		// different and valid) a burst of Capacity refilled by 1.
		rate := mustBucket(t, limiter.BucketLimit{Capacity: l.Capacity, RefillTokens: l.Capacity, RefillInterval: l.Window})
		note(rate.Fingerprint(), "bucket rate "+l.Window.String())
		if b, err := limiter.NewBucket(limiter.BucketLimit{Capacity: l.Capacity, RefillTokens: 1, RefillInterval: l.Window}); err == nil && l.Capacity > 1 {
			note(b.Fingerprint(), "bucket burst "+l.Window.String())
		}
	}
	// Pinned so a change to the hash, which would discard every stored
	// WindowState, cannot go unnoticed.
	if got, want := mustFixed(t, limits[0]).Fingerprint(), fnvWindowFingerprint('F', limits[0]); got != want || got != 0xdd3bcdbe {
		t.Errorf("fixed Fingerprint of %+v = %#x, want %#x (FNV-1a %#x)", limits[0], got, 0xdd3bcdbe, want)
	}
	if got, want := mustSliding(t, limits[0]).Fingerprint(), fnvWindowFingerprint('S', limits[0]); got != want || got != 0xfa35dda5 {
		t.Errorf("sliding Fingerprint of %+v = %#x, want %#x (FNV-1a %#x)", limits[0], got, 0xfa35dda5, want)
	}
}

func TestWindowsDoNotAllocate(t *testing.T) {
	l := limiter.WindowLimit{Capacity: 100, Window: time.Second}
	fixed, sliding := mustFixed(t, l), mustSliding(t, l)
	fs, ss := fixed.Initial(0), sliding.Initial(0)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 7 * ms
		fs, _ = fixed.Take(fs, now, 1)
		fs = fixed.Give(fs, now, 1)
		fs, _ = fixed.Take(fs, now, 2)
		ss, _ = sliding.Take(ss, now, 1)
		ss = sliding.Give(ss, now, 1)
		ss, _ = sliding.Take(ss, now, 2)
		_ = fixed.Valid(fs) && sliding.Valid(ss)
		_ = fixed.Fingerprint() + sliding.Fingerprint()
		_, _ = fixed.Initial(now), sliding.Initial(now)
	})
	if allocs != 0 {
		t.Errorf("window Take/Give/Valid/Fingerprint/Initial allocate %v times per run, want 0", allocs)
	}
}
