package limiter

import (
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// Narrow buckets. Most buckets are narrow: a full one holds Capacity×CreditsPerToken credits,
// below 2^64. On a state in range, the level and everything missing from it are then 64-bit
// numbers, so Take and IdleAt decide with unsigned 64-bit multiplications and a division or
// two, where the general code multiplies and divides in 128 bits. This is the request path of a
// proxy built for WebAssembly, where every call and every 128-bit division (a call) is costly:
// the functions here are small enough to be inlined, and call nothing. They return exactly what
// the general code returns (TestNarrowAndWideMatchReference). Take's narrow case is written in
// Take itself.

// narrow reports whether the bucket is narrow (the zero Bucket is not): NewBucket found its full
// credits below 2^64.
func (b *Bucket) narrow() bool { return b.fullCredits != 0 }

// missingNarrow is the credits a state in range of a narrow bucket misses to be full.
func (b *Bucket) missingNarrow(s BucketState) uint64 {
	return b.fullCredits - uint64(s.Tokens)*uint64(b.creditsPerToken) - uint64(s.Credits)
}

// fillNarrow is the time, in nanoseconds, until a state in range of a narrow bucket is full: 0
// when it is. The credits missing are below 2^64, and so is the time to refill them.
func (b *Bucket) fillNarrow(s BucketState) uint64 {
	return ceilDiv64(b.missingNarrow(s), uint64(b.creditsPerNano))
}

// waitNarrow is wait for a narrow bucket: 0 <= credits < one token, 1 <= tokens <= Capacity, so
// tokens×CreditsPerToken fits in 64 bits.
func (b *Bucket) waitNarrow(tokens, credits int64) duration.Duration {
	return saturated(ceilDiv64(uint64(tokens)*uint64(b.creditsPerToken)-uint64(credits), uint64(b.creditsPerNano)))
}

// idleAtNarrow is IdleAt for a narrow bucket and a state in range.
func (b *Bucket) idleAtNarrow(s BucketState) int64 { return after(s.Last, b.fillNarrow(s)) }

// ceilDiv64 is ⌈a/d⌉ for d >= 1.
func ceilDiv64(a, d uint64) uint64 {
	q := a / d
	if q*d != a {
		q++
	}
	return q
}
