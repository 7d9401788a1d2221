package limiter

import (
	"errors"
	"math"
	"math/bits"

	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// never is the RetryAfter of a request that no amount of waiting can admit. A wait or Reset
// longer than it (about 292 years, possible only with a slow refill and a huge capacity) is
// reported as never too.
const never = duration.Duration(math.MaxInt64)

// fingerprintVersion is hashed first by Fingerprint; change it if the
// meaning of BucketState ever changes, so stored states are discarded.
// Version 2: the level is kept as whole tokens and the credits toward the next one.
const fingerprintVersion = 2

var (
	errCapacity       = errors.New("limiter: Capacity must be at least 1")
	errRefillTokens   = errors.New("limiter: RefillTokens must be at least 1")
	errRefillInterval = errors.New("limiter: RefillInterval must be at least 1ns")
)

// BucketLimit is the shape of one token bucket.
type BucketLimit struct {
	Capacity       int64             // tokens the bucket holds when full (burst), >= 1
	RefillTokens   int64             // tokens added per RefillInterval, >= 1
	RefillInterval duration.Duration // >= 1ns
}

// Bucket is a validated BucketLimit with precomputed integer units. It is an
// immutable value, safe to copy and to share between goroutines. Its methods
// take it by pointer and change nothing: in upstream Go's Wasm a receiver of
// its size is copied with memory.copy at every call, inlined ones too, and the
// request path makes several (*Bucket, not Bucket, is an Algorithm).
//
// The zero Bucket is not valid: it admits nothing and changes no BucketState.
type Bucket struct {
	limit           BucketLimit
	creditsPerToken int64 // RefillInterval/g: one token, in credits
	creditsPerNano  int64 // RefillTokens/g: credits added per elapsed nanosecond
	// Of a narrow bucket (narrow.go), computed once rather than on every decision: Go's Wasm
	// divides in an instruction that costs tens of cycles on some processors.
	fullCredits uint64 // Capacity×CreditsPerToken, a full bucket's credits; 0 when not narrow
	fillBound   uint64 // the longest refill whose credits fit in 64 bits: 2^64-1 / CreditsPerNano
}

// BucketState is what is persisted per key. The level, in credits, is
// Tokens×CreditsPerToken + Credits: kept in two parts, it is exact for every
// capacity and refill rate, where a single count of credits would need more
// than 64 bits (a capacity of 10^9 tokens refilled one a year is 3×10^25
// credits).
type BucketState struct {
	Tokens int64 // whole tokens, 0..Capacity
	// Credits are the credits toward the next token (see the package documentation), fewer
	// than one token is worth; 0 when full.
	Credits int64
	// Last is when the level was computed, in nanoseconds on the caller's
	// monotonic time base. It never decreases: a Take or Give at an
	// earlier now is made as of Last.
	Last int64
}

// Decision is the outcome of one Take.
type Decision struct {
	Allowed   bool
	Remaining int64 // whole tokens left after this decision (floor), >= 0
	// RetryAfter is 0 when allowed. When rejected it is the exact time until
	// the requested tokens are available, or math.MaxInt64 nanoseconds when
	// the request is larger than the bucket's Capacity and can never be
	// admitted.
	RetryAfter duration.Duration
	Reset      duration.Duration // time until the bucket is full again after this decision (0 if full)
}

// RetryAt is the instant from which the request that Take(s, now, n) rejected with d is
// admitted, while nothing is taken from the bucket; false when there is none (the request is
// larger than the bucket) or it is not below math.MaxInt64. The level gains the same credits
// every nanosecond, so the wait shrinks by exactly the time that passes: Take(s, t, n) rejects
// the request at every t before RetryAt, with RetryAfter RetryAt - max(t, s.Last), and admits it
// from RetryAt on. A caller that keeps s after a rejection can answer the same request again
// from RetryAt alone, with no Take, for as long as it knows nothing was taken.
func (d Decision) RetryAt(s BucketState, now int64) (int64, bool) {
	if d.Allowed || d.RetryAfter == never {
		return 0, false
	}
	at := after(max(now, s.Last), uint64(d.RetryAfter))
	if at == math.MaxInt64 { // saturated: the instant does not fit
		return 0, false
	}
	return at, true
}

// NewBucket validates l and precomputes its units. It rejects non-positive
// fields; any positive numbers are exact.
func NewBucket(l BucketLimit) (Bucket, error) {
	if l.Capacity < 1 {
		return Bucket{}, errCapacity
	}
	if l.RefillTokens < 1 {
		return Bucket{}, errRefillTokens
	}
	if l.RefillInterval < 1 {
		return Bucket{}, errRefillInterval
	}
	g := gcd(uint64(l.RefillTokens), uint64(l.RefillInterval))
	b := Bucket{
		limit:           l,
		creditsPerToken: int64(uint64(l.RefillInterval) / g),
		creditsPerNano:  int64(uint64(l.RefillTokens) / g),
	}
	if uint64(l.Capacity) <= math.MaxUint64/uint64(b.creditsPerToken) {
		b.fullCredits = uint64(l.Capacity) * uint64(b.creditsPerToken)
	}
	b.fillBound = math.MaxUint64 / uint64(b.creditsPerNano)
	return b, nil
}

// BucketLimit returns the BucketLimit the bucket was made from.
func (b *Bucket) Limit() BucketLimit { return b.limit }

// Initial returns the state of a key never seen: a full bucket as of now.
func (b *Bucket) Initial(now int64) BucketState {
	return BucketState{Tokens: b.limit.Capacity, Last: now}
}

// Valid reports whether s holds 0 to Capacity tokens and fewer credits than
// one token is worth, none when full.
func (b *Bucket) Valid(s BucketState) bool {
	return 0 <= s.Tokens && s.Tokens <= b.limit.Capacity && 0 <= s.Credits && s.Credits < b.creditsPerToken &&
		(s.Tokens < b.limit.Capacity || s.Credits == 0)
}

// Take refills s to now and then tries to take n tokens; n < 1 counts as 1.
// A now behind s.Last is read as s.Last: nothing is refilled, Last is kept
// and every duration is counted from it. A rejected request takes nothing
// but still returns the refilled BucketState. A request for more than Capacity
// tokens is always rejected, with RetryAfter math.MaxInt64 nanoseconds.
func (b *Bucket) Take(s BucketState, now int64, n int64) (BucketState, Decision) {
	n = max(n, 1)
	if n <= b.limit.Capacity && b.Valid(s) && b.narrow() {
		// The common case, in 64 bits and in line (narrow.go). A refill shorter than the time
		// to fill the bucket adds fewer credits than are missing: their sum with Credits fits.
		if now > s.Last {
			elapsed := uint64(now) - uint64(s.Last)
			s.Last = now
			// Full once the refill's credits reach the missing ones (fillNarrow's test, without
			// its division); a refill beyond fillBound is more than any narrow bucket misses.
			if elapsed > b.fillBound || elapsed*uint64(b.creditsPerNano) >= b.missingNarrow(s) {
				s.Tokens, s.Credits = b.limit.Capacity, 0
			} else {
				sum := elapsed*uint64(b.creditsPerNano) + uint64(s.Credits)
				tokens := sum / uint64(b.creditsPerToken)
				s.Tokens += int64(tokens)
				s.Credits = int64(sum - tokens*uint64(b.creditsPerToken))
			}
		}
		d := Decision{Allowed: s.Tokens >= n}
		if d.Allowed {
			s.Tokens -= n
		} else {
			d.RetryAfter = b.waitNarrow(n-s.Tokens, s.Credits)
		}
		d.Remaining = s.Tokens
		if s.Tokens < b.limit.Capacity {
			d.Reset = b.waitNarrow(b.limit.Capacity-s.Tokens, s.Credits)
		}
		return s, d
	}
	if b.creditsPerNano == 0 {
		return s, Decision{RetryAfter: never}
	}
	s = b.refill(s, now)
	switch {
	case n > b.limit.Capacity:
		return s, b.decision(false, s, never)
	case s.Tokens >= n: // Credits < one token, so the level reaches n tokens exactly when Tokens does
		s.Tokens -= n
		return s, b.decision(true, s, 0)
	}
	// The level lacks (n-Tokens) tokens less the credits it has.
	return s, b.decision(false, s, b.wait(n-s.Tokens, s.Credits))
}

// Give refills s to now (a now behind s.Last is read as s.Last, as in Take)
// and then returns n tokens to it, without exceeding capacity. It undoes a
// Take that another limit overruled; n < 1 counts as 1, as in Take, so
// Give(n) undoes Take(n) for every n.
func (b *Bucket) Give(s BucketState, now int64, n int64) BucketState {
	if b.creditsPerNano == 0 {
		return s
	}
	s = b.refill(s, now)
	return b.addLevel(s, max(n, 1), 0)
}

// addLevel adds tokens and credits (negative ones count as 0) to s's level, up to capacity,
// without refilling: a caller that gives back part of a token refills first. s is clamped into
// range first, as Take does.
func (b *Bucket) addLevel(s BucketState, tokens, credits int64) BucketState {
	return b.addClamped(b.clamp(s), tokens, credits)
}

// addClamped is addLevel of a state already clamped (by clamp, or by clampOwing for a level in
// debt: the room up to capacity is then more than the capacity, and still fits in 63 bits).
func (b *Bucket) addClamped(s BucketState, tokens, credits int64) BucketState {
	c, perToken := b.limit.Capacity, uint64(b.creditsPerToken)
	room := c - s.Tokens
	whole := min(max(tokens, 0), c)
	credits = max(credits, 0)
	if q := credits / b.creditsPerToken; q >= c-whole {
		whole = c
	} else {
		whole += q
	}
	frac := uint64(s.Credits) + uint64(credits)%perToken // below two tokens' worth: fits
	if frac >= perToken {
		frac -= perToken
		if whole >= room {
			return BucketState{Tokens: c, Last: s.Last}
		}
		whole++
	}
	if whole >= room {
		return BucketState{Tokens: c, Last: s.Last}
	}
	return BucketState{Tokens: s.Tokens + whole, Credits: int64(frac), Last: s.Last}
}

// Undo gives back to s the n tokens (n < 1 counts as 1) that a Take stored as written took, when
// that Take must be undone after all (another limit of the same request failed to store its
// own) but others sharing the key may have stored states since, and time has passed: s is the
// key's state now. Had the tokens not been taken, the bucket would hold n more, less what a
// refill up to capacity cut off meanwhile. The most it can have held since is written refilled
// to now (the peak), so Undo gives back n tokens or the room left above the peak, whichever is
// less, and nothing once the bucket may have been full since. A refill of part of a token since
// the write costs only that part, never a whole token. Give, by contrast, returns n tokens
// whatever happened in between.
func (b *Bucket) Undo(s, written BucketState, now, n int64) BucketState {
	return b.undo(s, written, now, n, false)
}

// undo is Undo, of levels that may be in debt when owing is set (UndoOwing).
func (b *Bucket) undo(s, written BucketState, now, n int64, owing bool) BucketState {
	end := max(now, s.Last)
	if b.creditsPerNano == 0 || !owing && end >= b.IdleAt(written) || owing && end >= b.IdleAtOwing(written) {
		return s // the bucket may have been full since: nothing is owed
	}
	// Not full by end (end is before it is idle), so the peak lacks at least one credit.
	var peak BucketState
	if owing {
		peak, s = b.refillOwing(written, end), b.refillOwing(s, now)
	} else {
		peak, s = b.refill(written, end), b.refill(s, now)
	}
	n = min(max(n, 1), b.limit.Capacity)
	tokens, credits := n, int64(0) // n tokens, if they fit under the peak
	if lacking := b.limit.Capacity - peak.Tokens; n >= lacking {
		// The room above the peak: lacking tokens less the peak's credits.
		tokens = lacking
		if peak.Credits != 0 {
			tokens, credits = lacking-1, b.creditsPerToken-peak.Credits
		}
	}
	return b.addClamped(s, tokens, credits)
}

// Fingerprint is a stable hash of the BucketLimit's Capacity, RefillTokens and
// RefillInterval. A stored BucketState should only be reused by a Bucket with the
// same fingerprint; otherwise start from Initial.
func (b *Bucket) Fingerprint() uint32 {
	// 32-bit FNV-1a over a version byte and the three fields as 8-byte
	// little-endian integers, written out to avoid hash/fnv's allocation.
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	h = (h ^ fingerprintVersion) * prime
	fields := [3]uint64{uint64(b.limit.Capacity), uint64(b.limit.RefillTokens), uint64(b.limit.RefillInterval)}
	for _, v := range fields {
		for shift := 0; shift < 64; shift += 8 {
			h = (h ^ uint32(byte(v>>shift))) * prime
		}
	}
	return h
}

// IdleAt is the instant from which s, left alone, is full again: Last plus the time to refill
// what it lacks (math.MaxInt64 if that is beyond it).
func (b *Bucket) IdleAt(s BucketState) int64 {
	s = b.clamp(s)
	if b.narrow() {
		return b.idleAtNarrow(s) // the common case, in 64 bits and in line
	}
	return b.IdleAtOwing(s) // which reads a state in range as IdleAt does
}

// IdleAt is Bucket.IdleAt of next, the state Take returned with d, without computing the wait
// again: next.Last plus Reset, the time Take found to refill what next lacks. ok is false in the
// one case Reset cannot tell, a wait beyond math.MaxInt64 after a negative Last: Bucket.IdleAt
// then. Small enough to inline, where Bucket.IdleAt is a call.
func (d Decision) IdleAt(next BucketState) (at int64, ok bool) {
	if d.Reset == never && next.Last < 0 {
		return 0, false
	}
	return after(next.Last, uint64(d.Reset)), true
}

// after is the instant wait nanoseconds after last, or math.MaxInt64 if that is beyond it.
func after(last int64, wait uint64) int64 {
	if wait > uint64(math.MaxInt64)-uint64(last) { // MaxInt64-last, in 0..2^64-1
		return math.MaxInt64
	}
	return int64(uint64(last) + wait)
}

// clamp brings the parts of s into range: Tokens into 0..Capacity, Credits into
// 0..CreditsPerToken-1, and no credits when full.
func (b *Bucket) clamp(s BucketState) BucketState {
	s.Tokens = min(max(s.Tokens, 0), b.limit.Capacity)
	s.Credits = min(max(s.Credits, 0), b.creditsPerToken-1)
	if s.Tokens == b.limit.Capacity {
		s.Credits = 0
	}
	return s
}

// missing is the credits a clamped s lacks to be full: (Capacity-Tokens)×CreditsPerToken - Credits.
func (b *Bucket) missing(s BucketState) (hi, lo uint64) {
	hi, lo = bits.Mul64(uint64(b.limit.Capacity-s.Tokens), uint64(b.creditsPerToken))
	var borrow uint64
	lo, borrow = bits.Sub64(lo, uint64(s.Credits), 0)
	return hi - borrow, lo
}

// refill clamps s into range and brings it forward to now. Time never goes
// backwards (see the package documentation): a now behind s.Last, by any
// amount, is read as s.Last, so nothing is refilled and Last is kept.
//
// The refill adds elapsed×CreditsPerNano credits, up to what the bucket
// lacks; both are 128-bit numbers (below 2^127), and the whole tokens of the
// sum are a 128-by-64-bit division whose quotient is below Capacity.
func (b *Bucket) refill(s BucketState, now int64) BucketState {
	return b.refillClamped(b.clamp(s), now)
}

// refillClamped is refill of a state already clamped into its range (by clamp, or by
// clampOwing for a level in debt).
func (b *Bucket) refillClamped(s BucketState, now int64) BucketState {
	if now <= s.Last {
		return s
	}
	elapsed := uint64(now) - uint64(s.Last) // may exceed math.MaxInt64
	s.Last = now
	if s.Tokens == b.limit.Capacity {
		return s
	}
	addHi, addLo := bits.Mul64(elapsed, uint64(b.creditsPerNano))
	if missHi, missLo := b.missing(s); !less128(addHi, addLo, missHi, missLo) {
		return BucketState{Tokens: b.limit.Capacity, Last: now}
	}
	// Credits + added < what is missing + Credits <= (Capacity-Tokens) tokens: the quotient
	// is below Capacity-Tokens, so the division cannot overflow.
	var carry uint64
	addLo, carry = bits.Add64(addLo, uint64(s.Credits), 0)
	tokens, credits := bits.Div64(addHi+carry, addLo, uint64(b.creditsPerToken))
	s.Tokens += int64(tokens)
	s.Credits = int64(credits)
	return s
}

// wait is the time until a level lacking tokens minus credits (tokens >= 1, credits below one
// token) has refilled them: ⌈(tokens×CreditsPerToken-credits)/CreditsPerNano⌉, or never if
// that is beyond math.MaxInt64 nanoseconds.
func (b *Bucket) wait(tokens, credits int64) duration.Duration {
	hi, lo := bits.Mul64(uint64(tokens), uint64(b.creditsPerToken))
	var borrow uint64
	lo, borrow = bits.Sub64(lo, uint64(credits), 0)
	return saturated(ceilDiv128(hi-borrow, lo, uint64(b.creditsPerNano)))
}

// decision reports s (after the decision) as a Decision.
func (b *Bucket) decision(allowed bool, s BucketState, retryAfter duration.Duration) Decision {
	d := Decision{Allowed: allowed, Remaining: s.Tokens, RetryAfter: retryAfter}
	if s.Tokens < b.limit.Capacity {
		d.Reset = b.wait(b.limit.Capacity-s.Tokens, s.Credits)
	}
	return d
}

// ceilDiv128 is ⌈(hi, lo)/d⌉ for d >= 1, or math.MaxUint64 when that does not fit in 64 bits.
func ceilDiv128(hi, lo, d uint64) uint64 {
	if hi >= d {
		return math.MaxUint64
	}
	q, r := bits.Div64(hi, lo, d)
	if r != 0 {
		if q == math.MaxUint64 {
			return q
		}
		q++
	}
	return q
}

// saturated is n nanoseconds, or never when n is beyond math.MaxInt64.
func saturated(n uint64) duration.Duration {
	if n > uint64(never) {
		return never
	}
	return duration.Duration(n)
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
