package limiter

import (
	"errors"
	"math"
	"math/bits"
	"time"
)

// maxCapacityCredits bounds the capacity in credits so that every sum and
// product in this package stays below 2^63.
const maxCapacityCredits = 1 << 62

// never is the RetryAfter of a request that no amount of waiting can admit.
const never = time.Duration(math.MaxInt64)

// fingerprintVersion is hashed first by Fingerprint; change it if the
// meaning of BucketState.Level ever changes, so stored states are discarded.
const fingerprintVersion = 1

var (
	errCapacity       = errors.New("limiter: Capacity must be at least 1")
	errRefillTokens   = errors.New("limiter: RefillTokens must be at least 1")
	errRefillInterval = errors.New("limiter: RefillInterval must be at least 1ns")
	errTooManyCredits = errors.New("limiter: Capacity * RefillInterval/gcd(RefillTokens, RefillInterval in ns) exceeds 2^62 credits; lower Capacity or use a refill rate with a smaller reduced interval")
)

// BucketLimit is the shape of one token bucket.
type BucketLimit struct {
	Capacity       int64         // tokens the bucket holds when full (burst), >= 1
	RefillTokens   int64         // tokens added per RefillInterval, >= 1
	RefillInterval time.Duration // >= 1ns
}

// Bucket is a validated BucketLimit with precomputed integer units. It is an
// immutable value, safe to copy and to share between goroutines.
//
// The zero Bucket is not valid: it admits nothing and changes no BucketState.
type Bucket struct {
	limit           BucketLimit
	creditsPerToken int64 // RefillInterval/g: one token, in credits
	creditsPerNano  int64 // RefillTokens/g: credits added per elapsed nanosecond
	capacityCredits int64 // Capacity * creditsPerToken, <= 2^62
}

// BucketState is what is persisted per key.
type BucketState struct {
	Level int64 // tokens in credits, 0..capacity in credits
	// Last is when Level was computed, in nanoseconds on the caller's
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
	RetryAfter time.Duration
	Reset      time.Duration // time until the bucket is full again after this decision (0 if full)
}

// NewBucket validates l and precomputes its units. It rejects non-positive
// fields and limits whose capacity in credits would exceed 2^62.
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
	perToken := uint64(l.RefillInterval) / g
	hi, capacityCredits := bits.Mul64(uint64(l.Capacity), perToken)
	if hi != 0 || capacityCredits > maxCapacityCredits {
		return Bucket{}, errTooManyCredits
	}
	return Bucket{
		limit:           l,
		creditsPerToken: int64(perToken),
		creditsPerNano:  int64(uint64(l.RefillTokens) / g),
		capacityCredits: int64(capacityCredits),
	}, nil
}

// BucketLimit returns the BucketLimit the bucket was made from.
func (b Bucket) Limit() BucketLimit { return b.limit }

// CreditsPerToken is the number of credits one token is worth for this
// bucket: a BucketState's Level divided by it is the tokens it holds. Callers
// use it to carry a level over to a bucket of other numbers.
func (b Bucket) CreditsPerToken() int64 { return b.creditsPerToken }

// Initial returns the state of a key never seen: a full bucket as of now.
func (b Bucket) Initial(now int64) BucketState {
	return BucketState{Level: b.capacityCredits, Last: now}
}

// Valid reports whether s.Level is within 0 and the capacity in credits.
func (b Bucket) Valid(s BucketState) bool {
	return 0 <= s.Level && s.Level <= b.capacityCredits
}

// Take refills s to now and then tries to take n tokens; n < 1 counts as 1.
// A now behind s.Last is read as s.Last: nothing is refilled, Last is kept
// and every duration is counted from it. A rejected request takes nothing
// but still returns the refilled BucketState. A request for more than Capacity
// tokens is always rejected, with RetryAfter math.MaxInt64 nanoseconds.
func (b Bucket) Take(s BucketState, now int64, n int64) (BucketState, Decision) {
	if b.creditsPerNano == 0 {
		return s, Decision{RetryAfter: never}
	}
	if n < 1 {
		n = 1
	}
	s = b.refill(s, now)
	if n > b.limit.Capacity {
		return s, b.decision(false, s.Level, never)
	}
	want := n * b.creditsPerToken // <= capacityCredits: cannot overflow
	if s.Level >= want {
		s.Level -= want
		return s, b.decision(true, s.Level, 0)
	}
	wait := ceilDiv(want-s.Level, b.creditsPerNano)
	return s, b.decision(false, s.Level, time.Duration(wait))
}

// Give refills s to now (a now behind s.Last is read as s.Last, as in Take)
// and then returns n tokens to it, without exceeding capacity. It undoes a
// Take that another limit overruled; n < 1 counts as 1, as in Take, so
// Give(n) undoes Take(n) for every n.
func (b Bucket) Give(s BucketState, now int64, n int64) BucketState {
	if b.creditsPerNano == 0 {
		return s
	}
	if n < 1 {
		n = 1
	}
	if n > b.limit.Capacity {
		n = b.limit.Capacity // keeps n*creditsPerToken in range
	}
	s = b.refill(s, now)
	// Compare against the room left rather than summing first: both terms
	// may be near 2^62, and their sum would not fit in an int64.
	s.Level += min(n*b.creditsPerToken, b.capacityCredits-s.Level)
	return s
}

// Fingerprint is a stable hash of the BucketLimit's Capacity, RefillTokens and
// RefillInterval. A stored BucketState should only be reused by a Bucket with the
// same fingerprint; otherwise start from Initial.
func (b Bucket) Fingerprint() uint32 {
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

// Refill brings s forward to now without taking anything: the level a Take at now would start
// from. Callers that give back a fraction of a token (in credits, see CreditsPerToken) add it
// to this state's Level, up to the capacity in credits.
func (b Bucket) Refill(s BucketState, now int64) BucketState { return b.refill(s, now) }

// refill clamps s.Level into range and brings s forward to now. Time never
// goes backwards (see the package documentation): a now behind s.Last, by
// any amount, is read as s.Last, so nothing is refilled and Last is kept.
func (b Bucket) refill(s BucketState, now int64) BucketState {
	level := min(max(s.Level, 0), b.capacityCredits)
	if now <= s.Last {
		return BucketState{Level: level, Last: s.Last}
	}
	elapsed := uint64(now) - uint64(s.Last) // may exceed math.MaxInt64
	// Decide "full" by time before multiplying, so elapsed*creditsPerNano
	// is only computed when it is below the deficit and cannot overflow.
	toFull := ceilDiv(b.capacityCredits-level, b.creditsPerNano)
	if elapsed >= uint64(toFull) {
		return BucketState{Level: b.capacityCredits, Last: now}
	}
	return BucketState{Level: level + int64(elapsed)*b.creditsPerNano, Last: now}
}

// decision reports level (in credits, after the decision) as a Decision.
func (b Bucket) decision(allowed bool, level int64, retryAfter time.Duration) Decision {
	return Decision{
		Allowed:    allowed,
		Remaining:  level / b.creditsPerToken,
		RetryAfter: retryAfter,
		Reset:      time.Duration(ceilDiv(b.capacityCredits-level, b.creditsPerNano)),
	}
}

// ceilDiv returns ⌈a/d⌉ for a >= 0 and d >= 1 without computing a+d-1,
// which could overflow.
func ceilDiv(a, d int64) int64 {
	q := a / d
	if q*d != a {
		q++
	}
	return q
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
