package limiter_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// referenceBucket is a deliberately simple token bucket: exact rational
// tokens, refilled at RefillTokens/RefillInterval per nanosecond, with no
// unit tricks. Bucket must agree with it on every decision.
type referenceBucket struct {
	limit  limiter.BucketLimit
	tokens *big.Rat
	last   int64
}

func newReferenceBucket(l limiter.BucketLimit, start int64) *referenceBucket {
	return &referenceBucket{limit: l, tokens: new(big.Rat).SetInt64(l.Capacity), last: start}
}

// perNano is the refill rate in tokens per nanosecond.
func (r *referenceBucket) perNano() *big.Rat {
	return big.NewRat(r.limit.RefillTokens, int64(r.limit.RefillInterval))
}

// advance refills the bucket to now. Time never goes backwards: a now
// behind the last one, by any amount, is read as the last one, so nothing
// is refilled and every duration is counted from r.last.
func (r *referenceBucket) advance(now int64) {
	if now < r.last {
		return
	}
	added := new(big.Rat).Mul(new(big.Rat).SetInt64(now-r.last), r.perNano())
	r.tokens.Add(r.tokens, added)
	if capacity := new(big.Rat).SetInt64(r.limit.Capacity); r.tokens.Cmp(capacity) > 0 {
		r.tokens = capacity
	}
	r.last = now
}

// nanosUntil is the exact time, rounded up to a nanosecond, until the
// bucket holds `tokens`.
func (r *referenceBucket) nanosUntil(tokens *big.Rat) time.Duration {
	missing := new(big.Rat).Sub(tokens, r.tokens)
	if missing.Sign() <= 0 {
		return 0
	}
	return ratCeilNanos(missing.Quo(missing, r.perNano()))
}

// ratCeilNanos is ⌈x⌉ nanoseconds for x >= 0, or math.MaxInt64 when beyond it (a wait of
// more than 292 years, which only slow refills of huge capacities reach).
func ratCeilNanos(x *big.Rat) time.Duration {
	q, m := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(q.Int64())
}

// tokensOf is s's level in tokens, exactly.
func tokensOf(s limiter.BucketState, perToken int64) *big.Rat {
	return new(big.Rat).Add(new(big.Rat).SetInt64(s.Tokens), big.NewRat(s.Credits, perToken))
}

func (r *referenceBucket) take(now, n int64) limiter.Decision {
	r.advance(now)
	n = max(n, 1)
	var d limiter.Decision
	want := new(big.Rat).SetInt64(n)
	switch {
	case n > r.limit.Capacity:
		d.RetryAfter = time.Duration(math.MaxInt64)
	case r.tokens.Cmp(want) >= 0:
		r.tokens.Sub(r.tokens, want)
		d.Allowed = true
	default:
		d.RetryAfter = r.nanosUntil(want)
	}
	d.Remaining = new(big.Int).Quo(r.tokens.Num(), r.tokens.Denom()).Int64()
	d.Reset = r.nanosUntil(new(big.Rat).SetInt64(r.limit.Capacity))
	return d
}

func (r *referenceBucket) give(now, n int64) {
	r.advance(now)
	r.tokens.Add(r.tokens, new(big.Rat).SetInt64(max(n, 1)))
	if capacity := new(big.Rat).SetInt64(r.limit.Capacity); r.tokens.Cmp(capacity) > 0 {
		r.tokens = capacity
	}
}

// randomBucket draws a limit and its Bucket.
func randomBucket(rng *rand.Rand) (limiter.BucketLimit, limiter.Bucket) {
	for {
		l := randomLimit(rng)
		if b, err := limiter.NewBucket(l); err == nil {
			return l, b
		}
	}
}

// randomLimit mixes the shapes that matter: tiny and large capacities,
// rates that do and do not divide their interval, nanosecond intervals.
func randomLimit(rng *rand.Rand) limiter.BucketLimit {
	const day = 24 * time.Hour
	intervals := []time.Duration{1, 7, 333, time.Millisecond, 7 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 3 * time.Second, time.Minute, day, 7 * day, 30 * day, 366 * day}
	l := limiter.BucketLimit{
		Capacity:       1 + rng.Int64N(10),
		RefillTokens:   1 + rng.Int64N(5),
		RefillInterval: intervals[rng.IntN(len(intervals))],
	}
	switch rng.IntN(7) {
	case 6:
		// Long quotas with capacities whose level needs more than 64 bits of credits.
		l.Capacity = []int64{53_376, 100_000, 1_000_000_000}[rng.IntN(3)]
		l.RefillInterval = intervals[len(intervals)-1-rng.IntN(4)]
	case 0:
		l.Capacity = 1 + rng.Int64N(1_000_000)
	case 1:
		l.RefillTokens = 1 + rng.Int64N(1_000_000)
	case 2:
		l.RefillInterval = 1 + time.Duration(rng.Int64N(int64(10*time.Second)))
	}
	return l
}

// randomGap returns the time to the next request: bursts at the same
// instant or nanoseconds apart, gaps around one token's refill, and long
// idles that refill the bucket many times over.
func randomGap(rng *rand.Rand, l limiter.BucketLimit) int64 {
	perToken := max(int64(l.RefillInterval)/l.RefillTokens, 1)
	switch rng.IntN(10) {
	case 0, 1:
		return 0
	case 2:
		return rng.Int64N(10)
	case 3, 4, 5:
		return rng.Int64N(perToken + 1)
	case 6, 7:
		return rng.Int64N(4*perToken + 1)
	case 8:
		// Up to a full refill, or to the largest gap a trace can take.
		if full := int64(l.RefillInterval) * min(l.Capacity+1, 1000) / l.RefillTokens; full > 0 && full < 1<<56 {
			return rng.Int64N(full + 1)
		}
		return rng.Int64N(1 << 56)
	default:
		return rng.Int64N(int64(365 * 24 * time.Hour))
	}
}

func randomCount(rng *rand.Rand, l limiter.BucketLimit) int64 {
	switch rng.IntN(10) {
	case 0:
		return 1 + rng.Int64N(l.Capacity+2) // sometimes more than capacity
	case 1:
		return -rng.Int64N(3) // counts as 1
	case 2:
		return 1 + rng.Int64N(min(l.Capacity, 3))
	default:
		return 1
	}
}

// propertySeeds is a fixed list so that a failure names a seed that
// reproduces it.
func propertySeeds(t *testing.T) []uint64 {
	count := 300
	if testing.Short() {
		count = 30
	}
	seeds := make([]uint64, count)
	for i := range seeds {
		seeds[i] = uint64(i)*0x9e3779b97f4a7c15 + 1
	}
	return seeds
}

type admission struct {
	at     int64
	tokens int64
}

// TestMatchesReferenceModel plays random sorted request times through
// Bucket and the reference and requires identical decisions, then checks
// the RFC 1363 bound on every window of the trace.
func TestMatchesReferenceModel(t *testing.T) {
	t.Parallel()
	for _, seed := range propertySeeds(t) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		l, b := randomBucket(rng)
		perToken := creditsPerToken(b)
		start := rng.Int64N(int64(time.Hour)) - int64(30*time.Minute)
		ref := newReferenceBucket(l, start)
		s := b.Initial(start)
		now := start
		var admitted []admission
		for i := range 200 {
			now += randomGap(rng, l)
			n := randomCount(rng, l)
			var got limiter.Decision
			s, got = b.Take(s, now, n)
			want := ref.take(now, n)
			if got != want {
				t.Fatalf("seed %#x, limit %+v, step %d: take %d at %d: got %+v, want %+v", seed, l, i, n, now, got, want)
			}
			if level := tokensOf(s, perToken); level.Cmp(ref.tokens) != 0 {
				t.Fatalf("seed %#x, limit %+v, step %d: level %v tokens, reference %v", seed, l, i, level, ref.tokens)
			}
			if got.Allowed {
				admitted = append(admitted, admission{at: now, tokens: max(n, 1)})
			}
		}
		checkRFC1363Bound(t, seed, l, admitted)
	}
}

// rfc1363Violation finds a window [t1, t2] in which the tokens admitted
// exceed Capacity + RefillTokens×(t2-t1)/RefillInterval, compared exactly by
// multiplying out the interval. Windows that start and end at admissions are
// the tightest, so only those are checked.
func rfc1363Violation(l limiter.BucketLimit, admitted []admission) (first, last int, found bool) {
	interval := big.NewInt(int64(l.RefillInterval))
	var lhs, rhs, term big.Int
	for i := range admitted {
		var tokens int64
		for j := i; j < len(admitted); j++ {
			tokens += admitted[j].tokens
			// tokens × interval <= capacity × interval + refill × (t2 - t1)
			lhs.Mul(big.NewInt(tokens), interval)
			rhs.Mul(big.NewInt(l.Capacity), interval)
			term.Mul(big.NewInt(l.RefillTokens), big.NewInt(admitted[j].at-admitted[i].at))
			rhs.Add(&rhs, &term)
			if lhs.Cmp(&rhs) > 0 {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

func checkRFC1363Bound(t *testing.T, seed uint64, l limiter.BucketLimit, admitted []admission) {
	t.Helper()
	if i, j, found := rfc1363Violation(l, admitted); found {
		t.Fatalf("seed %#x, limit %+v: admissions %d..%d in [%d, %d] exceed the RFC 1363 bound",
			seed, l, i, j, admitted[i].at, admitted[j].at)
	}
}

// The bound check itself must notice an over-admitting trace.
func TestRFC1363BoundCheck(t *testing.T) {
	l := limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second}
	second := int64(time.Second)
	exact := []admission{{0, 3}, {second, 1}, {2 * second, 1}, {2500 * ms, 0}}
	if i, j, found := rfc1363Violation(l, exact); found {
		t.Errorf("trace at the bound flagged at %d..%d", i, j)
	}
	over := []admission{{0, 2}, {second, 1}, {2*second - 1, 2}}
	if _, _, found := rfc1363Violation(l, over); !found {
		t.Errorf("5 tokens within 2s-1ns not flagged")
	}
	// What the former rule, which moved a state far ahead of now back to
	// now, admitted in TestStalledWorkerCannotOverAdmit: 16 tokens within
	// 10ms, at the instants they were stored.
	l = limiter.BucketLimit{Capacity: 10, RefillTokens: 10, RefillInterval: time.Second}
	formerRule := []admission{{6500 * ms, 5}, {6500 * ms, 1}, {6510 * ms, 10}}
	if _, _, found := rfc1363Violation(l, formerRule); !found {
		t.Errorf("the former rule's 16 tokens within 10ms not flagged")
	}
}

// randomLag is how far a worker's now is behind the latest clock read of
// any worker: mostly not at all, sometimes up to a second (a clock read
// racing another worker's store), and sometimes far more (a worker that
// stalled between reading the clock and storing its decision): up to an
// hour, or a year.
func randomLag(rng *rand.Rand) int64 {
	switch rng.IntN(10) {
	case 0, 1:
		return rng.Int64N(int64(time.Second) + 1)
	case 2:
		return int64(time.Second) + 1 + rng.Int64N(int64(time.Hour))
	case 3:
		return int64(365 * 24 * time.Hour)
	default:
		return 0
	}
}

// TestMatchesReferenceModelWithClockSteps adds what sorted traces lack:
// workers whose now is behind the stored time, by a little or by far, and
// (in one of two runs) refunds between takes. Last never moves back, and
// without refunds the RFC 1363 bound holds over the admissions, each at the
// instant it was decided as of: the stored Last after it, which lies
// between the worker's clock read and its store.
func TestMatchesReferenceModelWithClockSteps(t *testing.T) {
	t.Parallel()
	for _, refunds := range []bool{true, false} {
		for _, seed := range propertySeeds(t) {
			rng := rand.New(rand.NewPCG(seed, 0xc10c))
			l, b := randomBucket(rng)
			perToken := creditsPerToken(b)
			ref := newReferenceBucket(l, 0)
			s := b.Initial(0)
			clock := int64(0) // the latest clock read of any worker
			var admitted []admission
			for i := range 200 {
				clock += randomGap(rng, l)
				now := clock - randomLag(rng)
				n := randomCount(rng, l)
				last := s.Last
				if refunds && rng.IntN(5) == 0 {
					s = b.Give(s, now, n)
					ref.give(now, n)
				} else {
					var got limiter.Decision
					s, got = b.Take(s, now, n)
					if want := ref.take(now, n); got != want {
						t.Fatalf("seed %#x, limit %+v, step %d: take %d at %d: got %+v, want %+v", seed, l, i, n, now, got, want)
					}
					if got.Allowed {
						admitted = append(admitted, admission{at: s.Last, tokens: max(n, 1)})
					}
				}
				if level := tokensOf(s, perToken); level.Cmp(ref.tokens) != 0 || s.Last != ref.last {
					t.Fatalf("seed %#x, limit %+v, step %d: state %+v (%v tokens), reference %v tokens at %d",
						seed, l, i, s, level, ref.tokens, ref.last)
				}
				if s.Last != max(last, now) {
					t.Fatalf("seed %#x, limit %+v, step %d: at %d, Last went from %d to %d", seed, l, i, now, last, s.Last)
				}
			}
			if !refunds {
				checkRFC1363Bound(t, seed, l, admitted)
			}
		}
	}
}
