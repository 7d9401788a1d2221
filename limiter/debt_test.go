package limiter_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// Owe at fixed instants on a bucket of 10 tokens refilled one per second.
func TestOwe(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 10, RefillTokens: 1, RefillInterval: time.Second})
	sec := int64(time.Second)
	for _, c := range []struct {
		name          string
		s             limiter.BucketState
		now, n, floor int64
		want          limiter.BucketState
	}{
		{"within the level", limiter.BucketState{Tokens: 8}, 0, 3, 10, limiter.BucketState{Tokens: 5}},
		{"into debt, credits kept", limiter.BucketState{Tokens: 2, Credits: sec / 4}, 0, 5, 10, limiter.BucketState{Tokens: -3, Credits: sec / 4}},
		{"refilled first", limiter.BucketState{Tokens: 2}, 3*sec + sec/2, 4, 10, limiter.BucketState{Tokens: 1, Credits: sec / 2, Last: 3*sec + sec/2}},
		{"down to the floor exactly", limiter.BucketState{Tokens: 2}, 0, 12, 10, limiter.BucketState{Tokens: -10}},
		{"beyond the floor: forgiven", limiter.BucketState{Tokens: 2, Credits: sec / 2}, 0, 1000, 10, limiter.BucketState{Tokens: -10}},
		{"a debt grows", limiter.BucketState{Tokens: -4}, 0, 3, 10, limiter.BucketState{Tokens: -7}},
		{"no debt allowed", limiter.BucketState{Tokens: 3}, 0, 5, 0, limiter.BucketState{Tokens: 0}},
		{"nothing to take", limiter.BucketState{Tokens: 3}, 0, 0, 10, limiter.BucketState{Tokens: 3}},
		{"a time behind Last refills nothing", limiter.BucketState{Tokens: 3, Last: sec}, 0, 1, 10, limiter.BucketState{Tokens: 2, Last: sec}},
	} {
		if got := b.Owe(c.s, c.now, c.n, c.floor); got != c.want {
			t.Errorf("%s: Owe(%+v, %d, %d, %d) = %+v, want %+v", c.name, c.s, c.now, c.n, c.floor, got, c.want)
		}
		if got := b.Owe(c.s, c.now, c.n, c.floor); !b.ValidOwing(got, c.floor) {
			t.Errorf("%s: Owe left %+v, out of range for a debt of %d", c.name, got, c.floor)
		}
	}
}

// UndoOwing of an estimate taken into debt gives back what the bucket still lacks; Owe then
// UndoOwing of the same amount, with nothing in between, is no change at all.
func TestUndoOwing(t *testing.T) {
	b := mustBucket(t, limiter.BucketLimit{Capacity: 10, RefillTokens: 1, RefillInterval: time.Second})
	sec := int64(time.Second)
	written := limiter.BucketState{Tokens: -4}
	for _, c := range []struct {
		name string
		now  limiter.BucketState
		at   int64
		n    int64
		want limiter.BucketState
	}{
		{"nothing since", written, 0, 3, limiter.BucketState{Tokens: -1}},
		{"refilled since, still in debt", written, 2 * sec, 3, limiter.BucketState{Tokens: 1, Last: 2 * sec}},
		{"full since: nothing", limiter.BucketState{Tokens: 3, Last: 15 * sec}, 15 * sec, 3, limiter.BucketState{Tokens: 3, Last: 15 * sec}},
		{"near full: the room above the peak", written, 13 * sec, 5, limiter.BucketState{Tokens: 10, Last: 13 * sec}},
	} {
		if got := b.UndoOwing(c.now, written, c.at, c.n); got != c.want {
			t.Errorf("%s: UndoOwing(%+v, written %+v, at %d, n %d) = %+v, want %+v", c.name, c.now, written, c.at, c.n, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		s := limiter.BucketState{Tokens: rng.Int64N(21) - 10, Credits: rng.Int64N(sec)}
		if s.Tokens == 10 {
			s.Credits = 0
		}
		n := 1 + rng.Int64N(10)
		owed := b.Owe(s, 0, n, 10)
		if s.Tokens-n < -10 {
			continue // forgiven in part: not a round trip
		}
		if got := b.UndoOwing(owed, owed, 0, n); got != s {
			t.Fatalf("Owe(%+v, %d) then UndoOwing = %+v, want it back", s, n, got)
		}
	}
}
