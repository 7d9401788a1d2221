// Package limiter implements three rate-limiting algorithms, a token bucket
// with continuous refill, a fixed window (also on calendar days, weeks and
// months) and a sliding window, computed in exact integer arithmetic, with
// the current time always passed in.
//
// Each algorithm is an immutable value made from a validated limit (Bucket
// from BucketLimit, FixedWindow and SlidingWindow from WindowLimit,
// CalendarWindow from CalendarLimit) and
// decides on a per-key state that the caller stores (BucketState,
// WindowState), starting from Initial: Take returns the new state and a
// Decision, Give refunds a Take that another limit overruled (and a Bucket's
// Undo one whose state others sharing the key have written since). Algorithm is
// that common shape, for callers that hold any of the three (a Bucket through
// a pointer: its methods take it by one). A state is only
// meaningful for the limiter that produced it, which Fingerprint lets a
// caller check before reusing stored state; the fingerprints of the three
// algorithms differ even for the same numbers.
//
// # Token bucket
//
// A bucket holds up to BucketLimit.Capacity tokens and gains
// BucketLimit.RefillTokens tokens every BucketLimit.RefillInterval,
// continuously rather than in steps: half an interval adds half of
// RefillTokens. A request for n tokens is admitted
// when the bucket holds at least n, and then n are taken. Starting from a
// full bucket, the tokens admitted in any window of length T therefore never
// exceed Capacity + RefillTokens×T/RefillInterval, the token bucket bound of
// RFC 1363.
//
// Tokens are counted in credits so that continuous refill stays exact. With
// g = gcd(RefillTokens, RefillInterval in nanoseconds), one token is
// RefillInterval/g credits and each nanosecond adds RefillTokens/g credits.
// Every quantity the bucket reports (Remaining, RetryAfter, Reset) is then an
// exact integer division of credits, with no floating point and no drift over
// any number of steps.
//
// A level in credits can need more than 64 bits: a capacity of 10^9 tokens
// refilled one per 366 days is 3×10^25 credits. So BucketState keeps it in
// two parts, whole Tokens and the Credits toward the next token (fewer than
// one token is worth), and the refill multiplies and divides in 128 bits
// (math/bits). Every computation is exact for any positive Capacity,
// RefillTokens and RefillInterval, whatever BucketState and times it is
// given; a duration beyond math.MaxInt64 nanoseconds (292 years) is reported
// as math.MaxInt64. Most buckets need less: when a full one's credits fit in
// 64 bits, Take and IdleAt decide a state in range in 64-bit arithmetic,
// with the same results and no call, which is what a proxy compiled to
// WebAssembly runs on each request.
//
// # Fixed and sliding windows
//
// The windows count whole units (requests, or a request's cost) in windows
// of WindowLimit.Window aligned on the time base: window k is
// [k×Window, (k+1)×Window), and WindowState.Start is the start of the current
// one, WindowState.Count the units admitted in it.
//
// A fixed window admits a request for n units when Count+n <= Capacity. Its
// count starts again at each window's start, so up to 2×Capacity units may be
// admitted across a window boundary.
//
// A sliding window also keeps WindowState.Previous, the units admitted in
// the window just before the current one, and estimates the units of the
// last Window as Previous weighted by the share of the previous window still
// inside it, plus Count: with e the time elapsed since Start, a request for n
// units is admitted when
//
//	Previous×(Window-e)/Window + Count + n <= Capacity.
//
// This is the usual two-window approximation: it assumes the previous
// window's units were spread evenly, so it admits at most 2×Capacity units in
// any interval of length Window, and at most Capacity in each aligned window.
//
// The estimate is never divided: both sides are multiplied by Window and
// compared as 128-bit integers, and RetryAfter, the exact time until the
// request would be admitted, is an integer division of them. Capacity is at
// most 1e9 and Window at most 2^61 nanoseconds, so no computation can
// overflow, whatever WindowState and times they are given.
//
// # Calendar windows
//
// CalendarWindow is a fixed window whose windows are UTC calendar days, ISO
// weeks (from Monday) or months (28 to 31 days), with the same WindowState.
// Its time base is Unix time, read from a wall clock, since calendar
// boundaries exist only there. A wall clock can be stepped: forward, the
// next window starts early; backward, the stored window keeps counting as
// described below for any time behind a state, so a step never hands out a
// window's units twice.
//
// # Time
//
// Time is an int64 count of nanoseconds on a monotonic time base chosen by
// the caller, never read from a clock here. The state of one key may be read
// and written by several workers (for example Envoy worker threads sharing a
// proxy-wasm shared-data entry), so all of them must use one shared time
// base, and passing time in also makes the limiters deterministic to test.
//
// Time never goes backwards. Whenever now is behind the time of a state (a
// BucketState's Last, a WindowState's Start), by any amount, the decision is made
// as if now were that time: a bucket refills nothing and keeps Last, a
// window stays in the window starting at Start, and every duration reported
// is counted from that time. On one monotonic time base, and with stored
// state that never outlives it, now is behind a stored time only when a
// worker read the clock before another worker stored a later decision:
// just before, or long before if the worker stalled between reading the
// clock and storing its own decision. Moving the state back to such a now
// would credit it again with time it was already credited for (a bucket
// would refill the same span twice, a window would count an older window
// afresh) and admit more than the bounds above. Read as of its stored time,
// a state's time only moves forward, so the bounds hold for the decisions
// in the order they are stored, each counted at the later of its now and
// the time of the state it was made on.
//
// The trade-off is deliberate: never admit more. A stored time in the far
// future, which only a corrupt value can hold, therefore freezes its key
// until the clock reaches it: the bucket refills nothing and the window does
// not move on. Callers validate what they decode (Fingerprint, and Valid,
// which checks levels, counts and alignment but not times) and start again
// from Initial when it fails; one whose storage can hand it a corrupt
// time must check that time against its clock itself.
//
// A WindowState whose Start is not a multiple of Window was not stored by a
// window and holds no time: it restarts empty in the window containing now,
// as does one that is neither the current nor (sliding) the previous
// window. Counts outside 0..Capacity are clamped into it, as are levels
// outside 0..capacity for a BucketState.
package limiter
