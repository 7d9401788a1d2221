package limiter

import (
	"math/bits"

	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// Reservations. A caller that holds a request until its tokens are due, instead of rejecting
// it, takes them in advance with Reserve: the whole tokens may go below zero, a debt that the
// refill repays before the bucket holds anything again. A reservation waits at most maxWait, so
// the debt never exceeds the refill over maxWait (DebtTokens). Requests let go at their due
// instants (the reservation's now + Wait) are then paced exactly as a bucket admits: over any
// interval of length T, at most Capacity + T × RefillTokens/RefillInterval tokens are due in it
// (TestReserveMatchesReferenceModel checks it).
//
// A state in debt is still a BucketState, with Tokens below zero and Credits toward the next
// token as always; Take, Give and Valid read it as an empty bucket (see clamp), so a bucket that
// reserves must be read with the functions of this file.

// Reservation is the outcome of one Reserve.
type Reservation struct {
	// OK is true when the tokens were taken: they are due Wait from now (0: at once).
	OK   bool
	Wait duration.Duration
	// RetryAfter is 0 when OK. Otherwise it is the time until the tokens would be there at
	// once, as Take's, or math.MaxInt64 nanoseconds for a request larger than Capacity.
	RetryAfter duration.Duration
	// Remaining is the whole tokens left (none while the bucket owes).
	Remaining int64
	// Reset is the time until the bucket is full again.
	Reset duration.Duration
}

// maxDebtTokens bounds the whole tokens a bucket may owe, so that Capacity minus Tokens always
// fits in 63 bits.
const maxDebtTokens = 1 << 62

// DebtTokens is the most whole tokens a bucket that reserves with maxWait can owe: the refill over
// maxWait, rounded up (at most 2^62).
func (b *Bucket) DebtTokens(maxWait duration.Duration) int64 {
	if maxWait <= 0 || b.creditsPerNano == 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(maxWait), uint64(b.creditsPerNano))
	q := ceilDiv128(hi, lo, uint64(b.creditsPerToken))
	return int64(min(q, maxDebtTokens))
}

// Reserve refills s to now and takes n tokens (n < 1 counts as 1) if they are there, or will be
// within maxWait: then OK, with Wait the time until they are due. Otherwise nothing is taken and
// RetryAfter says when they would be there at once. A now behind s.Last is read as s.Last, as in
// Take.
func (b *Bucket) Reserve(s BucketState, now, n int64, maxWait duration.Duration) (BucketState, Reservation) {
	if b.creditsPerNano == 0 {
		return s, Reservation{RetryAfter: never}
	}
	n = max(n, 1)
	s = b.refillOwing(s, now)
	switch {
	case n > b.limit.Capacity:
		return s, b.reservation(false, s, 0, never)
	case s.Tokens >= n:
		s.Tokens -= n
		return s, b.reservation(true, s, 0, 0)
	}
	// The level lacks n-Tokens tokens less its credits; when they are due, the level after
	// taking them is back at zero.
	wait := b.wait(n-s.Tokens, s.Credits)
	if maxWait < 0 || wait > maxWait || s.Tokens-n < -maxDebtTokens {
		return s, b.reservation(false, s, 0, wait)
	}
	s.Tokens -= n
	return s, b.reservation(true, s, wait, 0)
}

// Unreserve refills s to now and gives back n tokens (n < 1 counts as 1) to a bucket that may
// owe, without exceeding capacity: it undoes a Reserve whose request did not go on.
func (b *Bucket) Unreserve(s BucketState, now, n int64) BucketState {
	if b.creditsPerNano == 0 {
		return s
	}
	n = min(max(n, 1), b.limit.Capacity)
	s = b.refillOwing(s, now)
	if n >= b.limit.Capacity-s.Tokens { // Credits >= 0: at or above capacity
		return BucketState{Tokens: b.limit.Capacity, Last: s.Last}
	}
	s.Tokens += n
	return s
}

// ValidOwing reports whether s is in range for a bucket that may owe debt whole tokens (for one
// that reserves with maxWait, DebtTokens(maxWait)): whole tokens from -debt to Capacity, credits
// as Valid wants them.
func (b *Bucket) ValidOwing(s BucketState, debt int64) bool {
	return -debt <= s.Tokens && s.Tokens <= b.limit.Capacity && 0 <= s.Credits &&
		s.Credits < b.creditsPerToken && (s.Tokens < b.limit.Capacity || s.Credits == 0)
}

// IdleAtOwing is IdleAt for a bucket that may owe: the instant from which s is full again, its
// debt repaid first.
func (b *Bucket) IdleAtOwing(s BucketState) int64 {
	s = b.clampOwing(s)
	switch {
	case s.Tokens == b.limit.Capacity || b.creditsPerNano == 0:
		return s.Last
	case s.Tokens >= 0 && b.narrow():
		return b.idleAtNarrow(s) // no debt: a state in range
	}
	hi, lo := b.missing(s)
	return after(s.Last, ceilDiv128(hi, lo, uint64(b.creditsPerNano)))
}

// clampOwing is clamp with whole tokens allowed down to -maxDebtTokens.
func (b *Bucket) clampOwing(s BucketState) BucketState {
	s.Tokens = min(max(s.Tokens, -maxDebtTokens), b.limit.Capacity)
	s.Credits = min(max(s.Credits, 0), b.creditsPerToken-1)
	if s.Tokens == b.limit.Capacity {
		s.Credits = 0
	}
	return s
}

// refillOwing is refill for a level that may be below zero: the credits missing to be full are
// (Capacity-Tokens)×CreditsPerToken - Credits, a 128-bit number, and the whole tokens the refill
// adds are below Capacity-Tokens.
func (b *Bucket) refillOwing(s BucketState, now int64) BucketState {
	return b.refillClamped(b.clampOwing(s), now)
}

func (b *Bucket) reservation(ok bool, s BucketState, wait, retryAfter duration.Duration) Reservation {
	r := Reservation{OK: ok, Wait: wait, RetryAfter: retryAfter, Remaining: max(s.Tokens, 0)}
	if s.Tokens < b.limit.Capacity {
		r.Reset = b.wait(b.limit.Capacity-s.Tokens, s.Credits)
	}
	return r
}
