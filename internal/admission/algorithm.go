package admission

import (
	"time"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// cells is a limit's state as stored: three integers whose meaning depends on the algorithm.
type cells [3]int64

// algorithm is one limit's counting rule over its stored cells, adapting the types of package
// limiter to one shape.
type algorithm interface {
	initial(now int64) cells
	take(c cells, now, n int64) (cells, limiter.Decision)
	give(c cells, now, n int64) cells
	valid(c cells) bool
	fingerprint() uint32
	// policy describes the limit for rate-limit headers: its quota and the window, in
	// seconds, over which the quota is restored.
	policy() (quota int64, windowSeconds int64)
}

func newAlgorithm(l config.Limit) (algorithm, error) {
	switch l.Algorithm {
	case config.FixedWindow:
		w, err := limiter.NewFixedWindow(limiter.WindowLimit{Capacity: l.Capacity, Window: l.Window})
		return fixedWindow{w}, err
	case config.SlidingWindow:
		w, err := limiter.NewSlidingWindow(limiter.WindowLimit{Capacity: l.Capacity, Window: l.Window})
		return slidingWindow{w}, err
	default:
		b, err := limiter.NewBucket(limiter.Limit{Capacity: l.Capacity, RefillTokens: l.RefillTokens, RefillInterval: l.RefillInterval})
		return tokenBucket{b}, err
	}
}

func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

type tokenBucket struct{ b limiter.Bucket }

func bucketState(c cells) limiter.State { return limiter.State{Level: c[0], Last: c[1]} }
func bucketCells(s limiter.State) cells { return cells{s.Level, s.Last, 0} }

func (t tokenBucket) initial(now int64) cells { return bucketCells(t.b.Full(now)) }
func (t tokenBucket) take(c cells, now, n int64) (cells, limiter.Decision) {
	s, d := t.b.Take(bucketState(c), now, n)
	return bucketCells(s), d
}
func (t tokenBucket) give(c cells, now, n int64) cells {
	return bucketCells(t.b.Give(bucketState(c), now, n))
}
func (t tokenBucket) valid(c cells) bool  { return c[2] == 0 && t.b.Valid(bucketState(c)) }
func (t tokenBucket) fingerprint() uint32 { return t.b.Fingerprint() }

// policy: a token bucket's quota is its capacity, restored from empty in
// capacity × refill_interval / refill_tokens.
func (t tokenBucket) policy() (int64, int64) {
	l := t.b.Limit()
	refill := time.Duration(float64(l.RefillInterval) * float64(l.Capacity) / float64(l.RefillTokens))
	return l.Capacity, max(ceilSeconds(refill), 1)
}

type fixedWindow struct{ w limiter.FixedWindow }

func windowState(c cells) limiter.WindowState {
	return limiter.WindowState{Start: c[0], Count: c[1], Previous: c[2]}
}
func windowCells(s limiter.WindowState) cells { return cells{s.Start, s.Count, s.Previous} }

func (f fixedWindow) initial(now int64) cells { return windowCells(f.w.Empty(now)) }
func (f fixedWindow) take(c cells, now, n int64) (cells, limiter.Decision) {
	s, d := f.w.Take(windowState(c), now, n)
	return windowCells(s), d
}
func (f fixedWindow) give(c cells, now, n int64) cells {
	return windowCells(f.w.Give(windowState(c), now, n))
}
func (f fixedWindow) valid(c cells) bool  { return f.w.Valid(windowState(c)) }
func (f fixedWindow) fingerprint() uint32 { return f.w.Fingerprint() }
func (f fixedWindow) policy() (int64, int64) {
	l := f.w.Limit()
	return l.Capacity, max(ceilSeconds(l.Window), 1)
}

type slidingWindow struct{ w limiter.SlidingWindow }

func (s slidingWindow) initial(now int64) cells { return windowCells(s.w.Empty(now)) }
func (s slidingWindow) take(c cells, now, n int64) (cells, limiter.Decision) {
	st, d := s.w.Take(windowState(c), now, n)
	return windowCells(st), d
}
func (s slidingWindow) give(c cells, now, n int64) cells {
	return windowCells(s.w.Give(windowState(c), now, n))
}
func (s slidingWindow) valid(c cells) bool  { return s.w.Valid(windowState(c)) }
func (s slidingWindow) fingerprint() uint32 { return s.w.Fingerprint() }
func (s slidingWindow) policy() (int64, int64) {
	l := s.w.Limit()
	return l.Capacity, max(ceilSeconds(l.Window), 1)
}
