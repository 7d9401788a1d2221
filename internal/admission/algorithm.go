package admission

import (
	"math"
	"math/bits"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
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

// newAlgorithm compiles a limit. describe says whether its decisions must carry Remaining and
// Reset (rate-limit headers are configured): a token bucket computes them only then.
func newAlgorithm(l config.Limit, describe bool) (algorithm, error) {
	switch l.Algorithm {
	case config.FixedWindow:
		limit := limiter.WindowLimit{Capacity: l.Capacity, Window: l.Window}
		w, err := limiter.NewFixedWindow(limit)
		return window{algo: w, limit: limit}, err
	case config.SlidingWindow:
		limit := limiter.WindowLimit{Capacity: l.Capacity, Window: l.Window}
		w, err := limiter.NewSlidingWindow(limit)
		return window{algo: w, limit: limit, sliding: true}, err
	default:
		b, err := limiter.NewBucket(limiter.BucketLimit{Capacity: l.Capacity, RefillTokens: l.RefillTokens, RefillInterval: l.RefillInterval})
		g := gcd(uint64(l.RefillInterval), uint64(l.RefillTokens))
		return &tokenBucket{b: b, describe: describe,
			capacity: l.Capacity, capacityCredits: b.Initial(0).Level, creditsPerToken: b.CreditsPerToken(),
			creditsPerNano: int64(uint64(l.RefillTokens) / max(g, 1))}, err
	}
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// tokenBucket stores (level in credits, last update, credits per token): the third cell lets a
// changed limit carry the level over in tokens.
//
// It decides on the request path, so take and the checks around it are written out on the
// bucket's numbers rather than calling limiter.Bucket: in upstream Go's Wasm every call and every
// signed division (a runtime call) is costly. FuzzTokenBucketMatchesLimiter holds them to
// limiter.Bucket's decisions exactly.
type tokenBucket struct {
	b        limiter.Bucket
	describe bool // compute Remaining and Reset

	capacity        int64 // tokens
	capacityCredits int64 // <= 2^62
	creditsPerToken int64 // >= 1
	creditsPerNano  int64 // >= 1 for a valid bucket

	// A bucket of a rule that delays (delay.go) reserves up to maxWait ahead: its level may be
	// below zero, down to -debt credits. Both are 0 for a bucket that only rejects.
	maxWait time.Duration
	debt    int64
}

func bucketState(c cells) limiter.BucketState { return limiter.BucketState{Level: c[0], Last: c[1]} }
func (t *tokenBucket) cells(s limiter.BucketState) cells {
	return cells{s.Level, s.Last, t.creditsPerToken}
}

func (t *tokenBucket) initial(now int64) cells {
	return cells{t.capacityCredits, now, t.creditsPerToken}
}

// take is limiter.Bucket.Take on the cells: refill to now, then take n tokens if there are.
func (t *tokenBucket) take(c cells, now, n int64) (cells, limiter.Decision) {
	if n > t.capacity || t.creditsPerNano <= 0 {
		// Never admitted (or an invalid bucket): rare, left to the limiter.
		s, d := t.b.Take(bucketState(c), now, n)
		return t.cells(s), d
	}
	n = max(n, 1)
	level, last := min(max(c[0], 0), t.capacityCredits), c[1]
	if now > last {
		// Full once elapsed × creditsPerNano reaches the deficit; the product is only formed
		// when elapsed is below the deficit (<= 2^62), and its high word says when it is more.
		elapsed, deficit := uint64(now)-uint64(last), uint64(t.capacityCredits-level)
		hi, added := bits.Mul64(elapsed, uint64(t.creditsPerNano))
		if elapsed >= deficit || hi != 0 || added >= deficit {
			level = t.capacityCredits
		} else {
			level += int64(added)
		}
		last = now
	}
	want := n * t.creditsPerToken // <= capacityCredits
	d := limiter.Decision{Allowed: level >= want}
	if d.Allowed {
		level -= want
	} else {
		d.RetryAfter = time.Duration(ceilDivU(uint64(want-level), uint64(t.creditsPerNano)))
	}
	if t.describe {
		d.Remaining = int64(uint64(level) / uint64(t.creditsPerToken))
		d.Reset = time.Duration(ceilDivU(uint64(t.capacityCredits-level), uint64(t.creditsPerNano)))
	}
	return cells{level, last, t.creditsPerToken}, d
}

// ceilDivU is ⌈a/d⌉ for d >= 1, in unsigned arithmetic (Wasm's i64.div_u, no runtime call).
func ceilDivU(a, d uint64) uint64 {
	q := a / d
	if q*d != a {
		q++
	}
	return q
}

func (t *tokenBucket) give(c cells, now, n int64) cells {
	if t.debt > 0 {
		return t.cells(t.b.Unreserve(bucketState(c), now, n))
	}
	return t.cells(t.b.Give(bucketState(c), now, n))
}

// undo: had the n tokens not been taken, the bucket would hold n more tokens, less whatever a
// refill to capacity cut off meanwhile. The most the bucket can have held since the write is the
// written level plus the refill since, so n tokens, or the room left above that, whichever is
// less, are still owed, in credits: a refill of part of a token since the write costs only that
// part, never a whole token.
func (t *tokenBucket) undo(c, written cells, now, n int64) cells {
	if t.debt > 0 {
		return t.undoReservation(c, written, now, n)
	}
	end := max(now, c[1])
	idle := t.idleAt(written)
	if end >= idle || t.creditsPerNano <= 0 {
		return c // the bucket may have been full since: nothing is owed
	}
	capacity := t.capacityCredits
	peak := min(max(written[0], -t.debt), capacity)
	if end > written[1] {
		peak += (end - written[1]) * t.creditsPerNano // below capacity: end is before idle
	}
	owed := min(min(max(n, 0), t.capacity)*t.creditsPerToken, capacity-peak)
	if owed <= 0 {
		return c
	}
	s := t.b.Refill(bucketState(c), now)
	if t.debt > 0 {
		s = t.b.RefillOwing(bucketState(c), now) // a reservation's debt stays owed
	}
	s.Level += min(owed, capacity-s.Level)
	return t.cells(s)
}

func (t *tokenBucket) valid(c cells) bool {
	return c[2] == t.creditsPerToken && -t.debt <= c[0] && c[0] <= t.capacityCredits
}
func (t *tokenBucket) fingerprint() uint32 { return t.b.Fingerprint() }

// idleAt: full again at last + ceil(missing credits / credits per nanosecond).
func (t *tokenBucket) idleAt(c cells) int64 {
	// A level below zero (a delaying rule's reservations) is missing that much more.
	level := min(max(c[0], -t.debt), t.capacityCredits)
	missing := uint64(t.capacityCredits) + uint64(-min(level, 0)) - uint64(max(level, 0))
	if missing == 0 || t.creditsPerNano <= 0 {
		return c[1]
	}
	wait := int64(min(ceilDivU(missing, uint64(t.creditsPerNano)), math.MaxInt64))
	if c[1] > math.MaxInt64-wait {
		return math.MaxInt64
	}
	return c[1] + wait
}

// convert keeps the tokens the key had, clamped to the new capacity (rounded down: a changed
// limit never hands out a fraction more).
func (t *tokenBucket) convert(c cells, now int64) (cells, bool) {
	oldPerToken, newPerToken := c[2], t.creditsPerToken
	if oldPerToken <= 0 {
		return cells{}, false
	}
	if c[0] < 0 {
		// Reservations still owed: carried over as a debt this limit may hold (none, for a
		// limit that rejects: an empty bucket), never as tokens.
		return t.convertDebt(c, newPerToken), true
	}
	hi, lo := bits.Mul64(uint64(c[0]), uint64(newPerToken))
	if hi >= uint64(oldPerToken) {
		return t.initial(now), true // more than any capacity: full
	}
	level, _ := bits.Div64(hi, lo, uint64(oldPerToken))
	capacity := t.capacityCredits
	return cells{min(int64(min(level, uint64(capacity))), capacity), c[1], newPerToken}, true
}

// policy: a token bucket's quota is its capacity, restored from empty in
// capacity × refill_interval / refill_tokens.
func (t *tokenBucket) policy() (int64, int64) {
	l := t.b.Limit()
	refill := time.Duration(float64(l.RefillInterval) * float64(l.Capacity) / float64(l.RefillTokens))
	return l.Capacity, max(ceilSeconds(refill), 1)
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
