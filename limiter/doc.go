// Package limiter is a token bucket with continuous refill, computed in
// exact integer arithmetic, with the current time always passed in.
//
// # Model
//
// A bucket holds up to Limit.Capacity tokens and gains Limit.RefillTokens
// tokens every Limit.RefillInterval, continuously rather than in steps: half
// an interval adds half of RefillTokens. A request for n tokens is admitted
// when the bucket holds at least n, and then n are taken. Starting from a
// full bucket, the tokens admitted in any window of length T therefore never
// exceed Capacity + RefillTokens×T/RefillInterval, the token bucket bound of
// RFC 1363.
//
// # Units
//
// Tokens are counted in credits so that continuous refill stays exact. With
// g = gcd(RefillTokens, RefillInterval in nanoseconds), one token is
// RefillInterval/g credits and each nanosecond adds RefillTokens/g credits.
// Every quantity the bucket reports (Remaining, RetryAfter, Reset) is then an
// exact integer division of credits, with no floating point and no drift over
// any number of steps. State.Level is stored in credits; a State is only
// meaningful for the Bucket that produced it, which Bucket.Fingerprint lets a
// caller check before reusing stored state.
//
// NewBucket rejects limits whose capacity in credits exceeds 2^62, so no
// computation in this package can overflow, whatever State and times it is
// given.
//
// # Time
//
// Time is an int64 count of nanoseconds on a monotonic time base chosen by
// the caller, never read from a clock here. The state of one key may be read
// and written by several workers (for example Envoy worker threads sharing a
// proxy-wasm shared-data entry), so all of them must use one shared time
// base, and passing time in also makes the bucket deterministic to test.
//
// Clock-step rule: a worker may read the clock slightly before another
// worker wrote its later timestamp, so a State whose Last is ahead of now by
// at most MaxClockSkew is treated as if now were Last: nothing is refilled
// and Last is kept. This can only admit less, never more. If Last is ahead by
// more than MaxClockSkew, the time base itself has changed (for example a
// process restart), and the State is rebased to now without any refill.
package limiter
