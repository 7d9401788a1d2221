package limiter_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// bigLevel is s's level in credits, Tokens×perToken + Credits, as stored (not clamped).
func bigLevel(s limiter.BucketState, perToken int64) *big.Int {
	level := new(big.Int).Mul(big.NewInt(s.Tokens), big.NewInt(perToken))
	return level.Add(level, big.NewInt(s.Credits))
}

// refilledLevel is the reference for Bucket's refill, in credits, computed
// in big integers so that no input can overflow it: clamp the two parts of
// the level; then a now behind Last, by any amount, is read as Last (time
// never goes backwards), and a later now adds elapsed × creditsPerNano up to
// capacity.
func refilledLevel(capacity, perToken, perNano int64, s limiter.BucketState, now int64) (level *big.Int, last int64) {
	tokens := min(max(s.Tokens, 0), capacity)
	credits := min(max(s.Credits, 0), perToken-1)
	if tokens == capacity {
		credits = 0
	}
	level = bigLevel(limiter.BucketState{Tokens: tokens, Credits: credits}, perToken)
	full := new(big.Int).Mul(big.NewInt(capacity), big.NewInt(perToken))
	elapsed := new(big.Int).Sub(big.NewInt(now), big.NewInt(s.Last))
	if elapsed.Sign() <= 0 {
		return level, s.Last
	}
	level.Add(level, elapsed.Mul(elapsed, big.NewInt(perNano)))
	if level.Cmp(full) > 0 {
		level = full
	}
	return level, now
}

// ceilNanos is ⌈a/d⌉ for a >= 0, d >= 1, as a duration: math.MaxInt64 when beyond it.
func ceilNanos(a *big.Int, d int64) time.Duration {
	q, m := new(big.Int).QuoRem(a, big.NewInt(d), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(q.Int64())
}

// creditUnits recomputes the units of the package documentation.
func creditUnits(l limiter.BucketLimit) (perToken, perNano int64, capacity *big.Int) {
	g := new(big.Int).GCD(nil, nil, big.NewInt(l.RefillTokens), big.NewInt(int64(l.RefillInterval))).Int64()
	perToken, perNano = int64(l.RefillInterval)/g, l.RefillTokens/g
	return perToken, perNano, new(big.Int).Mul(big.NewInt(l.Capacity), big.NewInt(perToken))
}

func FuzzTake(f *testing.F) {
	f.Add(int64(3), int64(1), int64(time.Second), int64(0), int64(0), int64(0), int64(300*time.Millisecond), int64(1))
	f.Add(int64(1e9), int64(1), int64(366*24*time.Hour), int64(5), int64(1e15), int64(0), int64(30*24*time.Hour), int64(7))
	f.Fuzz(func(t *testing.T, capacity, refillTokens, intervalNanos, tokens, credits, last, now, n int64) {
		l := limiter.BucketLimit{Capacity: capacity, RefillTokens: refillTokens, RefillInterval: time.Duration(intervalNanos)}
		b, err := limiter.NewBucket(l)
		if invalid := capacity < 1 || refillTokens < 1 || intervalNanos < 1; invalid != (err != nil) {
			t.Fatalf("NewBucket(%+v): error %v", l, err)
		}
		if err != nil {
			return
		}
		checkTake(t, b, limiter.BucketState{Tokens: tokens, Credits: credits, Last: last}, now, n)
	})
}

// checkTake checks Take, IdleAt and Give on s at now against levels in big integers.
func checkTake(t *testing.T, b limiter.Bucket, s limiter.BucketState, now, n int64) {
	t.Helper()
	l, capacity := b.Limit(), b.Limit().Capacity
	perToken, perNano, full := creditUnits(l)
	if b.CreditsPerToken() != perToken || b.CreditsPerNano() != perNano {
		t.Fatalf("%+v: %d credits per token, %d per ns; want %d, %d", l, b.CreditsPerToken(), b.CreditsPerNano(), perToken, perNano)
	}
	wantLevel, wantLast := refilledLevel(capacity, perToken, perNano, s, now)
	taken := max(n, 1)
	takenCredits := new(big.Int).Mul(big.NewInt(min(taken, capacity)), big.NewInt(perToken))

	got, d := b.Take(s, now, n)
	if !b.Valid(got) {
		t.Fatalf("Take(%+v, %d, %d) with %+v: invalid state %+v", s, now, n, l, got)
	}
	if d.Allowed != (d.RetryAfter == 0) || d.RetryAfter < 0 || d.Remaining < 0 || d.Reset < 0 {
		t.Fatalf("Take(%+v, %d, %d) with %+v: inconsistent decision %+v", s, now, n, l, d)
	}
	// Time never goes backwards, whatever now and Last are.
	if got.Last != wantLast || got.Last < s.Last || got.Last < now {
		t.Fatalf("Take(%+v, %d, %d) with %+v: Last %d, want %d", s, now, n, l, got.Last, wantLast)
	}
	gotLevel := bigLevel(got, perToken)
	if d.Allowed {
		if want := new(big.Int).Sub(wantLevel, takenCredits); taken > capacity || gotLevel.Cmp(want) != 0 {
			t.Fatalf("Take(%+v, %d, %d) with %+v: allowed, level %v, want %v - %d tokens", s, now, n, l, gotLevel, wantLevel, taken)
		}
	} else {
		if gotLevel.Cmp(wantLevel) != 0 {
			t.Fatalf("Take(%+v, %d, %d) with %+v: rejected, level %v, want refilled %v", s, now, n, l, gotLevel, wantLevel)
		}
		wantRetry := time.Duration(math.MaxInt64)
		if taken <= capacity {
			if takenCredits.Cmp(wantLevel) <= 0 {
				t.Fatalf("Take(%+v, %d, %d) with %+v: rejected with %v credits for %v", s, now, n, l, wantLevel, takenCredits)
			}
			wantRetry = ceilNanos(new(big.Int).Sub(takenCredits, wantLevel), perNano)
		}
		if d.RetryAfter != wantRetry {
			t.Fatalf("Take(%+v, %d, %d) with %+v: RetryAfter %d, want %d", s, now, n, l, d.RetryAfter, wantRetry)
		}
	}
	if wantReset := ceilNanos(new(big.Int).Sub(full, gotLevel), perNano); d.Reset != wantReset {
		t.Fatalf("Take(%+v, %d, %d) with %+v: Reset %d, want %d", s, now, n, l, d.Reset, wantReset)
	}
	if want := new(big.Int).Quo(gotLevel, big.NewInt(perToken)); d.Remaining != want.Int64() {
		t.Fatalf("Take(%+v, %d, %d) with %+v: remaining %d, level %v credits", s, now, n, l, d.Remaining, gotLevel)
	}
	// IdleAt: Last plus the exact time to refill what is missing, math.MaxInt64 beyond it.
	wantIdle := new(big.Int).Sub(full, gotLevel)
	wantIdle.Add(wantIdle, big.NewInt(perNano-1)).Quo(wantIdle, big.NewInt(perNano)).Add(wantIdle, big.NewInt(got.Last))
	if !wantIdle.IsInt64() {
		wantIdle.SetInt64(math.MaxInt64)
	}
	if idle := b.IdleAt(got); idle != wantIdle.Int64() {
		t.Fatalf("IdleAt(%+v) with %+v = %d, want %v", got, l, idle, wantIdle)
	}
	if idle, ok := d.IdleAt(got); ok && idle != wantIdle.Int64() || !ok && (got.Last >= 0 || d.Reset != math.MaxInt64) {
		t.Fatalf("Take(%+v, %d, %d) with %+v: Decision.IdleAt %d, %v; want %v", s, now, n, l, idle, ok, wantIdle)
	}

	given := b.Give(s, now, n)
	refund := new(big.Int).Add(wantLevel, takenCredits)
	if refund.Cmp(full) > 0 {
		refund = full
	}
	if !b.Valid(given) || bigLevel(given, perToken).Cmp(refund) != 0 || given.Last != wantLast {
		t.Fatalf("Give(%+v, %d, %d) with %+v: %+v, want level %v at %d", s, now, n, l, given, refund, wantLast)
	}

	// A Give right after an allowed Take restores the level exactly.
	if d.Allowed {
		if back := b.Give(got, got.Last, n); bigLevel(back, perToken).Cmp(wantLevel) != 0 {
			t.Fatalf("Take then Give(%d) with %+v: level %v, want %v", n, l, bigLevel(back, perToken), wantLevel)
		}
	}
}
