package limiter

import (
	"math/bits"
	"time"
)

// Reservations. A caller that holds a request until its tokens are due, instead of rejecting
// it, takes them in advance with Reserve: the level may go below zero, a debt that the refill
// repays before the bucket holds anything again. A reservation waits at most maxWait, so the debt
// never exceeds the refill over maxWait (MaxDebt). Requests let go at their due instants
// (the reservation's now + Wait) are then paced exactly as a bucket admits: over any interval
// of length T, at most Capacity + T × RefillTokens/RefillInterval tokens are due in it (the
// property TestReservationsArePaced checks).
//
// A state in debt is still a BucketState; Take and Give read a level below zero as zero (see
// refill), so a bucket that reserves must be read with the functions of this file only.

// Reservation is the outcome of one Reserve.
type Reservation struct {
	// OK is true when the tokens were taken: they are due Wait from now (0: at once).
	OK   bool
	Wait time.Duration
	// RetryAfter is 0 when OK. Otherwise it is the time until the tokens would be there at
	// once, as Take's, or math.MaxInt64 nanoseconds for a request larger than Capacity.
	RetryAfter time.Duration
	// Remaining is the whole tokens left (floor; none while the bucket owes).
	Remaining int64
	// Reset is the time until the bucket is full again.
	Reset time.Duration
}

// MaxDebt is the most a bucket that reserves with maxWait can owe, in credits: the refill over
// maxWait, at most 2^62. A stored level below -MaxDebt can only come from a larger maxWait.
func (b Bucket) MaxDebt(maxWait time.Duration) int64 {
	if maxWait <= 0 || b.creditsPerNano == 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(maxWait), uint64(b.creditsPerNano))
	if hi != 0 || lo > maxCapacityCredits {
		return maxCapacityCredits
	}
	return int64(lo)
}

// Reserve refills s to now and takes n tokens (n < 1 counts as 1) if they are there, or will be
// within maxWait: then OK, with Wait the time until they are due. Otherwise nothing is taken and
// RetryAfter says when they would be there at once. A now behind s.Last is read as s.Last, as in
// Take.
func (b Bucket) Reserve(s BucketState, now, n int64, maxWait time.Duration) (BucketState, Reservation) {
	if b.creditsPerNano == 0 {
		return s, Reservation{RetryAfter: never}
	}
	n = max(n, 1)
	s = b.refillOwing(s, now)
	if n > b.limit.Capacity {
		return s, b.reservation(false, s.Level, 0, never)
	}
	want := n * b.creditsPerToken // <= 2^62
	if s.Level >= want {
		s.Level -= want
		return s, b.reservation(true, s.Level, 0, 0)
	}
	// The level is at least -2^62 (refillOwing), so the shortfall fits in a uint64.
	short := uint64(want) + uint64(-min(s.Level, 0)) - uint64(max(s.Level, 0))
	wait := ceilDivUnsigned(short, uint64(b.creditsPerNano))
	if maxWait < 0 || wait > uint64(maxWait) {
		return s, b.reservation(false, s.Level, 0, time.Duration(min(wait, uint64(never))))
	}
	s.Level -= want // >= -2^62: short <= maxWait × rate, and MaxDebt caps that at 2^62
	return s, b.reservation(true, s.Level, time.Duration(wait), 0)
}

// Unreserve refills s to now and gives back n tokens (n < 1 counts as 1) to a bucket that may
// owe, without exceeding capacity: it undoes a Reserve whose request did not go on.
func (b Bucket) Unreserve(s BucketState, now, n int64) BucketState {
	if b.creditsPerNano == 0 {
		return s
	}
	n = min(max(n, 1), b.limit.Capacity)
	s = b.refillOwing(s, now)
	s.Level += min(n*b.creditsPerToken, b.capacityCredits-s.Level)
	return s
}

// RefillOwing brings s forward to now, as Reserve reads it: a level below zero is a debt the
// refill repays first.
func (b Bucket) RefillOwing(s BucketState, now int64) BucketState { return b.refillOwing(s, now) }

// ValidOwing reports whether s is in range for a bucket that reserves with maxWait: a level
// from -MaxDebt(maxWait) to the capacity.
func (b Bucket) ValidOwing(s BucketState, maxWait time.Duration) bool {
	return -b.MaxDebt(maxWait) <= s.Level && s.Level <= b.capacityCredits
}

// refillOwing is refill for a level that may be below zero (clamped at -2^62).
func (b Bucket) refillOwing(s BucketState, now int64) BucketState {
	level := min(max(s.Level, -maxCapacityCredits), b.capacityCredits)
	if now <= s.Last {
		return BucketState{Level: level, Last: s.Last}
	}
	elapsed := uint64(now) - uint64(s.Last)
	deficit := uint64(b.capacityCredits) + uint64(-min(level, 0)) - uint64(max(level, 0)) // <= 2^63
	hi, added := bits.Mul64(elapsed, uint64(b.creditsPerNano))
	if hi != 0 || added >= deficit {
		return BucketState{Level: b.capacityCredits, Last: now}
	}
	return BucketState{Level: int64(uint64(level) + added), Last: now}
}

func (b Bucket) reservation(ok bool, level int64, wait, retryAfter time.Duration) Reservation {
	deficit := uint64(b.capacityCredits) + uint64(-min(level, 0)) - uint64(max(level, 0))
	return Reservation{
		OK:         ok,
		Wait:       wait,
		RetryAfter: retryAfter,
		Remaining:  max(level, 0) / b.creditsPerToken,
		Reset:      time.Duration(min(ceilDivUnsigned(deficit, uint64(b.creditsPerNano)), uint64(never))),
	}
}

// ceilDivUnsigned is ⌈a/d⌉ for d >= 1.
func ceilDivUnsigned(a, d uint64) uint64 {
	q := a / d
	if q*d != a {
		q++
	}
	return q
}
