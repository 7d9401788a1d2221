package limiter_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// referenceWindow is a deliberately simple window limiter: it keeps the
// units admitted in every window by the window's start, recomputes the
// estimate from scratch as a big.Rat at any instant, and finds RetryAfter
// and Reset by searching for the first instant that admits. FixedWindow and
// SlidingWindow must agree with it on every decision.
type referenceWindow struct {
	limit   limiter.WindowLimit
	sliding bool
	counts  map[int64]int64 // units admitted, by window start
	latest  int64           // start of the window of the latest request: WindowState.Start
}

func newReferenceWindow(l limiter.WindowLimit, sliding bool, start int64) *referenceWindow {
	r := &referenceWindow{limit: l, sliding: sliding, counts: map[int64]int64{}}
	r.latest = r.windowStart(start)
	return r
}

// windowStart is ⌊now/W⌋×W. Test traces stay far from the int64 limits, so
// this cannot overflow.
func (r *referenceWindow) windowStart(now int64) int64 {
	w := int64(r.limit.Window)
	q := now / w
	if q*w > now {
		q--
	}
	return q * w
}

// advance moves to the window of now and returns the instant now is read
// as. Time never goes backwards: a now behind the latest window's start, by
// any amount, is read as that start.
func (r *referenceWindow) advance(now int64) int64 {
	if r.latest > now {
		return r.latest
	}
	r.latest = r.windowStart(now)
	return now
}

// estimate is the units the limiter counts against Capacity at instant t,
// if nothing is admitted in between: the count of t's window, plus, sliding,
// the previous window's count weighted by the share of it that the window
// of length W ending at t still covers.
func (r *referenceWindow) estimate(t int64) *big.Rat {
	start := r.windowStart(t)
	est := new(big.Rat).SetInt64(r.counts[start])
	if r.sliding {
		w := int64(r.limit.Window)
		covered := big.NewRat(w-(t-start), w)
		est.Add(est, covered.Mul(covered, new(big.Rat).SetInt64(r.counts[start-w])))
	}
	return est
}

// admits reports whether n units would be admitted at instant t.
func (r *referenceWindow) admits(t, n int64) bool {
	est := r.estimate(t)
	est.Add(est, new(big.Rat).SetInt64(n))
	return est.Cmp(new(big.Rat).SetInt64(r.limit.Capacity)) <= 0
}

// firstAfter is the least d in [lo, 2W] with ok(t+d), found by bisection:
// the estimate never grows while nothing is admitted, so ok, once true,
// stays true, and ok(t+2W) holds since both windows that count are empty.
func (r *referenceWindow) firstAfter(t, lo int64, ok func(int64) bool) time.Duration {
	hi := 2 * int64(r.limit.Window)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(t + mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return time.Duration(lo)
}

func (r *referenceWindow) take(now, n int64) limiter.Decision {
	t := r.advance(now)
	n = max(n, 1)
	var d limiter.Decision
	switch {
	case n > r.limit.Capacity:
		d.RetryAfter = time.Duration(math.MaxInt64)
	case r.admits(t, n):
		r.counts[r.windowStart(t)] += n
		d.Allowed = true
	default:
		d.RetryAfter = r.firstAfter(t, 1, func(at int64) bool { return r.admits(at, n) })
	}
	left := new(big.Rat).Sub(new(big.Rat).SetInt64(r.limit.Capacity), r.estimate(t))
	d.Remaining = max(new(big.Int).Quo(left.Num(), left.Denom()).Int64(), 0) // truncation is floor for left >= 0
	d.Reset = r.firstAfter(t, 0, func(at int64) bool { return r.estimate(at).Sign() == 0 })
	return d
}

// give uncounts n units from the window of now. A window the state was not
// in yet has counted nothing, so a refund for an older window is dropped.
func (r *referenceWindow) give(now, n int64) {
	if r.windowStart(now) < r.latest {
		// The state has moved to a later window since these units were counted: the refund is
		// dropped, never credited to a window that did not count them.
		return
	}
	t := r.advance(now)
	start := r.windowStart(t)
	r.counts[start] = max(r.counts[start]-max(n, 1), 0)
}

// state is the WindowState the limiter must hold.
func (r *referenceWindow) state() limiter.WindowState {
	s := limiter.WindowState{Start: r.latest, Count: r.counts[r.latest]}
	if r.sliding {
		s.Previous = r.counts[r.latest-int64(r.limit.Window)]
	}
	return s
}

// randomWindowLimit mixes tiny and large capacities with nanosecond to
// 366-day windows.
func randomWindowLimit(rng *rand.Rand) limiter.WindowLimit {
	const day = 24 * time.Hour
	windows := []time.Duration{1, 7, 333, time.Millisecond, 7 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 3 * time.Second, time.Minute, day, 7 * day, 30 * day, 366 * day}
	l := limiter.WindowLimit{Capacity: 1 + rng.Int64N(10), Window: windows[rng.IntN(len(windows))]}
	switch rng.IntN(5) {
	case 0:
		l.Capacity = 1 + rng.Int64N(1_000_000_000)
	case 1:
		l.Capacity = 1 + rng.Int64N(1000)
	case 2:
		l.Window = 1 + time.Duration(rng.Int64N(int64(10*time.Second)))
	}
	return l
}

// randomWindowGap returns the time to the next request: bursts at the same
// instant or nanoseconds apart, gaps around one unit's share of the window,
// around the window and across a few windows, and long idles.
func randomWindowGap(rng *rand.Rand, l limiter.WindowLimit) int64 {
	w := int64(l.Window)
	switch rng.IntN(10) {
	case 0, 1:
		return 0
	case 2:
		return rng.Int64N(10)
	case 3, 4:
		return rng.Int64N(max(w/l.Capacity, 1) + 1)
	case 5, 6:
		return rng.Int64N(w + 1)
	case 7, 8:
		return rng.Int64N(3*w + 1)
	default:
		return rng.Int64N(int64(365 * 24 * time.Hour))
	}
}

func randomWindowCount(rng *rand.Rand, l limiter.WindowLimit) int64 {
	switch rng.IntN(10) {
	case 0:
		return 1 + rng.Int64N(l.Capacity+2) // sometimes more than capacity
	case 1:
		return -rng.Int64N(3) // counts as 1
	case 2:
		return 1 + rng.Int64N(min(l.Capacity, 3))
	case 3:
		return max(l.Capacity/(1+rng.Int64N(4)), 1) // a large share
	default:
		return 1
	}
}

// windowLimiters returns both algorithms for l, each with whether it slides.
func windowLimiters(t testing.TB, l limiter.WindowLimit) []struct {
	w       windowLimiter
	sliding bool
} {
	return []struct {
		w       windowLimiter
		sliding bool
	}{{mustFixed(t, l), false}, {mustSliding(t, l), true}}
}

// checkRetryAfter probes the reference around a rejection's RetryAfter,
// counted from t, the instant now was read as: one nanosecond earlier the
// request is still rejected, at RetryAfter it is admitted.
func checkRetryAfter(t *testing.T, ref *referenceWindow, at, n int64, d limiter.Decision) bool {
	t.Helper()
	n = max(n, 1)
	if d.Allowed || n > ref.limit.Capacity {
		return true
	}
	retry := int64(d.RetryAfter)
	return retry > 0 && !ref.admits(at+retry-1, n) && ref.admits(at+retry, n)
}

// TestWindowsMatchReferenceModel plays random sorted request times through
// both window algorithms and the reference and requires identical decisions
// and states, probes every RetryAfter, and then checks the bound of each
// algorithm on the admissions of the trace.
func TestWindowsMatchReferenceModel(t *testing.T) {
	t.Parallel()
	for _, seed := range propertySeeds(t) {
		rng := rand.New(rand.NewPCG(seed, 0x3d0f))
		l := randomWindowLimit(rng)
		start := rng.Int64N(int64(time.Hour)) - int64(30*time.Minute)
		type trace struct{ at, n int64 }
		steps := make([]trace, 200)
		now := start
		for i := range steps {
			now += randomWindowGap(rng, l)
			steps[i] = trace{now, randomWindowCount(rng, l)}
		}
		for _, alg := range windowLimiters(t, l) {
			ref := newReferenceWindow(l, alg.sliding, start)
			s := alg.w.Initial(start)
			var admitted []admission
			for i, st := range steps {
				var got limiter.Decision
				s, got = alg.w.Take(s, st.at, st.n)
				want := ref.take(st.at, st.n)
				if got != want {
					t.Fatalf("seed %#x, %T %+v, step %d: take %d at %d: got %+v, want %+v", seed, alg.w, l, i, st.n, st.at, got, want)
				}
				if s != ref.state() {
					t.Fatalf("seed %#x, %T %+v, step %d: state %+v, reference %+v", seed, alg.w, l, i, s, ref.state())
				}
				if !checkRetryAfter(t, ref, st.at, st.n, got) {
					t.Fatalf("seed %#x, %T %+v, step %d: take %d at %d: RetryAfter %v is not the first instant admitted", seed, alg.w, l, i, st.n, st.at, got.RetryAfter)
				}
				if got.Allowed {
					admitted = append(admitted, admission{at: st.at, tokens: max(st.n, 1)})
				}
			}
			checkWindowBounds(t, seed, alg.w, alg.sliding, admitted)
		}
	}
}

// alignedViolation finds an aligned window [k×W, (k+1)×W) in which more
// than limit units were admitted.
func alignedViolation(window time.Duration, limit int64, admitted []admission) (first, last int, found bool) {
	w := int64(window)
	index := func(at int64) int64 { // ⌊at/W⌋
		q := at / w
		if q*w > at {
			q--
		}
		return q
	}
	for i := range admitted {
		var units int64
		for j := i; j < len(admitted); j++ {
			if index(admitted[j].at) == index(admitted[i].at) {
				if units += admitted[j].tokens; units > limit {
					return i, j, true
				}
			}
		}
	}
	return 0, 0, false
}

// intervalViolation finds an interval [t, t+W) of sorted admissions in
// which more than limit units were admitted. Intervals starting at an
// admission are the tightest, so only those are checked.
func intervalViolation(window time.Duration, limit int64, admitted []admission) (first, last int, found bool) {
	for i := range admitted {
		var units int64
		for j := i; j < len(admitted) && admitted[j].at-admitted[i].at < int64(window); j++ {
			if units += admitted[j].tokens; units > limit {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

// checkWindowBounds checks what each algorithm may admit: both at most
// Capacity units in any aligned window, and the sliding window, the bound of
// its approximation, at most 2×Capacity in any interval of length Window.
// (The second follows from the first, as such an interval meets at most two
// aligned windows, but it is the bound the approximation is known by.)
func checkWindowBounds(t *testing.T, seed uint64, w windowLimiter, sliding bool, admitted []admission) {
	t.Helper()
	l := w.Limit()
	if i, j, found := alignedViolation(l.Window, l.Capacity, admitted); found {
		t.Fatalf("seed %#x, %T %+v: admissions %d..%d at %d and %d, in one aligned window, exceed Capacity",
			seed, w, l, i, j, admitted[i].at, admitted[j].at)
	}
	if i, j, found := intervalViolation(l.Window, 2*l.Capacity, admitted); sliding && found {
		t.Fatalf("seed %#x, %T %+v: admissions %d..%d in [%d, %d] exceed 2×Capacity within a Window",
			seed, w, l, i, j, admitted[i].at, admitted[j].at)
	}
}

// The bound checks themselves must notice an over-admitting trace.
func TestWindowBoundChecks(t *testing.T) {
	second := int64(time.Second)
	boundary := []admission{{999 * ms, 2}, {second, 2}, {2*second - 1, 0}}
	if i, j, found := alignedViolation(time.Second, 2, boundary); found {
		t.Errorf("boundary burst flagged in an aligned window at %d..%d", i, j)
	}
	if i, j, found := intervalViolation(time.Second, 4, boundary); found {
		t.Errorf("2×Capacity within a Window flagged at %d..%d", i, j)
	}
	if _, _, found := intervalViolation(time.Second, 2, boundary); !found {
		t.Errorf("boundary burst: 4 units within 1ms not flagged against 2")
	}
	for _, over := range [][]admission{
		{{0, 1}, {999 * ms, 2}},
		{{-second, 1}, {-1, 2}},
		{{5 * second, 3}},
	} {
		if _, _, found := alignedViolation(time.Second, 2, over); !found {
			t.Errorf("3 units in one aligned window not flagged: %+v", over)
		}
	}
	// What the former rule, which restarted a state far ahead of now in
	// the window of now, admitted in TestStalledWorkerCannotOverAdmitWindows
	// (fixed), at the instants they were stored: 7 units in one window.
	formerRule := []admission{{12200 * ms, 3}, {12200 * ms, 1}, {12300 * ms, 3}}
	if _, _, found := alignedViolation(time.Second, 3, formerRule); !found {
		t.Errorf("the former rule's 7 units in one aligned window not flagged against 3")
	}
	if _, _, found := intervalViolation(time.Second, 4, []admission{{0, 2}, {999 * ms, 3}}); !found {
		t.Errorf("5 units within 999ms not flagged against 4")
	}
	if i, j, found := intervalViolation(time.Second, 4, []admission{{0, 2}, {second, 3}}); found {
		t.Errorf("5 units 1s apart flagged at %d..%d: the interval is half-open", i, j)
	}
}

// TestWindowsMatchReferenceModelWithClockSteps adds what sorted traces lack:
// workers whose now is behind the stored Start, by a little or by far, and
// (in one of two runs) refunds between takes. Start never moves back, and
// without refunds each algorithm's bound holds over the admissions, each at
// the instant it was decided as of: the later of now and the stored Start,
// which lies between the worker's clock read and its store.
func TestWindowsMatchReferenceModelWithClockSteps(t *testing.T) {
	t.Parallel()
	for _, refunds := range []bool{true, false} {
		for _, seed := range propertySeeds(t) {
			rng := rand.New(rand.NewPCG(seed, 0xc10c))
			l := randomWindowLimit(rng)
			for _, alg := range windowLimiters(t, l) {
				rng := rand.New(rand.NewPCG(seed, 0xc10d))
				ref := newReferenceWindow(l, alg.sliding, 0)
				s := alg.w.Initial(0)
				clock := int64(0) // the latest clock read of any worker
				var admitted []admission
				for i := range 200 {
					clock += randomWindowGap(rng, l)
					now := clock - randomLag(rng)
					n := randomWindowCount(rng, l)
					at := max(now, s.Start) // the instant now is read as
					before := s.Start
					if refunds && rng.IntN(5) == 0 {
						s = alg.w.Give(s, now, n)
						ref.give(now, n)
					} else {
						var got limiter.Decision
						s, got = alg.w.Take(s, now, n)
						if want := ref.take(now, n); got != want {
							t.Fatalf("seed %#x, %T %+v, step %d: take %d at %d: got %+v, want %+v", seed, alg.w, l, i, n, now, got, want)
						}
						if !checkRetryAfter(t, ref, at, n, got) {
							t.Fatalf("seed %#x, %T %+v, step %d: take %d at %d: RetryAfter %v is not the first instant admitted", seed, alg.w, l, i, n, now, got.RetryAfter)
						}
						if got.Allowed {
							admitted = append(admitted, admission{at: at, tokens: max(n, 1)})
						}
					}
					if s != ref.state() {
						t.Fatalf("seed %#x, %T %+v, step %d: state %+v, reference %+v", seed, alg.w, l, i, s, ref.state())
					}
					if s.Start < before || s.Start > at {
						t.Fatalf("seed %#x, %T %+v, step %d: at %d, Start went from %d to %d", seed, alg.w, l, i, now, before, s.Start)
					}
				}
				if !refunds {
					checkWindowBounds(t, seed, alg.w, alg.sliding, admitted)
				}
			}
		}
	}
}
