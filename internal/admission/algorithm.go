package admission

import (
	"math"
	"math/bits"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// cells is a limit's state as stored: three integers whose meaning depends on the algorithm.
type cells [3]int64

// algorithm is one limit's counting rule over its stored cells: the limiter.Algorithm of its
// kind run on the state the cells hold, plus what the key table needs beyond deciding (when a
// slot is idle, carrying a state over to changed numbers) and what rate-limit headers say.
type algorithm interface {
	initial(now int64) cells
	take(c cells, now, n int64) (cells, limiter.Decision)
	give(c cells, now, n int64) cells
	// undo gives back the n units a write of the state written took, when another write of the
	// same decision failed. Other workers may have written since, and time passed: undo gives
	// back no more than the state would still lack had the n units never been taken.
	undo(c, written cells, now, n int64) cells
	valid(c cells) bool
	fingerprint() uint32
	// idleAt is the instant from which the state is as good as a new one (a full bucket, a
	// window with nothing counted): a slot idle by then may be given to another key.
	idleAt(c cells) int64
	// convert carries over the state a changed version of the same limit wrote (same rule,
	// index and key, same algorithm, other numbers); ok is false if it cannot.
	convert(c cells, now int64) (cells, bool)
	// policy describes the limit for rate-limit headers: its quota and the window, in
	// seconds, over which the quota is restored.
	policy() (quota int64, windowSeconds int64)
}

// newAlgorithm compiles a limit.
func newAlgorithm(l config.Limit) (algorithm, error) {
	switch l.Algorithm {
	case config.FixedWindow:
		if l.Calendar != config.NoCalendar {
			return newCalendarWindow(l)
		}
		limit := limiter.WindowLimit{Capacity: l.Capacity, Window: l.Window}
		w, err := limiter.NewFixedWindow(limit)
		return window{algo: w, limit: limit}, err
	case config.SlidingWindow:
		limit := limiter.WindowLimit{Capacity: l.Capacity, Window: l.Window}
		w, err := limiter.NewSlidingWindow(limit)
		return window{algo: w, limit: limit, sliding: true}, err
	case config.Concurrency:
		return newConcurrency(l), nil
	default:
		b, err := limiter.NewBucket(limiter.BucketLimit{Capacity: l.Capacity, RefillTokens: l.RefillTokens, RefillInterval: l.RefillInterval})
		return &tokenBucket{b: b, capacity: l.Capacity}, err
	}
}

func ceilSeconds(d duration.Duration) int64 {
	s := int64(d / duration.Second)
	if d%duration.Second != 0 {
		s++
	}
	return s
}

// tokenBucket stores (whole tokens, last update, credits toward the next token): the level of
// limiter.BucketState in its two parts, exact for every capacity and refill rate. Whole tokens
// mean the same for any numbers, so a changed limit carries them over.
//
// The key table calls its bucket directly for a known key (Gate.read, Gate.decide), without
// the interface: limiter.Bucket decides the common case in line, so that is one call.
type tokenBucket struct {
	b        limiter.Bucket
	capacity int64 // tokens, the bucket's

	// A bucket of a rule that delays (delay.go) reserves up to maxWait ahead: its whole tokens
	// may be below zero, down to -debt. A bucket of a rule with usage (usage.go) owes what a
	// response used beyond its reserve, down to -debt, with maxWait 0. Both are 0 for a bucket
	// that only rejects.
	maxWait duration.Duration
	debt    int64
}

func bucketState(c cells) limiter.BucketState {
	return limiter.BucketState{Tokens: c[0], Credits: c[2], Last: c[1]}
}
func bucketCells(s limiter.BucketState) cells { return cells{s.Tokens, s.Last, s.Credits} }

// setBucketCells writes bucketCells(s) into c in place: assigning the array bucketCells returns
// copies it with memory.copy in upstream Go's Wasm, a call out of the compiled code in wazero's.
func setBucketCells(c *cells, s limiter.BucketState) { c[0], c[1], c[2] = s.Tokens, s.Last, s.Credits }

func (t *tokenBucket) initial(now int64) cells { return cells{t.capacity, now, 0} }

func (t *tokenBucket) take(c cells, now, n int64) (cells, limiter.Decision) {
	s, d := t.b.Take(bucketState(c), now, n)
	return bucketCells(s), d
}

func (t *tokenBucket) give(c cells, now, n int64) cells {
	if t.debt > 0 {
		return bucketCells(t.b.Unreserve(bucketState(c), now, n))
	}
	return bucketCells(t.b.Give(bucketState(c), now, n))
}

// undo is limiter.Bucket.Undo for a bucket that only rejects (a refund never undoes a charge of
// nothing: n >= 1).
func (t *tokenBucket) undo(c, written cells, now, n int64) cells {
	switch {
	case t.maxWait > 0:
		return t.undoReservation(c, written, now, n)
	case t.debt > 0:
		return bucketCells(t.b.UndoOwing(bucketState(c), bucketState(written), now, n))
	}
	return bucketCells(t.b.Undo(bucketState(c), bucketState(written), now, n))
}

func (t *tokenBucket) valid(c cells) bool {
	if t.debt > 0 {
		return t.b.ValidOwing(bucketState(c), t.debt)
	}
	return t.b.Valid(bucketState(c))
}

func (t *tokenBucket) fingerprint() uint32 { return t.b.Fingerprint() }

func (t *tokenBucket) idleAt(c cells) int64 {
	if t.debt > 0 {
		return t.b.IdleAtOwing(bucketState(c)) // tokens still owed are missing too
	}
	return t.b.IdleAt(bucketState(c))
}

// convert keeps the whole tokens the key had, clamped to the new capacity: a changed limit never
// hands out a fraction more (the credits toward the next token mean another thing now).
func (t *tokenBucket) convert(c cells, now int64) (cells, bool) {
	if c[0] < 0 {
		// Reservations still owed (a delaying rule's): carried over as the whole tokens owed,
		// as deep as this limit may owe (not at all for a limit that rejects: then it is
		// empty), never turned into tokens.
		return cells{max(c[0], -t.debt), c[1], 0}, true
	}
	return cells{min(c[0], t.capacity), c[1], 0}, true
}

// policy: a token bucket's quota is its capacity, restored from empty in
// capacity × refill_interval / refill_tokens (rounded up to a second, at least one).
func (t *tokenBucket) policy() (int64, int64) {
	l := t.b.Limit()
	if l.RefillTokens < 1 || l.RefillInterval < 1 || l.Capacity < 1 {
		return l.Capacity, 1
	}
	hi, lo := bits.Mul64(uint64(l.Capacity), uint64(l.RefillInterval))
	perSecondHi, perSecond := bits.Mul64(uint64(l.RefillTokens), uint64(duration.Second))
	if perSecondHi != 0 || hi >= perSecond {
		return l.Capacity, math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, perSecond)
	if r != 0 {
		q++
	}
	return l.Capacity, int64(min(max(q, 1), math.MaxInt64))
}

// window is a fixed or a sliding window; it stores (window start, count, previous window's
// count), the WindowState of package limiter.
type window struct {
	algo    limiter.Algorithm[limiter.WindowState] // a FixedWindow or a SlidingWindow
	limit   limiter.WindowLimit
	sliding bool
}

func windowState(c cells) limiter.WindowState {
	return limiter.WindowState{Start: c[0], Count: c[1], Previous: c[2]}
}
func windowCells(s limiter.WindowState) cells { return cells{s.Start, s.Count, s.Previous} }

func (w window) initial(now int64) cells { return windowCells(w.algo.Initial(now)) }
func (w window) take(c cells, now, n int64) (cells, limiter.Decision) {
	s, d := w.algo.Take(windowState(c), now, n)
	return windowCells(s), d
}
func (w window) give(c cells, now, n int64) cells {
	return windowCells(w.algo.Give(windowState(c), now, n))
}

// undo: a window only counts up, so the units are still counted wherever the window has not
// moved on; give drops them once it has.
func (w window) undo(c, _ cells, now, n int64) cells { return w.give(c, now, n) }
func (w window) valid(c cells) bool                  { return w.algo.Valid(windowState(c)) }
func (w window) fingerprint() uint32                 { return w.algo.Fingerprint() }
func (w window) idleAt(c cells) int64 {
	return windowIdleAt(c, int64(w.limit.Window), w.sliding)
}
func (w window) convert(c cells, now int64) (cells, bool) {
	return convertWindow(c, w.algo.Initial(now).Start, int64(w.limit.Window), w.limit.Capacity, w.sliding), true
}
func (w window) policy() (int64, int64) {
	return w.limit.Capacity, max(ceilSeconds(w.limit.Window), 1)
}

// windowIdleAt: nothing counted in the window is felt once the window (and, sliding, the one
// after it) has passed.
func windowIdleAt(c cells, window int64, sliding bool) int64 {
	start, count, previous := c[0], c[1], c[2]
	ends := int64(0)
	switch {
	case count > 0 && sliding:
		ends = 2
	case count > 0, previous > 0 && sliding:
		ends = 1
	}
	if ends == 0 {
		return start
	}
	if start > math.MaxInt64-ends*window {
		return math.MaxInt64
	}
	return start + ends*window
}

// convertWindow keeps what a changed window limit counted: in the same window when its start is
// still aligned to the new length, else carried into the window of now; counts are clamped to
// the new capacity.
func convertWindow(c cells, currentStart, window, capacity int64, sliding bool) cells {
	count, previous := min(max(c[1], 0), capacity), min(max(c[2], 0), capacity)
	if !sliding {
		previous = 0
	}
	start := currentStart
	if c[0]%window == 0 {
		start = c[0]
	}
	return cells{start, count, previous}
}

// plainBucket is the limit's token bucket when it is one that only rejects, decided on the
// monotonic clock alone: no reservations (delay.go), no debt (usage.go), no calendar window
// beside it. Nil otherwise.
func (l *limit) plainBucket() *tokenBucket {
	tb, ok := l.algo.(*tokenBucket)
	if !ok || l.wall || l.wallPeer || l.maxWait != 0 || tb.debt != 0 || l.owes {
		return nil
	}
	return tb
}
