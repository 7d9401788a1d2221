package limiter_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// refilledLevel is the reference for Bucket's refill, in credits, computed
// in big integers so that no input can overflow it: clamp the level; then a
// now behind Last, by any amount, is read as Last (time never goes
// backwards), and a later now adds elapsed × creditsPerNano up to capacity.
func refilledLevel(capacityCredits, creditsPerNano int64, s limiter.BucketState, now int64) (level int64, last int64) {
	level = min(max(s.Level, 0), capacityCredits)
	elapsed := new(big.Int).Sub(big.NewInt(now), big.NewInt(s.Last))
	if elapsed.Sign() < 0 {
		return level, s.Last
	}
	sum := elapsed.Mul(elapsed, big.NewInt(creditsPerNano))
	sum.Add(sum, big.NewInt(level))
	if sum.Cmp(big.NewInt(capacityCredits)) >= 0 {
		return capacityCredits, now
	}
	return sum.Int64(), now
}

// ceilQuo is ⌈a/d⌉ for a >= 0, d >= 1, in big integers.
func ceilQuo(a, d int64) int64 {
	q, m := new(big.Int).QuoRem(big.NewInt(a), big.NewInt(d), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// creditUnits recomputes the units of the package documentation.
func creditUnits(l limiter.BucketLimit) (perToken, perNano int64, capacity *big.Int) {
	g := new(big.Int).GCD(nil, nil, big.NewInt(l.RefillTokens), big.NewInt(int64(l.RefillInterval))).Int64()
	perToken, perNano = int64(l.RefillInterval)/g, l.RefillTokens/g
	return perToken, perNano, new(big.Int).Mul(big.NewInt(l.Capacity), big.NewInt(perToken))
}

func FuzzTake(f *testing.F) {
	f.Add(int64(3), int64(1), int64(time.Second), int64(0), int64(0), int64(300*time.Millisecond), int64(1))
	f.Fuzz(func(t *testing.T, capacity, refillTokens, intervalNanos, level, last, now, n int64) {
		l := limiter.BucketLimit{Capacity: capacity, RefillTokens: refillTokens, RefillInterval: time.Duration(intervalNanos)}
		b, err := limiter.NewBucket(l)
		if capacity < 1 || refillTokens < 1 || intervalNanos < 1 {
			if err == nil {
				t.Fatalf("NewBucket(%+v) accepted a non-positive field", l)
			}
			return
		}
		perToken, perNano, capacityCredits := creditUnits(l)
		if tooBig := capacityCredits.Cmp(big.NewInt(1<<62)) > 0; tooBig != (err != nil) {
			t.Fatalf("NewBucket(%+v): capacity %v credits, error %v", l, capacityCredits, err)
		}
		if err != nil {
			return
		}
		capCredits := capacityCredits.Int64()
		s := limiter.BucketState{Level: level, Last: last}
		wantLevel, wantLast := refilledLevel(capCredits, perNano, s, now)
		taken := max(n, 1)

		got, d := b.Take(s, now, n)
		if !b.Valid(got) || got.Level < 0 || got.Level > capCredits {
			t.Fatalf("Take(%+v, %d, %d) with %+v: level %d outside [0, %d]", s, now, n, l, got.Level, capCredits)
		}
		if d.Allowed != (d.RetryAfter == 0) || d.RetryAfter < 0 || d.Remaining < 0 || d.Reset < 0 {
			t.Fatalf("Take(%+v, %d, %d) with %+v: inconsistent decision %+v", s, now, n, l, d)
		}
		// Time never goes backwards, whatever now and Last are.
		if got.Last < s.Last || got.Last < now {
			t.Fatalf("Take(%+v, %d, %d) with %+v: Last %d is behind Last or now", s, now, n, l, got.Last)
		}
		if got.Last != wantLast {
			t.Fatalf("Take(%+v, %d, %d) with %+v: Last %d, want %d", s, now, n, l, got.Last, wantLast)
		}
		if d.Allowed {
			// taken <= capacity here, so taken × perToken <= 2^62.
			if got.Level != wantLevel-taken*perToken {
				t.Fatalf("Take(%+v, %d, %d) with %+v: allowed, level %d, want %d - %d×%d", s, now, n, l, got.Level, wantLevel, taken, perToken)
			}
		} else {
			if got.Level != wantLevel {
				t.Fatalf("Take(%+v, %d, %d) with %+v: rejected, level %d, want refilled %d", s, now, n, l, got.Level, wantLevel)
			}
			wantRetry := time.Duration(math.MaxInt64)
			if taken <= capacity {
				wantRetry = time.Duration(ceilQuo(taken*perToken-wantLevel, perNano))
			}
			if d.RetryAfter != wantRetry {
				t.Fatalf("Take(%+v, %d, %d) with %+v: RetryAfter %d, want %d", s, now, n, l, d.RetryAfter, wantRetry)
			}
		}
		if wantReset := time.Duration(ceilQuo(capCredits-got.Level, perNano)); d.Reset != wantReset {
			t.Fatalf("Take(%+v, %d, %d) with %+v: Reset %d, want %d", s, now, n, l, d.Reset, wantReset)
		}
		if d.Remaining != got.Level/perToken {
			t.Fatalf("Take(%+v, %d, %d) with %+v: remaining %d, level %d credits", s, now, n, l, d.Remaining, got.Level)
		}

		given := b.Give(s, now, n)
		refund := new(big.Int).Mul(big.NewInt(min(taken, capacity)), big.NewInt(perToken))
		refund.Add(refund, big.NewInt(wantLevel))
		if refund.Cmp(capacityCredits) > 0 {
			refund = capacityCredits
		}
		if given.Level != refund.Int64() || given.Last != wantLast {
			t.Fatalf("Give(%+v, %d, %d) with %+v: %+v, want level %v at %d", s, now, n, l, given, refund, wantLast)
		}

		// A Give right after an allowed Take restores the level exactly.
		if d.Allowed {
			if back := b.Give(got, got.Last, n); back.Level != wantLevel {
				t.Fatalf("Take then Give(%d) with %+v: level %d, want %d", n, l, back.Level, wantLevel)
			}
		}
	})
}
