package limiter_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// advancedWindowState is the reference for the windows' advance, computed
// in big integers so that no input can overflow it: find the window of now
// (read as the next window's start inside the lowest, partial one), clamp
// the counts; then an aligned Start ahead of that window, by any amount,
// is kept with now read as Start (time never goes backwards), and otherwise
// the state moves to the window of now. It returns the state and the time
// elapsed since its Start.
func advancedWindowState(l limiter.WindowLimit, sliding bool, s limiter.WindowState, now int64) (limiter.WindowState, int64) {
	w := big.NewInt(int64(l.Window))
	at := big.NewInt(now)
	start := new(big.Int).Div(at, w) // Euclidean: the floor, for w > 0
	start.Mul(start, w)
	elapsed := new(big.Int).Sub(at, start)
	if start.Cmp(big.NewInt(math.MinInt64)) < 0 {
		start.Add(start, w)
		elapsed.SetInt64(0)
	}
	count := min(max(s.Count, 0), l.Capacity)
	previous := int64(0)
	if sliding {
		previous = min(max(s.Previous, 0), l.Capacity)
	}
	stored := big.NewInt(s.Start)
	aligned := new(big.Int).Mod(stored, w).Sign() == 0
	switch {
	case stored.Cmp(start) == 0:
		return limiter.WindowState{Start: s.Start, Count: count, Previous: previous}, elapsed.Int64()
	case stored.Cmp(start) > 0 && aligned:
		return limiter.WindowState{Start: s.Start, Count: count, Previous: previous}, 0
	case sliding && new(big.Int).Sub(start, stored).Cmp(w) == 0:
		return limiter.WindowState{Start: start.Int64(), Previous: count}, elapsed.Int64()
	}
	return limiter.WindowState{Start: start.Int64()}, elapsed.Int64()
}

func FuzzWindows(f *testing.F) {
	f.Add(false, int64(2), int64(time.Second), int64(time.Second), int64(2), int64(0), int64(1400*time.Millisecond), int64(1))
	f.Add(true, int64(2), int64(time.Second), int64(time.Second), int64(0), int64(2), int64(1400*time.Millisecond), int64(1))
	f.Fuzz(func(t *testing.T, sliding bool, capacity, windowNanos, start, count, previous, now, n int64) {
		l := limiter.WindowLimit{Capacity: capacity, Window: time.Duration(windowNanos)}
		var w windowLimiter
		var err error
		if sliding {
			w, err = limiter.NewSlidingWindow(l)
		} else {
			w, err = limiter.NewFixedWindow(l)
		}
		if invalid := capacity < 1 || capacity > 1_000_000_000 || windowNanos < 1 || windowNanos > 1<<61; invalid != (err != nil) {
			t.Fatalf("New(%+v), sliding %v: error %v", l, sliding, err)
		}
		if err != nil {
			return
		}
		s := limiter.WindowState{Start: start, Count: count, Previous: previous}
		adv, elapsed := advancedWindowState(l, sliding, s, now)
		taken := max(n, 1)

		got, d := w.Take(s, now, n)
		if !w.Valid(got) || got.Count < 0 || got.Count > capacity {
			t.Fatalf("%T %+v: Take(%+v, %d, %d): state %+v invalid", w, l, s, now, n, got)
		}
		if d.Allowed != (d.RetryAfter == 0) || d.RetryAfter < 0 || d.Remaining < 0 || d.Reset < 0 {
			t.Fatalf("%T %+v: Take(%+v, %d, %d): inconsistent decision %+v", w, l, s, now, n, d)
		}
		// Time never goes backwards: an aligned Start ahead of now is
		// kept, with now read as Start.
		if s.Start%windowNanos == 0 && s.Start > now && got.Start != s.Start {
			t.Fatalf("%T %+v: Take(%+v, %d, %d): Start %d moved back from %d", w, l, s, now, n, got.Start, s.Start)
		}
		want := adv
		if d.Allowed {
			want.Count += taken
		}
		if got != want {
			t.Fatalf("%T %+v: Take(%+v, %d, %d) allowed %v: state %+v, want %+v", w, l, s, now, n, d.Allowed, got, want)
		}
		if !d.Allowed && taken <= capacity && d.RetryAfter > 2*l.Window {
			t.Fatalf("%T %+v: Take(%+v, %d, %d): RetryAfter %v beyond two windows", w, l, s, now, n, d.RetryAfter)
		}

		// The whole decision, against the reference on the same state,
		// on a time base that starts at the state's Start.
		ref := &referenceWindow{limit: l, sliding: sliding, counts: map[int64]int64{
			0:                adv.Count,
			-int64(l.Window): adv.Previous,
		}}
		if wantD := ref.take(elapsed, n); d != wantD {
			t.Fatalf("%T %+v: Take(%+v, %d, %d): %+v, reference %+v", w, l, s, now, n, d, wantD)
		}

		given := w.Give(s, now, n)
		wantGiven := limiter.WindowState{Start: adv.Start, Count: max(adv.Count-taken, 0), Previous: adv.Previous}
		if nowWindow := now - ((now%int64(l.Window))+int64(l.Window))%int64(l.Window); w.Valid(s) && now >= math.MinInt64+int64(l.Window) && nowWindow < s.Start {
			// A refund from a now in an earlier window than the stored one is dropped: the
			// state has moved on since the units were counted.
			wantGiven = s
		}
		if given != wantGiven {
			t.Fatalf("%T %+v: Give(%+v, %d, %d) = %+v, want %+v", w, l, s, now, n, given, wantGiven)
		}
		// A Give right after an allowed Take restores the state exactly.
		if d.Allowed {
			if back := w.Give(got, got.Start+elapsed, n); back != adv {
				t.Fatalf("%T %+v: Take then Give(%d): %+v, want %+v", w, l, n, back, adv)
			}
		}
	})
}
