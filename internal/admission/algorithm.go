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

// newAlgorithm compiles a limit. describe says whether its decisions must carry Remaining and
// Reset (rate-limit headers are configured): a token bucket computes them only then.
func newAlgorithm(l config.Limit, describe bool) (algorithm, error) {
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
		return &tokenBucket{b: b, describe: describe,
			capacity: l.Capacity, creditsPerToken: b.CreditsPerToken(), creditsPerNano: b.CreditsPerNano()}, err
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
// It decides on the request path, so take and the checks around it are written out on the
// bucket's numbers rather than calling limiter.Bucket: in upstream Go's Wasm every call and every
// signed division (a runtime call) is costly. TestTokenBucketMatchesLimiter holds them to
// limiter.Bucket's decisions exactly.
type tokenBucket struct {
	b        limiter.Bucket
	describe bool // compute Remaining and Reset

	capacity        int64 // tokens
	creditsPerToken int64 // >= 1
	creditsPerNano  int64 // >= 1 for a valid bucket

	// A bucket of a rule that delays (delay.go) reserves up to maxWait ahead: its whole tokens
	// may be below zero, down to -debt. Both are 0 for a bucket that only rejects.
	maxWait duration.Duration
	debt    int64
}

func bucketState(c cells) limiter.BucketState {
	return limiter.BucketState{Tokens: c[0], Credits: c[2], Last: c[1]}
}
func bucketCells(s limiter.BucketState) cells { return cells{s.Tokens, s.Last, s.Credits} }

func (t *tokenBucket) initial(now int64) cells { return cells{t.capacity, now, 0} }

// take is limiter.Bucket.Take on the cells: refill to now, then take n tokens if there are.
func (t *tokenBucket) take(c cells, now, n int64) (cells, limiter.Decision) {
	perToken := uint64(t.creditsPerToken)
	tokens, last, credits := c[0], c[1], c[2]
	if n > t.capacity || t.creditsPerNano <= 0 || uint64(tokens) > uint64(t.capacity) || uint64(credits) >= perToken ||
		tokens == t.capacity && credits != 0 {
		// Never admitted, an invalid bucket or a state out of range: rare, left to the limiter.
		s, d := t.b.Take(bucketState(c), now, n)
		return bucketCells(s), d
	}
	n = max(n, 1)
	if now > last {
		if tokens < t.capacity {
			// Full once elapsed × creditsPerNano reaches the credits missing; both are 128-bit.
			addHi, addLo := bits.Mul64(uint64(now)-uint64(last), uint64(t.creditsPerNano))
			missHi, missLo := bits.Mul64(uint64(t.capacity-tokens), perToken)
			var borrow uint64
			missLo, borrow = bits.Sub64(missLo, uint64(credits), 0)
			missHi -= borrow
			if addHi > missHi || addHi == missHi && addLo >= missLo {
				tokens, credits = t.capacity, 0
			} else {
				// The sum is below what is missing plus credits: its quotient is below the
				// tokens missing, and in the common case it fits in 64 bits.
				sumLo, carry := bits.Add64(addLo, uint64(credits), 0)
				var q, r uint64
				if sumHi := addHi + carry; sumHi == 0 {
					q = sumLo / perToken
					r = sumLo - q*perToken
				} else {
					q, r = bits.Div64(sumHi, sumLo, perToken)
				}
				tokens += int64(q)
				credits = int64(r)
			}
		}
		last = now
	}
	d := limiter.Decision{Allowed: tokens >= n}
	if d.Allowed {
		tokens -= n
	} else {
		d.RetryAfter = t.wait(n-tokens, credits)
	}
	if t.describe {
		d.Remaining = tokens
		if tokens < t.capacity {
			d.Reset = t.wait(t.capacity-tokens, credits)
		}
	}
	return cells{tokens, last, credits}, d
}

// wait is the time until a level lacking tokens less credits has refilled them, as
// limiter.Bucket reports it: ⌈(tokens×creditsPerToken - credits)/creditsPerNano⌉, math.MaxInt64
// when beyond it. The numerator fits in 64 bits in the common case.
func (t *tokenBucket) wait(tokens, credits int64) duration.Duration {
	hi, lo := bits.Mul64(uint64(tokens), uint64(t.creditsPerToken))
	var borrow uint64
	lo, borrow = bits.Sub64(lo, uint64(credits), 0)
	hi -= borrow
	d := uint64(t.creditsPerNano)
	var q uint64
	switch {
	case hi == 0:
		q = lo / d
		if q*d != lo {
			q++
		}
	case hi >= d:
		return math.MaxInt64
	default:
		var r uint64
		if q, r = bits.Div64(hi, lo, d); r != 0 {
			q++ // hi < d: q < 2^64-1
		}
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return duration.Duration(q)
}

func (t *tokenBucket) give(c cells, now, n int64) cells {
	if t.debt > 0 {
		return bucketCells(t.b.Unreserve(bucketState(c), now, n))
	}
	return bucketCells(t.b.Give(bucketState(c), now, n))
}

// undo: had the n tokens not been taken, the bucket would hold n more tokens, less whatever a
// refill to capacity cut off meanwhile. The most the bucket can have held since the write is the
// written level plus the refill since (peak), so n tokens, or the room left above the peak,
// whichever is less, are still owed: a refill of part of a token since the write costs only
// that part, never a whole token.
func (t *tokenBucket) undo(c, written cells, now, n int64) cells {
	if t.debt > 0 {
		return t.undoReservation(c, written, now, n)
	}
	end := max(now, c[1])
	idle := t.idleAt(written)
	if end >= idle || t.creditsPerNano <= 0 {
		return c // the bucket may have been full since: nothing is owed
	}
	// Not full by end (end is before idle), so peak lacks at least one credit.
	peak := t.b.Refill(bucketState(written), end)
	n = min(max(n, 0), t.capacity)
	if n <= 0 {
		return c
	}
	s := t.b.Refill(bucketState(c), now)
	if lacking := t.capacity - peak.Tokens; n < lacking {
		// n tokens fit under the peak: (Tokens+n)×perToken+Credits < capacity.
		return bucketCells(t.b.AddLevel(s, n, 0))
	}
	// The room above the peak: (capacity - peak.Tokens)×perToken - peak.Credits credits, n >=
	// capacity - peak.Tokens of them whole tokens, less the peak's credits.
	lacking := t.capacity - peak.Tokens
	if peak.Credits == 0 {
		return bucketCells(t.b.AddLevel(s, lacking, 0))
	}
	return bucketCells(t.b.AddLevel(s, lacking-1, t.creditsPerToken-peak.Credits))
}

func (t *tokenBucket) valid(c cells) bool {
	if t.debt > 0 {
		return t.b.ValidOwing(bucketState(c), t.maxWait)
	}
	return t.b.Valid(bucketState(c))
}

func (t *tokenBucket) fingerprint() uint32 { return t.b.Fingerprint() }

// idleAt: full again at last + ⌈missing credits / credits per nanosecond⌉. Written out for the
// common case, where the credits missing fit in 64 bits (it runs for every write); the rest is
// left to the limiter.
func (t *tokenBucket) idleAt(c cells) int64 {
	tokens, last, credits := c[0], c[1], c[2]
	if tokens == t.capacity && credits == 0 || t.creditsPerNano <= 0 {
		return last
	}
	if uint64(tokens) < uint64(t.capacity) && uint64(credits) < uint64(t.creditsPerToken) {
		if hi, missing := bits.Mul64(uint64(t.capacity-tokens), uint64(t.creditsPerToken)); hi == 0 {
			missing -= uint64(credits) // at least a token's worth is missing, more than credits
			perNano := uint64(t.creditsPerNano)
			wait := missing / perNano
			if wait*perNano != missing {
				wait++
			}
			if wait > uint64(math.MaxInt64)-uint64(last) { // MaxInt64-last, in 0..2^64-1
				return math.MaxInt64
			}
			return int64(uint64(last) + wait)
		}
	}
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
