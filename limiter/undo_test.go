package limiter_test

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// Undo at fixed instants, on a bucket of 10 tokens refilled one per second, where a Take of 3
// tokens at 0 stored {7 tokens, Last 0} and must be undone.
func TestUndo(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 10, RefillTokens: 1, RefillInterval: time.Second})
	written := limiter.BucketState{Tokens: 7, Last: 0}
	sec := int64(time.Second)
	for _, c := range []struct {
		name string
		now  limiter.BucketState // the state now
		at   int64
		n    int64
		want limiter.BucketState
	}{
		{"nothing since", written, 0, 3, limiter.BucketState{Tokens: 10, Last: 0}},
		{"another take since", limiter.BucketState{Tokens: 5, Last: 0}, 0, 3, limiter.BucketState{Tokens: 8, Last: 0}},
		{"refilled meanwhile, room for all", written, sec / 2, 2, limiter.BucketState{Tokens: 9, Credits: int64(time.Second) / 2, Last: sec / 2}},
		// At 2.5s the bucket could hold 9.5 tokens: the room above is half a token.
		{"refilled meanwhile, room for part", written, 5 * sec / 2, 3, limiter.BucketState{Tokens: 10, Last: 5 * sec / 2}},
		{"part of a token of room", limiter.BucketState{Tokens: 4, Last: 5 * sec / 2}, 5 * sec / 2, 3,
			limiter.BucketState{Tokens: 4, Credits: int64(time.Second) / 2, Last: 5 * sec / 2}},
		{"full since", limiter.BucketState{Tokens: 2, Last: 3 * sec}, 3 * sec, 3, limiter.BucketState{Tokens: 2, Last: 3 * sec}},
		{"n below 1 is 1", limiter.BucketState{Tokens: 5, Last: 0}, 0, 0, limiter.BucketState{Tokens: 6, Last: 0}},
	} {
		if got := b.Undo(c.now, written, c.at, c.n); got != c.want {
			t.Errorf("%s: Undo(%+v, written %+v, at %d, n %d) = %+v, want %+v", c.name, c.now, written, c.at, c.n, got, c.want)
		}
	}
}

// Undo gives back what the reference, on levels in big integers, says is still owed: n tokens,
// or the room above the most the bucket can have held since the write (its written level
// refilled to the later of now and the state's last update), whichever is less, added to the
// state refilled to now; and nothing, leaving the state as it is, once the bucket may have been
// full since. Random long and short limits, states and times.
func TestUndoMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const day = int64(24 * time.Hour)
	for checked := 0; checked < 100_000; {
		l := limiter.BucketLimit{Capacity: 1 + r.Int64N(1000), RefillTokens: 1 + r.Int64N(100), RefillInterval: time.Duration(1 + r.Int64N(int64(time.Hour)))}
		if r.IntN(2) == 0 {
			l = limiter.BucketLimit{Capacity: []int64{53_376, 100_000, 1e9}[r.IntN(3)], RefillTokens: 1 + r.Int64N(3),
				RefillInterval: time.Duration([]int64{day, 7 * day, 366 * day}[r.IntN(3)])}
		}
		b := mustBucket(t, l)
		perToken, perNano := b.CreditsPerToken(), b.CreditsPerNano()
		level := func(s limiter.BucketState) *big.Int { return bigLevel(s, perToken) }
		full := new(big.Int).Mul(big.NewInt(l.Capacity), big.NewInt(perToken))
		refilled := func(s limiter.BucketState, at int64) *big.Int {
			v := level(s)
			if at > s.Last {
				v.Add(v, new(big.Int).Mul(big.NewInt(at-s.Last), big.NewInt(perNano)))
			}
			if v.Cmp(full) > 0 {
				v.Set(full)
			}
			return v
		}
		state := func() limiter.BucketState {
			tokens := r.Int64N(l.Capacity + 1)
			credits := r.Int64N(perToken)
			if tokens == l.Capacity {
				credits = 0
			}
			return limiter.BucketState{Tokens: tokens, Credits: credits, Last: int64(1e15) + r.Int64N(30*day)}
		}
		for range 10 {
			written, s := state(), state()
			s.Last = max(s.Last, written.Last) // written first, then others
			now, n := s.Last-r.Int64N(day)+r.Int64N(2*day), 1+r.Int64N(l.Capacity+1)
			got := level(b.Undo(s, written, now, n))
			want := level(s) // nothing owed: the state is left as it is
			if peak := refilled(written, max(now, s.Last)); peak.Cmp(full) < 0 {
				want = refilled(s, now)
				owed := new(big.Int).Mul(big.NewInt(min(n, l.Capacity)), big.NewInt(perToken))
				if room := new(big.Int).Sub(full, peak); room.Cmp(owed) < 0 {
					owed = room
				}
				want.Add(want, owed)
				if want.Cmp(full) > 0 {
					want.Set(full)
				}
			}
			if got.Cmp(want) != 0 {
				t.Fatalf("%+v: Undo(%+v, written %+v, now %d, n %d) = level %v, want %v", l, s, written, now, n, got, want)
			}
			checked++
		}
	}
}
