package limiter

import (
	"errors"
	"math"
	"math/bits"

	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// maxWindowCapacity bounds WindowLimit.Capacity.
const maxWindowCapacity = 1_000_000_000

// maxWindow bounds WindowLimit.Window (about 73 years) so that every
// duration reported, at most two windows, stays below 2^63 nanoseconds.
const maxWindow = 1 << 61

// Fingerprint tags, hashed first: each names an algorithm and the meaning of
// its stored state, and differs from Bucket's fingerprintVersion. Change a
// tag if the meaning of WindowState ever changes for its algorithm, so
// stored states are discarded.
const (
	fixedWindowTag   = 'F'
	slidingWindowTag = 'S'
)

var (
	errWindowCapacity = errors.New("limiter: window Capacity must be between 1 and 1e9")
	errWindow         = errors.New("limiter: Window must be between 1ns and 2^61ns")
)

// WindowLimit is the shape of a fixed or sliding window.
type WindowLimit struct {
	Capacity int64             // units admitted per window, 1..1e9
	Window   duration.Duration // window length, 1ns..2^61ns
}

// FixedWindow admits up to Capacity units in each window of the time base
// (see the package documentation). It is an immutable value, safe to copy
// and to share between goroutines.
//
// The zero FixedWindow is not valid: it admits nothing, changes no
// WindowState and finds none Valid.
type FixedWindow struct {
	limit WindowLimit
}

// SlidingWindow admits a request when the current window's count plus the
// previous window's count, weighted by the share of it still inside the last
// Window, leaves room for it (see the package documentation). It is an
// immutable value, safe to copy and to share between goroutines.
//
// The zero SlidingWindow is not valid: it admits nothing, changes no
// WindowState and finds none Valid.
type SlidingWindow struct {
	limit WindowLimit
}

// WindowState is what is persisted per key for both window algorithms.
type WindowState struct {
	// Start is the start of the current window, in nanoseconds on the
	// caller's monotonic time base (a multiple of Window). It never
	// decreases: a Take or Give at an earlier now is made as of Start.
	Start int64
	Count int64 // units admitted in the window starting at Start
	// Previous is the units admitted in the window before it (sliding only;
	// 0 when that window was not the immediately preceding one).
	Previous int64
}

// NewFixedWindow validates l: Capacity 1..1e9, Window 1ns..2^61ns.
func NewFixedWindow(l WindowLimit) (FixedWindow, error) {
	if err := l.validate(); err != nil {
		return FixedWindow{}, err
	}
	return FixedWindow{limit: l}, nil
}

// NewSlidingWindow validates l: Capacity 1..1e9, Window 1ns..2^61ns.
func NewSlidingWindow(l WindowLimit) (SlidingWindow, error) {
	if err := l.validate(); err != nil {
		return SlidingWindow{}, err
	}
	return SlidingWindow{limit: l}, nil
}

// Limit returns the WindowLimit the window was made from.
func (w FixedWindow) Limit() WindowLimit { return w.limit }

// Initial returns the state of a key never seen: the window containing now,
// nothing counted.
func (w FixedWindow) Initial(now int64) WindowState { return w.limit.empty(now) }

// Valid reports whether s could have been stored by w: Start is a multiple
// of Window, Count is within 0 and Capacity, and Previous is 0.
func (w FixedWindow) Valid(s WindowState) bool { return w.limit.valid(s, 0) }

// Fingerprint is a stable hash of the algorithm, Capacity and Window. A
// stored WindowState should only be reused by a limiter with the same
// fingerprint; otherwise start from Initial.
func (w FixedWindow) Fingerprint() uint32 { return w.limit.fingerprint(fixedWindowTag) }

// Take brings s to the window containing now and then tries to count n
// units in it; n < 1 counts as 1. A now behind s.Start is read as s.Start:
// s stays in its window and every duration is counted from Start. The
// request is admitted when Count+n is at most Capacity. A rejected request counts nothing but still returns the
// advanced WindowState; it may retry when the window ends. A request for
// more than Capacity units is always rejected, with RetryAfter
// math.MaxInt64 nanoseconds.
//
// Remaining is Capacity-Count after the decision, and Reset the time until
// the window ends if Count > 0, else 0.
func (w FixedWindow) Take(s WindowState, now int64, n int64) (WindowState, Decision) {
	return w.limit.take(s, now, n, false)
}

// Give brings s to the window containing now, as Take does, and then, if s
// was already in that window, uncounts n units from it, not below 0; n < 1
// counts as 1. A refund for an older window is dropped: that window no
// longer counts. A now behind s.Start is read as s.Start, so the refund is
// uncounted from Start's window.
func (w FixedWindow) Give(s WindowState, now int64, n int64) WindowState {
	return w.limit.give(s, now, n, false)
}

// Limit returns the WindowLimit the window was made from.
func (w SlidingWindow) Limit() WindowLimit { return w.limit }

// Initial returns the state of a key never seen: the window containing now,
// nothing counted.
func (w SlidingWindow) Initial(now int64) WindowState { return w.limit.empty(now) }

// Valid reports whether s could have been stored by w: Start is a multiple
// of Window, and Count and Previous are within 0 and Capacity.
func (w SlidingWindow) Valid(s WindowState) bool { return w.limit.valid(s, w.limit.Capacity) }

// Fingerprint is a stable hash of the algorithm, Capacity and Window. A
// stored WindowState should only be reused by a limiter with the same
// fingerprint; otherwise start from Initial.
func (w SlidingWindow) Fingerprint() uint32 { return w.limit.fingerprint(slidingWindowTag) }

// Take brings s to the window containing now and then tries to count n
// units in it; n < 1 counts as 1. A now behind s.Start is read as s.Start,
// as in FixedWindow.Take. With e the time elapsed since Start and W the
// Window, the request is admitted when
//
//	Previous×(W-e)/W + Count + n <= Capacity,
//
// compared exactly. A rejected request counts nothing but still returns the
// advanced WindowState, with the exact time until it would be admitted if
// nothing else happened. A request for more than Capacity units is always
// rejected, with RetryAfter math.MaxInt64 nanoseconds.
//
// Remaining is the whole units the estimate leaves after the decision, and
// Reset the time until the estimate is 0: the end of the next window if
// Count > 0, else the end of this one if Previous > 0, else 0.
func (w SlidingWindow) Take(s WindowState, now int64, n int64) (WindowState, Decision) {
	return w.limit.take(s, now, n, true)
}

// Give brings s to the window containing now, as Take does, and then, if s
// was already in that window, uncounts n units from it, not below 0; n < 1
// counts as 1. A refund for an older window is dropped, even when that
// window is now Previous: the refund would otherwise land on whatever the
// current window counted. A now behind s.Start is read as s.Start, so the
// refund is uncounted from Start's window.
func (w SlidingWindow) Give(s WindowState, now int64, n int64) WindowState {
	return w.limit.give(s, now, n, true)
}

// take is Take of a fixed window or, if sliding, of a sliding one: both
// bring s to the window containing now, then decide as their documentation
// says. The sliding decision is written here in line and the fixed one is
// small enough to be inlined, so a Take through the Algorithm interface
// makes no more calls than when each type had its own.
func (l WindowLimit) take(s WindowState, now int64, n int64, sliding bool) (WindowState, Decision) {
	if l.Window < 1 {
		return s, Decision{RetryAfter: never}
	}
	n = max(n, 1)
	s, elapsed := l.advance(s, now, sliding)
	if !sliding {
		return l.fixedDecision(s, elapsed, n)
	}
	window := uint64(l.Window)
	left := window - uint64(elapsed) // W-e: time until the window ends, 1..W
	// Previous×(W-e), the previous window's weighted units times W. It and
	// the other products below are under 2^30 × 2^61: 128-bit products.
	prevHi, prevLo := bits.Mul64(uint64(s.Previous), left)
	d := Decision{}
	if n > l.Capacity {
		d.RetryAfter = never
	} else {
		// Admit when Previous×(W-e) <= (Capacity-Count-n)×W.
		room := l.Capacity - s.Count - n // may be negative: n <= Capacity
		if room >= 0 {
			roomHi, roomLo := bits.Mul64(uint64(room), window)
			if !less128(roomHi, roomLo, prevHi, prevLo) {
				s.Count += n
				d.Allowed = true
			} else {
				// Within this window, at the first e' with
				// Previous×(W-e') <= room×W, that is
				// W-e' <= ⌊room×W/Previous⌋. Rejection means
				// room×W < Previous×(W-e), so Previous > 0 and
				// the quotient is below W-e: 0 < wait <= W-e.
				q, _ := bits.Div64(roomHi, roomLo, uint64(s.Previous))
				d.RetryAfter = duration.Duration(left - q)
			}
		} else {
			// Count+n > Capacity: only in the next window, where
			// Previous' = Count, at the first e'' with
			// Count×(W-e'') <= (Capacity-n)×W, that is
			// W-e'' <= ⌊(Capacity-n)×W/Count⌋. Here
			// Capacity-n < Count, so the quotient is below W; when it
			// is 0 the request waits for the window after, when
			// everything has expired.
			hi, lo := bits.Mul64(uint64(l.Capacity-n), window)
			q, _ := bits.Div64(hi, lo, uint64(s.Count))
			d.RetryAfter = duration.Duration(left + window - q)
		}
	}
	// Remaining = ⌊Capacity - Count - Previous×(W-e)/W⌋
	//           = Capacity - Count - ⌈Previous×(W-e)/W⌉.
	// The quotient is at most Previous, so the division cannot overflow.
	weighted, rem := bits.Div64(prevHi, prevLo, window)
	if rem != 0 {
		weighted++
	}
	d.Remaining = max(l.Capacity-s.Count-int64(weighted), 0)
	switch {
	case s.Count > 0:
		d.Reset = duration.Duration(left + window)
	case s.Previous > 0:
		d.Reset = duration.Duration(left)
	}
	return s, d
}

// fixedDecision is a fixed window's decision on n units, s having been
// brought to the window containing now, elapsed into it.
func (l WindowLimit) fixedDecision(s WindowState, elapsed, n int64) (WindowState, Decision) {
	left := int64(l.Window) - elapsed // time until the window ends, 1..Window
	d := Decision{}
	switch {
	case n > l.Capacity:
		d.RetryAfter = never
	case s.Count <= l.Capacity-n:
		s.Count += n
		d.Allowed = true
	default:
		d.RetryAfter = duration.Duration(left)
	}
	d.Remaining = l.Capacity - s.Count
	if s.Count > 0 {
		d.Reset = duration.Duration(left)
	}
	return s, d
}

func (l WindowLimit) validate() error {
	if l.Capacity < 1 || l.Capacity > maxWindowCapacity {
		return errWindowCapacity
	}
	if l.Window < 1 || l.Window > maxWindow {
		return errWindow
	}
	return nil
}

// windowAt returns the start of the window containing now, ⌊now/W⌋×W, and
// the time elapsed since it, 0..W-1. The lowest window, whose start would be
// below math.MinInt64, is not representable: a now inside it is read as the
// start of the next window (elapsed 0), which can only admit less.
func (l WindowLimit) windowAt(now int64) (start, elapsed int64) {
	w := int64(l.Window)
	r := now % w
	if r < 0 {
		r += w
	}
	if now < math.MinInt64+r { // now-r would be below math.MinInt64
		return now + (w - r), 0
	}
	return now - r, r
}

func (l WindowLimit) empty(now int64) WindowState {
	if l.Window < 1 {
		return WindowState{Start: now}
	}
	start, _ := l.windowAt(now)
	return WindowState{Start: start}
}

// valid checks s against the limit; maxPrevious is 0 for a fixed window.
func (l WindowLimit) valid(s WindowState, maxPrevious int64) bool {
	if l.Window < 1 {
		return false
	}
	return s.Start%int64(l.Window) == 0 &&
		0 <= s.Count && s.Count <= l.Capacity &&
		0 <= s.Previous && s.Previous <= maxPrevious
}

// advance clamps the counts of s into [0, Capacity] and brings s to the
// window containing now. Time never goes backwards (see the package
// documentation): when now is behind an aligned Start, by any amount, it is
// read as Start, and s stays in its window. It returns the time elapsed
// since the returned Start: 0 when now is read as Start.
func (l WindowLimit) advance(s WindowState, now int64, sliding bool) (WindowState, int64) {
	count := min(max(s.Count, 0), l.Capacity)
	previous := int64(0)
	if sliding {
		previous = min(max(s.Previous, 0), l.Capacity)
	}
	start, elapsed := l.windowAt(now)
	switch {
	case s.Start == start:
		return WindowState{Start: start, Count: count, Previous: previous}, elapsed
	case s.Start > start && s.Start%int64(l.Window) == 0:
		// An aligned Start beyond the window of now is ahead of now:
		// another worker stored a later decision after this one read
		// its clock. Decide as of Start.
		return WindowState{Start: s.Start, Count: count, Previous: previous}, 0
	case sliding && uint64(start)-uint64(s.Start) == uint64(l.Window):
		return WindowState{Start: start, Previous: count}, elapsed
	}
	// An older window, or a Start no limiter stores (not a multiple of
	// Window): nothing of s counts in the window of now.
	return WindowState{Start: start}, elapsed
}

func (l WindowLimit) give(s WindowState, now int64, n int64, sliding bool) WindowState {
	if l.Window < 1 {
		return s
	}
	// A state advanced into a new window has counted nothing there, so a
	// refund for an older window is dropped. So is a refund whose now lies in
	// an earlier window than the stored one: another worker has moved the
	// state on since the units were counted, and they are not in its Count.
	// Count >= 0 and n <= math.MaxInt64: the difference cannot overflow.
	maxPrevious := int64(0)
	if sliding {
		maxPrevious = l.Capacity
	}
	if start, _ := l.windowAt(now); start < s.Start && l.valid(s, maxPrevious) {
		return s
	}
	s, _ = l.advance(s, now, sliding)
	s.Count = max(s.Count-max(n, 1), 0)
	return s
}

// fingerprint is 32-bit FNV-1a over the tag byte and then Capacity and
// Window as 8-byte little-endian integers, as Bucket.Fingerprint.
func (l WindowLimit) fingerprint(tag byte) uint32 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	h = (h ^ uint32(tag)) * prime
	fields := [2]uint64{uint64(l.Capacity), uint64(l.Window)}
	for _, v := range fields {
		for shift := 0; shift < 64; shift += 8 {
			h = (h ^ uint32(byte(v>>shift))) * prime
		}
	}
	return h
}

// less128 reports whether the 128-bit a is below the 128-bit b.
func less128(aHi, aLo, bHi, bLo uint64) bool {
	return aHi < bHi || aHi == bHi && aLo < bLo
}
