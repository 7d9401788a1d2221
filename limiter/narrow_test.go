package limiter_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// edges are values around the edges of the bucket's arithmetic, mixed into random ones.
var edges = []int64{0, 1, 2, 3, 7, 10, 999, 1000, 1001, 1e9, 1e12, 1 << 31, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1 << 40,
	1<<62 - 1, 1 << 62, 1<<62 + 1, math.MaxInt64 - 1, math.MaxInt64, -1, -2, -1e9, math.MinInt64}

func pickEdgy(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return edges[r.IntN(len(edges))]
	case 1:
		return r.Int64N(100) - 10
	case 2:
		return r.Int64N(1e12)
	}
	return int64(r.Uint64())
}

// randomEdgyBucket is a valid bucket: realistic shapes most of the time, long quotas whose level
// needs more than 64 bits of credits (up to 10^9 tokens refilled over 366 days), and any numbers.
func randomEdgyBucket(r *rand.Rand) limiter.Bucket {
	const day = int64(24 * time.Hour)
	for {
		l := limiter.BucketLimit{Capacity: pickEdgy(r), RefillTokens: pickEdgy(r), RefillInterval: duration.Duration(pickEdgy(r))}
		switch r.IntN(4) {
		case 0:
			l = limiter.BucketLimit{Capacity: 1 + r.Int64N(1000), RefillTokens: 1 + r.Int64N(100), RefillInterval: duration.Duration(1 + r.Int64N(int64(time.Hour)))}
		case 1:
			l = limiter.BucketLimit{Capacity: 1 + r.Int64N(1e9), RefillTokens: 1 + r.Int64N(100), RefillInterval: duration.Duration(1 + r.Int64N(366*day))}
		case 2:
			l = limiter.BucketLimit{Capacity: []int64{53_376, 100_000, 1e9}[r.IntN(3)], RefillTokens: 1 + r.Int64N(3),
				RefillInterval: duration.Duration([]int64{day, 7 * day, 30 * day, 366 * day}[r.IntN(4)])}
		}
		if b, err := limiter.NewBucket(l); err == nil {
			return b
		}
	}
}

// randomEdgyState is a state of b: in range half of the time, with credits in range a quarter
// of it, and anything otherwise.
func randomEdgyState(r *rand.Rand, b limiter.Bucket) limiter.BucketState {
	s := limiter.BucketState{Tokens: pickEdgy(r), Credits: pickEdgy(r), Last: pickEdgy(r)}
	switch r.IntN(4) {
	case 0, 1:
		capacity := b.Limit().Capacity
		s.Tokens, s.Credits = r.Int64N(capacity)+r.Int64N(2), r.Int64N(b.CreditsPerToken())
		if s.Tokens >= capacity {
			s.Tokens, s.Credits = capacity, 0
		}
	case 2:
		s.Credits = r.Int64N(b.CreditsPerToken())
	}
	return s
}

// Take, IdleAt and Give decide exactly on every state, time and count, narrow buckets in 64
// bits and wide ones in 128 (checkTake, against levels in big integers), and IdleAtOwing matches
// a reference in big integers too. Random limits, weighted towards the edges of the arithmetic
// and towards long quotas, and random states, in range or not.
func TestNarrowAndWideMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	narrow, wide := 0, 0
	for narrow < 100_000 || wide < 30_000 {
		b := randomEdgyBucket(r)
		capacity := b.Limit().Capacity
		for range 20 {
			s := randomEdgyState(r, b)
			now, n := pickEdgy(r), pickEdgy(r)
			switch r.IntN(3) {
			case 0:
				now, n = s.Last+r.Int64N(int64(10*time.Second)), r.Int64N(min(capacity, 1e6)+2)
			case 1:
				now, n = s.Last+r.Int64N(400*int64(24*time.Hour)), 1+r.Int64N(min(capacity, 1e6)+1)
			}
			checkTake(t, b, s, now, n)
			if got, want := b.IdleAtOwing(s), referenceIdleAt(b, limiter.ClampOwing(b, s)); got != want {
				t.Fatalf("%+v: IdleAtOwing(%+v) = %d, in big integers %d", b.Limit(), s, got, want)
			}
			if b.Narrow() {
				narrow++
			} else {
				wide++
			}
		}
	}
}

// referenceIdleAt is IdleAt of a clamped state in big integers: its last update plus the credits
// it lacks divided by the credits per nanosecond, rounded up; math.MaxInt64 beyond it.
func referenceIdleAt(b limiter.Bucket, s limiter.BucketState) int64 {
	missing := new(big.Int).Mul(new(big.Int).Sub(big.NewInt(b.Limit().Capacity), big.NewInt(s.Tokens)), big.NewInt(b.CreditsPerToken()))
	missing.Sub(missing, big.NewInt(s.Credits))
	wait, rem := new(big.Int).QuoRem(missing, big.NewInt(b.CreditsPerNano()), new(big.Int))
	if rem.Sign() != 0 {
		wait.Add(wait, big.NewInt(1))
	}
	idle := wait.Add(wait, big.NewInt(s.Last))
	if !idle.IsInt64() {
		return math.MaxInt64
	}
	return idle.Int64()
}

// A bucket is narrow when a full one's credits fit in 64 bits. One token per 2^32 ns is 2^32
// credits: 2^32-1 tokens of them are the largest narrow bucket, 2^32 the smallest wide one. Both
// decide alike at fixed instants, on either side of the line.
func TestNarrowBoundary(t *testing.T) {
	const interval = 1 << 32 // ns per token, and credits per token
	never := duration.Duration(math.MaxInt64)
	type step struct {
		at, n int64
		want  limiter.Decision
	}
	for _, c := range []struct {
		capacity   int64
		wantNarrow bool
	}{
		{1<<32 - 1, true},
		{1 << 32, false},
	} {
		b, err := limiter.NewBucket(limiter.BucketLimit{Capacity: c.capacity, RefillTokens: 1, RefillInterval: interval})
		if err != nil {
			t.Fatal(err)
		}
		if narrow := b.Narrow(); narrow != c.wantNarrow {
			t.Errorf("capacity %d: narrow %v, want %v", c.capacity, narrow, c.wantNarrow)
		}
		steps := []step{
			{at: 0, n: c.capacity - 1, want: limiter.Decision{Allowed: true, Remaining: 1, Reset: never}},
			{at: 0, n: 2, want: limiter.Decision{Remaining: 1, RetryAfter: interval, Reset: never}},
			{at: interval / 2, n: 2, want: limiter.Decision{Remaining: 1, RetryAfter: interval / 2, Reset: never}},
			{at: interval, n: 2, want: limiter.Decision{Allowed: true, Remaining: 0, Reset: never}},
			{at: interval + 1, n: 1, want: limiter.Decision{Remaining: 0, RetryAfter: interval - 1, Reset: never}},
			// About 146 years later, 2^30-1 tokens more (one credit was there): still not full.
			{at: 1 << 62, n: 1<<30 - 1, want: limiter.Decision{Allowed: true, Remaining: 0, Reset: never}},
		}
		s := b.Initial(0)
		for i, st := range steps {
			var d limiter.Decision
			s, d = b.Take(s, st.at, st.n)
			if d != st.want {
				t.Fatalf("capacity %d, step %d: Take(n %d) at %d = %+v, want %+v", c.capacity, i, st.n, st.at, d, st.want)
			}
			if idle, want := b.IdleAt(s), referenceIdleAt(b, s); idle != want {
				t.Fatalf("capacity %d, step %d: IdleAt(%+v) = %d, want %d", c.capacity, i, s, idle, want)
			}
		}
	}
}

// A bucket refilled exactly to full, or past it by part of a credit's worth of time, is full: 3
// tokens of 3 credits, 2 credits a nanosecond, empty at 0, is full from 5ns (10 credits for 9).
func TestTakeAtTheInstantItFills(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 3, RefillTokens: 2, RefillInterval: 3})
	for _, c := range []struct {
		at   int64
		want limiter.Decision
	}{
		{4, limiter.Decision{Allowed: true, Remaining: 1, Reset: 2}}, // 8 credits, 5 after the take
		{5, limiter.Decision{Allowed: true, Remaining: 2, Reset: 2}},
		{6, limiter.Decision{Allowed: true, Remaining: 2, Reset: 2}},
	} {
		if _, d := b.Take(limiter.BucketState{Last: 0}, c.at, 1); d != c.want {
			t.Errorf("Take(1) at %dns from empty = %+v, want %+v", c.at, d, c.want)
		}
	}
}

// RetryAt: a request Take rejected is rejected again at every instant before RetryAt, with the
// wait to it, and admitted from RetryAt on, on every kind of bucket and state; instants before
// the state's Last count as Last. A request larger than the bucket, or one whose instant would
// not fit in an int64, has none.
func TestRetryAt(t *testing.T) {
	day := duration.Duration(24 * time.Hour)
	b := mustBucket(t, limiter.BucketLimit{Capacity: 2, RefillTokens: 1, RefillInterval: day})
	empty := func(last int64) limiter.BucketState { return limiter.BucketState{Last: last} }
	for _, c := range []struct {
		name   string
		s      limiter.BucketState
		now, n int64
		at     int64
		ok     bool
	}{
		{"empty, one token", empty(1000), 1000, 1, 1000 + int64(day), true},
		{"an instant behind Last", empty(1000), 10, 1, 1000 + int64(day), true},
		{"two tokens", empty(1000), 1000 + int64(day)/2, 2, 1000 + 2*int64(day), true},
		{"larger than the bucket", empty(1000), 1000, 3, 0, false},
		{"beyond int64", empty(math.MaxInt64 - 1000), math.MaxInt64 - 1000, 1, 0, false},
		{"admitted", limiter.BucketState{Tokens: 2, Last: 1000}, 1000, 1, 0, false},
	} {
		_, d := b.Take(c.s, c.now, c.n)
		if at, ok := d.RetryAt(c.s, c.now); at != c.at || ok != c.ok {
			t.Errorf("%s: %+v: RetryAt %d, %v; want %d, %v", c.name, d, at, ok, c.at, c.ok)
		}
	}

	r := rand.New(rand.NewPCG(5, 6))
	for checked := 0; checked < 50_000; {
		b := randomEdgyBucket(r)
		s := randomEdgyState(r, b)
		if s.Last < -1<<61 || s.Last > 1<<61 {
			s.Last = r.Int64N(1 << 50)
		}
		n := 1 + r.Int64N(min(b.Limit().Capacity, 1e6)+1)
		now := s.Last - int64(time.Second) + r.Int64N(int64(10*time.Second))
		_, d := b.Take(s, now, n)
		at, ok := d.RetryAt(s, now)
		switch {
		case d.Allowed || d.RetryAfter == duration.Duration(math.MaxInt64):
			if ok {
				t.Fatalf("%+v, %+v at %d, n %d: %+v, RetryAt %d", b.Limit(), s, now, n, d, at)
			}
			continue
		case !ok: // only when the instant does not fit in an int64
			if int64(d.RetryAfter) < math.MaxInt64-max(now, s.Last) {
				t.Fatalf("%+v, %+v at %d, n %d: %+v, no RetryAt", b.Limit(), s, now, n, d)
			}
			continue
		case at > 1<<62: // the instants checked below would not fit
			continue
		}
		checked++
		from := min(now, s.Last) - int64(time.Second)
		for _, instant := range []int64{from, now, at - 1, at, at + 1, from + r.Int64N(at-from+1), at + r.Int64N(1e12)} {
			_, again := b.Take(s, instant, n)
			if instant < at && (again.Allowed || int64(again.RetryAfter) != at-max(instant, s.Last)) ||
				instant >= at && !again.Allowed {
				t.Fatalf("%+v, %+v, n %d, rejected at %d (RetryAt %d): at %d %+v", b.Limit(), s, n, now, at, instant, again)
			}
		}
	}
}
