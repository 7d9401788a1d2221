package limiter_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// reserve is the reference's Reserve: exact rational tokens that may go below zero.
func (r *referenceBucket) reserve(now, n int64, maxWait time.Duration) limiter.Reservation {
	r.advance(now)
	n = max(n, 1)
	var res limiter.Reservation
	want := new(big.Rat).SetInt64(n)
	switch {
	case n > r.limit.Capacity:
		res.RetryAfter = time.Duration(math.MaxInt64)
	case r.tokens.Cmp(want) >= 0:
		r.tokens.Sub(r.tokens, want)
		res.OK = true
	default:
		wait := r.nanosUntil(want)
		if wait <= maxWait {
			r.tokens.Sub(r.tokens, want)
			res.OK, res.Wait = true, wait
		} else {
			res.RetryAfter = wait
		}
	}
	if r.tokens.Sign() > 0 {
		res.Remaining = new(big.Int).Quo(r.tokens.Num(), r.tokens.Denom()).Int64()
	}
	res.Reset = r.nanosUntil(new(big.Rat).SetInt64(r.limit.Capacity))
	return res
}

// unreserve gives n tokens back (clamped to 1..Capacity), up to the capacity.
func (r *referenceBucket) unreserve(now, n int64) {
	r.advance(now)
	r.tokens.Add(r.tokens, new(big.Rat).SetInt64(min(max(n, 1), r.limit.Capacity)))
	if capacity := new(big.Rat).SetInt64(r.limit.Capacity); r.tokens.Cmp(capacity) > 0 {
		r.tokens = capacity
	}
}

func randomMaxWait(rng *rand.Rand, l limiter.BucketLimit) time.Duration {
	perToken := max(l.RefillInterval/time.Duration(l.RefillTokens), 1)
	switch rng.IntN(5) {
	case 0:
		return 0
	case 1:
		return time.Duration(rng.Int64N(int64(perToken) + 1))
	case 2:
		return time.Duration(rng.Int64N(int64(5*perToken) + 1))
	case 3:
		return time.Millisecond + time.Duration(rng.Int64N(int64(time.Minute)))
	default:
		return 60 * time.Second
	}
}

// TestReserveMatchesReferenceModel plays random reservations and give-backs through Bucket and
// the exact reference and requires identical outcomes and states, a debt within MaxDebt, and,
// without give-backs, the RFC 1363 bound over the instants the reserved tokens are due.
func TestReserveMatchesReferenceModel(t *testing.T) {
	t.Parallel()
	for _, giveBacks := range []bool{false, true} {
		for _, seed := range propertySeeds(t) {
			rng := rand.New(rand.NewPCG(seed, 0xde1a))
			l, b := randomBucket(rng)
			maxWait := randomMaxWait(rng, l)
			perToken := creditsPerToken(b)
			ref := newReferenceBucket(l, 0)
			s := b.Initial(0)
			now := int64(0)
			var due []admission
			for i := range 200 {
				now += randomGap(rng, l) / int64(1+rng.IntN(4))
				n := randomCount(rng, l)
				if giveBacks && rng.IntN(5) == 0 {
					s = b.Unreserve(s, now, n)
					ref.unreserve(now, n)
				} else {
					var got limiter.Reservation
					s, got = b.Reserve(s, now, n, maxWait)
					if want := ref.reserve(now, n, maxWait); got != want {
						t.Fatalf("seed %#x, limit %+v, max wait %v, step %d: reserve %d at %d: got %+v, want %+v",
							seed, l, maxWait, i, n, now, got, want)
					}
					if got.OK {
						due = append(due, admission{at: now + int64(got.Wait), tokens: max(n, 1)})
					}
				}
				if level := tokensOf(s, perToken); level.Cmp(ref.tokens) != 0 {
					t.Fatalf("seed %#x, limit %+v, step %d: level %v tokens, reference %v", seed, l, i, level, ref.tokens)
				}
				if !b.ValidOwing(s, b.DebtTokens(maxWait)) {
					t.Fatalf("seed %#x, limit %+v, step %d: %+v owes more than DebtTokens(%v) = %d",
						seed, l, i, s, maxWait, b.DebtTokens(maxWait))
				}
			}
			if !giveBacks {
				sort.SliceStable(due, func(i, j int) bool { return due[i].at < due[j].at })
				checkPaced(t, seed, l, due)
			}
		}
	}
}

// checkPaced is the RFC 1363 bound over the instants reserved tokens are due. A wait is rounded
// up to a whole nanosecond from its own now, so two due instants may be up to 1ns closer than
// the exact ones: each interval is widened by that nanosecond, and no more.
func checkPaced(t *testing.T, seed uint64, l limiter.BucketLimit, due []admission) {
	t.Helper()
	interval := big.NewInt(int64(l.RefillInterval))
	var lhs, rhs, term big.Int
	for i := range due {
		var tokens int64
		for j := i; j < len(due); j++ {
			tokens += due[j].tokens
			lhs.Mul(big.NewInt(tokens), interval)
			rhs.Mul(big.NewInt(l.Capacity), interval)
			term.Mul(big.NewInt(l.RefillTokens), big.NewInt(due[j].at-due[i].at+1))
			rhs.Add(&rhs, &term)
			if lhs.Cmp(&rhs) > 0 {
				t.Fatalf("seed %#x, limit %+v: tokens due %d..%d in [%d, %d] exceed the RFC 1363 bound",
					seed, l, i, j, due[i].at, due[j].at)
			}
		}
	}
}

// Held requests go on when their tokens are due: with capacity 1 and one token per 200ms, five
// requests at once are due 0, 200, 400, 600 and 800ms later; with max_delay 1s the next five
// fit too (up to 1s), and the one after is refused with the wait it would have had.
func TestReservePacesABurst(t *testing.T) {
	b, err := limiter.NewBucket(limiter.BucketLimit{Capacity: 1, RefillTokens: 1, RefillInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := b.Initial(0)
	for i, want := range []time.Duration{0, 200, 400, 600, 800, 1000} {
		var r limiter.Reservation
		s, r = b.Reserve(s, 0, 1, time.Second)
		if !r.OK || r.Wait != want*time.Millisecond {
			t.Fatalf("request %d: %+v, want held %v", i, r, want*time.Millisecond)
		}
	}
	_, r := b.Reserve(s, 0, 1, time.Second)
	if r.OK || r.RetryAfter != 1200*time.Millisecond {
		t.Fatalf("request 6: %+v, want refused, RetryAfter 1.2s", r)
	}
	if debt := b.DebtTokens(time.Second); s.Tokens != -5 || s.Credits != 0 || debt != 5 {
		t.Fatalf("%+v after six reservations, want 5 tokens owed, the whole DebtTokens (%d)", s, debt)
	}
	// Given back at 100ms, the last one's token lets a request at 100ms be held 900ms.
	s = b.Unreserve(s, 100*int64(time.Millisecond), 1)
	if _, r := b.Reserve(s, 100*int64(time.Millisecond), 1, time.Second); !r.OK || r.Wait != 900*time.Millisecond {
		t.Fatalf("after a give-back: %+v, want held 900ms", r)
	}
}
