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

const (
	ms   = int64(time.Millisecond)
	hour = int64(time.Hour)
	year = int64(365 * 24 * time.Hour)
)

// step is one request of a trace at a fixed instant.
type step struct {
	key  string // which key's BucketState the request uses; "" for a single key
	at   int64  // nanoseconds on the trace's time base
	n    int64
	want limiter.Decision
}

func allowed(remaining int64, reset time.Duration) limiter.Decision {
	return limiter.Decision{Allowed: true, Remaining: remaining, Reset: reset}
}

func rejected(remaining int64, retryAfter, reset time.Duration) limiter.Decision {
	return limiter.Decision{Remaining: remaining, RetryAfter: retryAfter, Reset: reset}
}

func mustBucket(t testing.TB, l limiter.BucketLimit) limiter.Bucket {
	t.Helper()
	b, err := limiter.NewBucket(l)
	if err != nil {
		t.Fatalf("NewBucket(%+v): %v", l, err)
	}
	return b
}

// creditsPerToken is the bucket's token unit.
func creditsPerToken(b limiter.Bucket) int64 { return b.CreditsPerToken() }

// state is the BucketState of level credits at last, for buckets small enough that a level fits
// in an int64.
func state(b limiter.Bucket, level, last int64) limiter.BucketState {
	return limiter.BucketState{Tokens: level / b.CreditsPerToken(), Credits: level % b.CreditsPerToken(), Last: last}
}

// level is s's level in credits, for buckets small enough that it fits in an int64.
func level(b limiter.Bucket, s limiter.BucketState) int64 {
	return s.Tokens*b.CreditsPerToken() + s.Credits
}

// runTrace plays steps in order, each key starting from Initial(start), and
// reports every step whose decision differs from its want.
func runTrace(t *testing.T, b limiter.Bucket, start int64, steps []step) {
	t.Helper()
	states := map[string]limiter.BucketState{}
	for i, st := range steps {
		s, ok := states[st.key]
		if !ok {
			s = b.Initial(start)
		}
		next, got := b.Take(s, st.at, st.n)
		if got != st.want {
			t.Errorf("step %d: %s take %d at %v: got %+v, want %+v",
				i, st.key, st.n, time.Duration(st.at), got, st.want)
		}
		if !b.Valid(next) || next.Last != st.at {
			t.Errorf("step %d: %s take %d at %v: state %+v invalid or not at now",
				i, st.key, st.n, time.Duration(st.at), next)
		}
		states[st.key] = next
	}
}

// The seed traces of the product design.

func TestSeedTraceOneKey(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})
	runTrace(t, b, 0, []step{
		{at: 0, n: 1, want: allowed(2, 1000*time.Millisecond)},
		{at: 100 * ms, n: 1, want: allowed(1, 1900*time.Millisecond)},
		{at: 200 * ms, n: 1, want: allowed(0, 2800*time.Millisecond)},
		{at: 300 * ms, n: 1, want: rejected(0, 700*time.Millisecond, 2700*time.Millisecond)},
		{at: 500 * ms, n: 1, want: rejected(0, 500*time.Millisecond, 2500*time.Millisecond)},
		{at: 1300 * ms, n: 1, want: allowed(0, 2700*time.Millisecond)},
		{at: 1400 * ms, n: 1, want: rejected(0, 600*time.Millisecond, 2600*time.Millisecond)},
		{at: 3500 * ms, n: 1, want: allowed(1, 1500*time.Millisecond)},
	})
}

func TestSeedTraceHalfSecondRefill(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 2, RefillTokens: 1, RefillInterval: 500 * time.Millisecond})
	runTrace(t, b, 0, []step{
		{at: 900 * ms, n: 1, want: allowed(1, 500*time.Millisecond)},
		{at: 950 * ms, n: 1, want: allowed(0, 950*time.Millisecond)},
		{at: 1000 * ms, n: 1, want: rejected(0, 400*time.Millisecond, 900*time.Millisecond)},
		{at: 1050 * ms, n: 1, want: rejected(0, 350*time.Millisecond, 850*time.Millisecond)},
		{at: 1400 * ms, n: 1, want: allowed(0, 1000*time.Millisecond)},
	})
}

func TestSeedTraceTwoKeys(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})
	steps := []step{
		{key: "alice", at: 0, n: 1, want: allowed(2, 1000*time.Millisecond)},
		{key: "alice", at: 100 * ms, n: 1, want: allowed(1, 1900*time.Millisecond)},
		{key: "alice", at: 200 * ms, n: 1, want: allowed(0, 2800*time.Millisecond)},
		{key: "bob", at: 250 * ms, n: 1, want: allowed(2, 1000*time.Millisecond)},
		{key: "alice", at: 300 * ms, n: 1, want: rejected(0, 700*time.Millisecond, 2700*time.Millisecond)},
		{key: "bob", at: 400 * ms, n: 1, want: allowed(1, 1850*time.Millisecond)},
		{key: "alice", at: 1300 * ms, n: 1, want: allowed(0, 2700*time.Millisecond)},
	}
	// The Retry-After header (whole seconds, rounded up) is checked through the module by the
	// e2e seed traces.
	runTrace(t, b, 0, steps)
}

func TestTakeMoreThanOne(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 10, RefillTokens: 2, RefillInterval: time.Second})
	runTrace(t, b, 0, []step{
		{at: 0, n: 7, want: allowed(3, 3500*time.Millisecond)},
		{at: 0, n: 5, want: rejected(3, 1000*time.Millisecond, 3500*time.Millisecond)},
		{at: 500 * ms, n: 5, want: rejected(4, 500*time.Millisecond, 3000*time.Millisecond)},
		{at: 1000 * ms, n: 5, want: allowed(0, 5000*time.Millisecond)},
		{at: 1000 * ms, n: 10, want: rejected(0, 5000*time.Millisecond, 5000*time.Millisecond)},
		{at: 6000 * ms, n: 10, want: allowed(0, 5000*time.Millisecond)},
	})
}

func TestTakeNonPositiveCountsAsOne(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})
	runTrace(t, b, 0, []step{
		{at: 0, n: 0, want: allowed(2, 1000*time.Millisecond)},
		{at: 0, n: -5, want: allowed(1, 2000*time.Millisecond)},
		{at: 0, n: math.MinInt64, want: allowed(0, 3000*time.Millisecond)},
		{at: 0, n: 0, want: rejected(0, 1000*time.Millisecond, 3000*time.Millisecond)},
	})
}

func TestTakeMoreThanCapacityNeverAdmitted(t *testing.T) {
	never := time.Duration(math.MaxInt64)
	b := mustBucket(t, limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})
	runTrace(t, b, 0, []step{
		{at: 0, n: 4, want: rejected(3, never, 0)},
		{at: 0, n: math.MaxInt64, want: rejected(3, never, 0)},
		{at: 0, n: 3, want: allowed(0, 3000*time.Millisecond)},
		// Still refilled to now, but nothing taken.
		{at: 1500 * ms, n: 4, want: rejected(1, never, 1500*time.Millisecond)},
		{at: 1500 * ms, n: 1, want: allowed(0, 2500*time.Millisecond)},
	})
}

// Refill with a rate that does not divide the interval (3 per second: one
// token every 333.33...ms) stays exact however many small steps it takes.
func TestFractionalRefillHasNoDrift(t *testing.T) {
	const intervals = 10_000
	const perInterval = 3
	l := limiter.BucketLimit{Capacity: intervals * perInterval, RefillTokens: perInterval, RefillInterval: time.Second}
	b := mustBucket(t, l)
	s := state(b, 0, 0)
	// Irregular probe offsets within each interval, so refills land on
	// fractional token boundaries; the last one lands on the boundary.
	offsets := []int64{1, 333_333_333, 333_333_334, 700_000_001, 999_999_999, int64(time.Second)}
	for k := int64(0); k < intervals; k++ {
		for _, off := range offsets {
			now := k*int64(time.Second) + off
			var d limiter.Decision
			// A request larger than the bucket refills without taking.
			s, d = b.Take(s, now, l.Capacity+1)
			wantTokens := perInterval * now / int64(time.Second) // floor
			if d.Remaining != wantTokens {
				t.Fatalf("at %v after %d probes: remaining %d, want %d", time.Duration(now), k, d.Remaining, wantTokens)
			}
			wantCredits := perInterval * now // exact: 1 token = 1e9 credits, 3 credits per ns
			if level(b, s) != wantCredits {
				t.Fatalf("at %v: level %d credits, want %d", time.Duration(now), level(b, s), wantCredits)
			}
		}
	}
	if got := s.Tokens; got != intervals*perInterval {
		t.Fatalf("after %d intervals: %d tokens, want %d", intervals, got, intervals*perInterval)
	}
}

func TestGiveRefundsUpToCapacity(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})
	token := creditsPerToken(b)
	full := level(b, b.Initial(0))
	empty, _ := b.Take(b.Initial(0), 0, 3)
	tests := []struct {
		name string
		s    limiter.BucketState
		now  int64
		n    int64
		want limiter.BucketState
	}{
		{"undo one", empty, 0, 1, state(b, token, 0)},
		{"refill first", empty, 500 * ms, 1, state(b, token+token/2, 500*ms)},
		{"capped", empty, 2500 * ms, 2, state(b, full, 2500*ms)},
		{"full stays full", b.Initial(0), 0, 1, state(b, full, 0)},
		{"zero counts as one", empty, 0, 0, state(b, token, 0)},
		{"negative counts as one", empty, 0, math.MinInt64, state(b, token, 0)},
		{"more than capacity", empty, 0, math.MaxInt64, state(b, full, 0)},
		{"garbage level", state(b, math.MinInt64, 0), 0, 2, state(b, 2*token, 0)},
		{"a year behind: as of Last", empty, -year, 1, state(b, token, 0)},
	}
	for _, tt := range tests {
		if got := b.Give(tt.s, tt.now, tt.n); got != tt.want {
			t.Errorf("%s: Give(%+v, %v, %d) = %+v, want %+v", tt.name, tt.s, time.Duration(tt.now), tt.n, got, tt.want)
		}
	}
}

// Give must not overflow, whatever the capacity and the refund.
func TestGiveNearMaximumCapacity(t *testing.T) {
	for _, l := range []limiter.BucketLimit{
		{Capacity: 1 << 62, RefillTokens: 1, RefillInterval: 1},
		{Capacity: math.MaxInt64, RefillTokens: 1, RefillInterval: math.MaxInt64},
		{Capacity: math.MaxInt64, RefillTokens: 3, RefillInterval: 2},
	} {
		b := mustBucket(t, l)
		s := limiter.BucketState{Tokens: l.Capacity - 5, Credits: b.CreditsPerToken() - 1, Last: 0}
		for _, n := range []int64{math.MaxInt64, l.Capacity - 1, 5} {
			if got := b.Give(s, 0, n); got != b.Initial(0) {
				t.Errorf("%+v: Give(%+v, %d) = %+v, want full", l, s, n, got)
			}
		}
		if got, want := b.Give(s, 0, 4), (limiter.BucketState{Tokens: l.Capacity - 1, Credits: s.Credits}); got != want {
			t.Errorf("%+v: Give(%+v, 4) = %+v, want %+v", l, s, got, want)
		}
		if got := b.AddLevel(s, math.MaxInt64, math.MaxInt64); got != b.Initial(0) {
			t.Errorf("%+v: AddLevel(%+v, max, max) = %+v, want full", l, s, got)
		}
	}
}

// Time never goes backwards: a now behind Last, by any amount, is read as
// Last. Nothing is refilled, Last is kept, and RetryAfter and Reset are
// counted from Last.
func TestClockSteps(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})
	token := creditsPerToken(b)
	second := int64(time.Second)
	last := 10 * second
	half := state(b, token/2, last)
	// Half a token at Last: a token in 500ms, full in 2.5s.
	asOfLast := rejected(0, 500*time.Millisecond, 2500*time.Millisecond)
	tests := []struct {
		name      string
		now       int64
		wantState limiter.BucketState // after Take(n=1)
		want      limiter.Decision
	}{
		{"same instant", last, half, asOfLast},
		{"1ns behind", last - 1, half, asOfLast},
		{"600ms behind", last - 600*ms, half, asOfLast},
		{"1s behind", last - second, half, asOfLast},
		{"1s and 1ns behind", last - second - 1, half, asOfLast},
		{"1h behind", last - hour, half, asOfLast},
		{"a year behind", last - year, half, asOfLast},
		{"at MinInt64", math.MinInt64, half, asOfLast},
		{"forward: refilled", last + 100*ms, state(b, token/2+token/10, last+100*ms),
			rejected(0, 400*time.Millisecond, 2400*time.Millisecond)},
	}
	for _, tt := range tests {
		got, d := b.Take(half, tt.now, 1)
		if got != tt.wantState || d != tt.want {
			t.Errorf("%s: Take(%+v, %v, 1) = %+v, %+v; want %+v, %+v", tt.name, half, time.Duration(tt.now), got, d, tt.wantState, tt.want)
		}
	}

	// A request the level covers is admitted as of Last, and a refund is
	// given as of Last, whatever the distance behind.
	two := state(b, 2*token, last)
	for _, behind := range []int64{1, second, hour, year} {
		if got, d := b.Take(two, last-behind, 1); got != (state(b, token, last)) || d != allowed(1, 2*time.Second) {
			t.Errorf("%v behind: Take(%+v, 1) = %+v, %+v; want one token left at Last", time.Duration(behind), two, got, d)
		}
		if got := b.Give(half, last-behind, 1); got != (state(b, token+token/2, last)) {
			t.Errorf("%v behind: Give(%+v, 1) = %+v; want 1.5 tokens at Last", time.Duration(behind), half, got)
		}
	}

	// After a step back, refill continues from the kept Last: the read
	// behind it gave nothing away.
	for _, behind := range []int64{600 * ms, hour, year} {
		s, _ := b.Take(half, last-behind, 1)
		s, d := b.Take(s, last+500*ms, 1)
		if !d.Allowed || s != (state(b, 0, last+500*ms)) {
			t.Errorf("%v behind, then at Last+500ms: %+v, %+v; want allowed with level 0", time.Duration(behind), s, d)
		}
	}
}

// The review's reproduction, with two workers sharing one key: capacity 10
// at 10 per second. Worker A reads the clock at t0 and the full bucket, then
// stalls for 1.5s before storing its decision. Meanwhile worker B takes 5 at
// t0+1.5s. A's store fails, as the entry changed, so A decides again on B's
// state, still with now = t0. The former rule rebased that state to t0, and
// B's take 10ms later was refilled for the 1.5s the bucket had already been
// credited with: 5+1+10 = 16 tokens in 10ms, where RFC 1363 allows 10.1.
// Read as of Last, A's take is made at t0+1.5s, and the 10ms refill only a
// tenth of a token.
func TestStalledWorkerCannotOverAdmit(t *testing.T) {
	l := limiter.BucketLimit{Capacity: 10, RefillTokens: 10, RefillInterval: time.Second}
	b := mustBucket(t, l)
	token := creditsPerToken(b) // 100ms of refill
	t0 := 5 * int64(time.Second)
	u := t0 + 1500*ms
	shared := b.Initial(t0)
	// A's first attempt, on the full bucket it read. Its store fails:
	// nothing of it is kept.
	if _, d := b.Take(shared, t0, 1); d != allowed(9, 100*time.Millisecond) {
		t.Fatalf("A's first attempt: %+v", d)
	}
	steps := []struct {
		worker    string
		now       int64 // the worker's clock read
		n         int64
		want      limiter.Decision
		wantState limiter.BucketState
	}{
		{"B", u, 5, allowed(5, 500*time.Millisecond), state(b, 5*token, u)},
		// A, 1.5s behind: decided as of Last.
		{"A", t0, 1, allowed(4, 600*time.Millisecond), state(b, 4*token, u)},
		// 10ms refill a tenth of a token: 4.1 tokens, not 10.
		{"B", u + 10*ms, 10, rejected(4, 590*time.Millisecond, 590*time.Millisecond),
			state(b, 4*token+token/10, u+10*ms)},
		{"B", u + 10*ms, 4, allowed(0, 990*time.Millisecond), state(b, token/10, u+10*ms)},
		// Workers further behind, by 1.5s, an hour or a year, are all
		// decided as of Last, with waits counted from it.
		{"A", t0, 1, rejected(0, 90*time.Millisecond, 990*time.Millisecond), state(b, token/10, u+10*ms)},
		{"C", u - hour, 1, rejected(0, 90*time.Millisecond, 990*time.Millisecond), state(b, token/10, u+10*ms)},
		{"D", u - year, 10, rejected(0, 990*time.Millisecond, 990*time.Millisecond), state(b, token/10, u+10*ms)},
		{"B", u + 100*ms, 1, allowed(0, time.Second), state(b, 0, u+100*ms)},
	}
	var admitted []admission
	for i, st := range steps {
		next, d := b.Take(shared, st.now, st.n)
		if d != st.want || next != st.wantState {
			t.Errorf("step %d: %s takes %d at %v: %+v, %+v; want %+v, %+v",
				i, st.worker, st.n, time.Duration(st.now), d, next, st.want, st.wantState)
		}
		if next.Last < shared.Last {
			t.Errorf("step %d: Last moved back from %d to %d", i, shared.Last, next.Last)
		}
		if d.Allowed {
			// Each admission counts at the instant it was decided as
			// of: after the worker read its clock, before it stored.
			admitted = append(admitted, admission{at: next.Last, tokens: st.n})
		}
		shared = next
	}
	if i, j, found := rfc1363Violation(l, admitted); found {
		t.Errorf("admissions %d..%d in [%v, %v] exceed the RFC 1363 bound: %+v",
			i, j, time.Duration(admitted[i].at), time.Duration(admitted[j].at), admitted)
	}
}

func TestHugeElapsedFillsWithoutOverflow(t *testing.T) {
	const year = 365 * 24 * time.Hour
	limits := []limiter.BucketLimit{
		{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second},
		{Capacity: 1 << 62, RefillTokens: 4, RefillInterval: 1}, // full after 36.5 years
		{Capacity: 1, RefillTokens: math.MaxInt64, RefillInterval: 1},
		{Capacity: 4, RefillTokens: 1, RefillInterval: year},
		{Capacity: 1_000_000_000, RefillTokens: 1_000_000_007, RefillInterval: time.Second},
	}
	times := []struct{ last, now int64 }{
		{0, int64(100 * year)},
		{0, math.MaxInt64},
		{math.MinInt64, math.MaxInt64},
		{math.MinInt64, 0},
	}
	for _, l := range limits {
		b := mustBucket(t, l)
		for _, tm := range times {
			s, d := b.Take(limiter.BucketState{Last: tm.last}, tm.now, 1)
			if !d.Allowed || s != (limiter.BucketState{Tokens: l.Capacity - 1, Last: tm.now}) || d.Remaining != l.Capacity-1 {
				t.Errorf("%+v empty at %d, take at %d: %+v, %+v; want full minus one", l, tm.last, tm.now, s, d)
			}
		}
	}
}

func TestGarbageStateIsClamped(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})
	full := level(b, b.Initial(0))
	token := creditsPerToken(b)
	never := time.Duration(math.MaxInt64)
	tests := []struct {
		name      string
		s         limiter.BucketState
		now       int64
		wantState limiter.BucketState
		want      limiter.Decision
	}{
		{"negative tokens", limiter.BucketState{Tokens: -1, Last: 0}, 0, state(b, 0, 0), rejected(0, time.Second, 3*time.Second)},
		{"MinInt64 tokens", limiter.BucketState{Tokens: math.MinInt64, Last: 0}, 500 * ms, state(b, token/2, 500*ms), rejected(0, 500*time.Millisecond, 2500*time.Millisecond)},
		{"negative credits", limiter.BucketState{Tokens: 1, Credits: math.MinInt64, Last: 0}, 0, state(b, 0, 0), allowed(0, 3*time.Second)},
		{"credits of a token or more", limiter.BucketState{Tokens: 0, Credits: token, Last: 0}, 0, state(b, token-1, 0), rejected(0, 1, 2*time.Second+1)},
		{"MaxInt64 credits", limiter.BucketState{Tokens: 1, Credits: math.MaxInt64, Last: 0}, 0, state(b, token-1, 0), allowed(0, 2*time.Second+1)},
		{"full with credits", limiter.BucketState{Tokens: 3, Credits: 5, Last: 0}, 0, state(b, full-token, 0), allowed(2, time.Second)},
		{"tokens above capacity", limiter.BucketState{Tokens: 4, Last: 0}, 0, state(b, full-token, 0), allowed(2, time.Second)},
		{"MaxInt64 tokens", limiter.BucketState{Tokens: math.MaxInt64, Credits: math.MaxInt64, Last: 0}, 0, state(b, full-token, 0), allowed(2, time.Second)},
		// A Last far in the future, which only a corrupt value can hold,
		// freezes the key until the clock reaches it: never admit more.
		{"Last far in the future: frozen", state(b, 0, math.MaxInt64), 0, state(b, 0, math.MaxInt64), rejected(0, time.Second, 3*time.Second)},
		{"Last MaxInt64, now MinInt64: frozen", state(b, 0, math.MaxInt64), math.MinInt64, state(b, 0, math.MaxInt64), rejected(0, time.Second, 3*time.Second)},
		{"Last just ahead at MaxInt64", state(b, 0, math.MaxInt64), math.MaxInt64 - 1, state(b, 0, math.MaxInt64), rejected(0, time.Second, 3*time.Second)},
		{"Last far in the past", state(b, 0, -int64(1000*time.Hour)), 0, state(b, full-token, 0), allowed(2, time.Second)},
		{"Last MinInt64", state(b, 0, math.MinInt64), math.MaxInt64, state(b, full-token, math.MaxInt64), allowed(2, time.Second)},
		{"everything extreme, n too large", limiter.BucketState{Tokens: math.MinInt64, Credits: math.MinInt64, Last: math.MaxInt64}, math.MinInt64, state(b, 0, math.MaxInt64), rejected(0, never, 3*time.Second)},
	}
	for _, tt := range tests {
		n := int64(1)
		if tt.want.RetryAfter == never {
			n = math.MaxInt64
		}
		s, d := b.Take(tt.s, tt.now, n)
		if s != tt.wantState || d != tt.want {
			t.Errorf("%s: Take(%+v, %d, %d) = %+v, %+v; want %+v, %+v", tt.name, tt.s, tt.now, n, s, d, tt.wantState, tt.want)
		}
	}
}

func TestValid(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})
	token := creditsPerToken(b)
	for _, tt := range []struct {
		tokens, credits int64
		want            bool
	}{{0, 0, true}, {0, 1, true}, {2, token - 1, true}, {3, 0, true}, {3, 1, false}, {0, token, false}, {0, -1, false},
		{-1, 0, false}, {4, 0, false}, {math.MinInt64, 0, false}, {math.MaxInt64, 0, false}, {1, math.MaxInt64, false}} {
		if got := b.Valid(limiter.BucketState{Tokens: tt.tokens, Credits: tt.credits}); got != tt.want {
			t.Errorf("Valid(%d tokens, %d credits) = %v, want %v", tt.tokens, tt.credits, got, tt.want)
		}
	}
}

func TestZeroBucketAdmitsNothing(t *testing.T) {
	var b limiter.Bucket
	s := limiter.BucketState{Tokens: 5, Credits: 3, Last: 7}
	got, d := b.Take(s, 100, 1)
	if d.Allowed || d.RetryAfter != time.Duration(math.MaxInt64) || got != s {
		t.Errorf("zero Bucket Take = %+v, %+v; want rejected forever, state unchanged", got, d)
	}
	if got := b.Give(s, 100, 1); got != s {
		t.Errorf("zero Bucket Give = %+v, want state unchanged", got)
	}
}

func TestNewBucketValidates(t *testing.T) {
	tests := []struct {
		l       limiter.BucketLimit
		wantErr string // "" if accepted; else a word the error must name
	}{
		{limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second}, ""},
		{limiter.BucketLimit{Capacity: 1_000_000, RefillTokens: 1_000_000, RefillInterval: 24 * time.Hour}, ""},
		{limiter.BucketLimit{Capacity: 1_000_000_000, RefillTokens: 1_000_000_000, RefillInterval: time.Second}, ""},
		{limiter.BucketLimit{Capacity: 1_000_000_000, RefillTokens: 1, RefillInterval: time.Second}, ""},
		{limiter.BucketLimit{Capacity: 1, RefillTokens: math.MaxInt64, RefillInterval: 1}, ""},
		{limiter.BucketLimit{Capacity: 1 << 62, RefillTokens: 1, RefillInterval: 1}, ""},
		{limiter.BucketLimit{Capacity: 1 << 62, RefillTokens: 7, RefillInterval: 7}, ""},
		{limiter.BucketLimit{Capacity: 1, RefillTokens: 1, RefillInterval: 1 << 62}, ""},
		{limiter.BucketLimit{Capacity: 0, RefillTokens: 1, RefillInterval: time.Second}, "Capacity"},
		{limiter.BucketLimit{Capacity: -1, RefillTokens: 1, RefillInterval: time.Second}, "Capacity"},
		{limiter.BucketLimit{Capacity: math.MinInt64, RefillTokens: 1, RefillInterval: time.Second}, "Capacity"},
		{limiter.BucketLimit{Capacity: 3, RefillTokens: 0, RefillInterval: time.Second}, "RefillTokens"},
		{limiter.BucketLimit{Capacity: 3, RefillTokens: -1, RefillInterval: time.Second}, "RefillTokens"},
		{limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: 0}, "RefillInterval"},
		{limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: -time.Second}, "RefillInterval"},
		{limiter.BucketLimit{Capacity: 1<<62 + 1, RefillTokens: 1, RefillInterval: 1}, ""},
		{limiter.BucketLimit{Capacity: math.MaxInt64, RefillTokens: 1, RefillInterval: 1}, ""},
		{limiter.BucketLimit{Capacity: math.MaxInt64, RefillTokens: 1, RefillInterval: time.Second}, ""},
		{limiter.BucketLimit{Capacity: 1, RefillTokens: 1, RefillInterval: 1<<62 + 1}, ""},
		{limiter.BucketLimit{Capacity: 2, RefillTokens: 1, RefillInterval: math.MaxInt64}, ""},
		// Any positive numbers: the level is kept in two parts and refilled in 128 bits.
		{limiter.BucketLimit{Capacity: 4_700_000_000, RefillTokens: 1, RefillInterval: time.Second}, ""},
		{limiter.BucketLimit{Capacity: 4_700_000_000, RefillTokens: 7, RefillInterval: time.Second}, ""},
		{limiter.BucketLimit{Capacity: 4_700_000_000, RefillTokens: 1000, RefillInterval: time.Second}, ""},
	}
	for _, tt := range tests {
		b, err := limiter.NewBucket(tt.l)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("NewBucket(%+v): unexpected error %v", tt.l, err)
		case tt.wantErr == "" && b.Limit() != tt.l:
			t.Errorf("NewBucket(%+v).Limit() = %+v", tt.l, b.Limit())
		case tt.wantErr != "" && err == nil:
			t.Errorf("NewBucket(%+v): accepted, want error naming %q", tt.l, tt.wantErr)
		case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
			t.Errorf("NewBucket(%+v): error %q does not name %q", tt.l, err, tt.wantErr)
		}
	}
}

// fnvFingerprint is Fingerprint's documented hash, computed with hash/fnv.
func fnvFingerprint(l limiter.BucketLimit) uint32 {
	var buf [25]byte
	buf[0] = 2 // format version: whole tokens and credits
	binary.LittleEndian.PutUint64(buf[1:], uint64(l.Capacity))
	binary.LittleEndian.PutUint64(buf[9:], uint64(l.RefillTokens))
	binary.LittleEndian.PutUint64(buf[17:], uint64(l.RefillInterval))
	h := fnv.New32a()
	h.Write(buf[:])
	return h.Sum32()
}

func TestFingerprint(t *testing.T) {
	limits := []limiter.BucketLimit{
		{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second},
		{Capacity: 4, RefillTokens: 1, RefillInterval: time.Second},
		{Capacity: 3, RefillTokens: 2, RefillInterval: time.Second},
		{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second + 1},
		{Capacity: 3, RefillTokens: 2, RefillInterval: 2 * time.Second},
		{Capacity: 1, RefillTokens: 3, RefillInterval: time.Second},
		{Capacity: 1, RefillTokens: 1, RefillInterval: 3 * time.Second},
		{Capacity: 1_000_000, RefillTokens: 1_000_000, RefillInterval: 24 * time.Hour},
	}
	seen := map[uint32]limiter.BucketLimit{}
	for _, l := range limits {
		b := mustBucket(t, l)
		fp := b.Fingerprint()
		if other, dup := seen[fp]; dup {
			t.Errorf("Fingerprint %#x shared by %+v and %+v", fp, l, other)
		}
		seen[fp] = l
		again := mustBucket(t, l)
		if again := again.Fingerprint(); again != fp {
			t.Errorf("Fingerprint of %+v not stable: %#x then %#x", l, fp, again)
		}
		if want := fnvFingerprint(l); fp != want {
			t.Errorf("Fingerprint of %+v = %#x, want FNV-1a %#x", l, fp, want)
		}
	}
	// Pinned (version 2) so a change to the hash, which would discard every stored
	// BucketState, cannot go unnoticed.
	pinned := mustBucket(t, limits[0])
	if got := pinned.Fingerprint(); got != 0x4dc3d39a {
		t.Errorf("Fingerprint of %+v = %#x, want %#x", limits[0], got, 0x4dc3d39a)
	}
}

func TestTakeDoesNotAllocate(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 100, RefillTokens: 10, RefillInterval: time.Second})
	s := b.Initial(0)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += ms
		s, _ = b.Take(s, now, 1)
		s = b.Give(s, now, 1)
		_ = b.Fingerprint()
	})
	if allocs != 0 {
		t.Errorf("Take/Give/Fingerprint allocate %v times per run, want 0", allocs)
	}
}

// CreditsPerToken is the token unit the levels are counted in: RefillInterval
// divided by gcd(RefillTokens, RefillInterval in ns), as the package
// documentation states, and what a full bucket holds per token of capacity.
func TestCreditsPerToken(t *testing.T) {
	for _, c := range []struct {
		limit limiter.BucketLimit
		want  int64
	}{
		{limiter.BucketLimit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second}, int64(time.Second)},
		{limiter.BucketLimit{Capacity: 10, RefillTokens: 4, RefillInterval: 10 * time.Nanosecond}, 5},
		{limiter.BucketLimit{Capacity: 1, RefillTokens: 1000, RefillInterval: time.Microsecond}, 1},
	} {
		b := mustBucket(t, c.limit)
		if got := b.CreditsPerToken(); got != c.want || got != creditsPerToken(b) {
			t.Errorf("%+v: CreditsPerToken() = %d, want %d (full level / capacity %d)", c.limit, got, c.want, creditsPerToken(b))
		}
	}
}

// Long quotas with large capacities, whose level in credits exceeds 2^63 (a daily bucket of one
// token a day held 53,375 tokens at most when the level was one int64 of credits), decide
// exactly at fixed instants.
func TestLongQuotaBuckets(t *testing.T) {
	const day = 24 * time.Hour
	const never = time.Duration(math.MaxInt64)
	d := int64(day)
	t.Run("100000 tokens, one a day", func(t *testing.T) {
		b := mustBucket(t, limiter.BucketLimit{Capacity: 100_000, RefillTokens: 1, RefillInterval: day})
		runTrace(t, b, 0, []step{
			{at: 0, n: 99_999, want: allowed(1, 99_999*day)},
			{at: 0, n: 1, want: allowed(0, 100_000*day)},
			{at: 0, n: 1, want: rejected(0, day, 100_000*day)},
			{at: d / 2, n: 1, want: rejected(0, day/2, 100_000*day-day/2)},
			{at: d, n: 1, want: allowed(0, 100_000*day)},
			{at: 8 * d, n: 7, want: allowed(0, 100_000*day)},
			{at: 8 * d, n: 100_001, want: rejected(0, never, 100_000*day)},
		})
	})
	t.Run("1e9 tokens, one per 366 days", func(t *testing.T) {
		b := mustBucket(t, limiter.BucketLimit{Capacity: 1_000_000_000, RefillTokens: 1, RefillInterval: 366 * day})
		runTrace(t, b, 0, []step{
			{at: 0, n: 1, want: allowed(999_999_999, 366*day)},
			// 25,201 tokens missing take over 25,000 years: beyond an int64 of nanoseconds.
			{at: 0, n: 25_200, want: allowed(999_974_799, never)},
			{at: 183 * d, n: 999_974_800, want: rejected(999_974_799, 183*day, never)},
			{at: 366 * d, n: 999_974_800, want: allowed(0, never)},
			{at: 366 * d, n: 1, want: rejected(0, 366*day, never)},
		})
	})
	t.Run("7 per week, refilled continuously", func(t *testing.T) {
		b := mustBucket(t, limiter.BucketLimit{Capacity: 7, RefillTokens: 7, RefillInterval: 7 * day})
		runTrace(t, b, 0, []step{
			{at: 0, n: 7, want: allowed(0, 7*day)},
			{at: d - 1, n: 1, want: rejected(0, 1, 7*day-day+1)},
			{at: d, n: 1, want: allowed(0, 7*day)},
		})
	})
}
