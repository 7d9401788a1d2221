package limiter

import (
	"errors"
	"math"

	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// CalendarUnit is the length of a CalendarWindow's windows: a UTC calendar day, week or month.
type CalendarUnit uint8

const (
	// Day windows start at 00:00 UTC.
	Day CalendarUnit = iota + 1
	// Week windows start on Monday at 00:00 UTC (ISO 8601 weeks).
	Week
	// Month windows start on the 1st at 00:00 UTC and last 28 to 31 days.
	Month
)

// calendarWindowTag is CalendarWindow's fingerprint tag (see fixedWindowTag).
const calendarWindowTag = 'C'

const nanosPerDay = int64(24 * duration.Hour)

var errCalendar = errors.New("limiter: calendar Capacity must be between 1 and 1e9 and Unit one of Day, Week and Month")

// CalendarLimit is the shape of a calendar window.
type CalendarLimit struct {
	Capacity int64 // units admitted per window, 1..1e9
	Unit     CalendarUnit
}

// CalendarWindow is a fixed window whose windows are UTC calendar days, ISO weeks (from Monday)
// or months, on a time base of Unix time: now is nanoseconds since 1970-01-01 00:00 UTC, read
// from a wall clock (leap seconds are not counted, as in Unix time). It admits up to Capacity
// units per window, like FixedWindow, with the same WindowState: Start is the start of the
// window, Count the units admitted in it, Previous is 0.
//
// A wall clock can be stepped. Forward, a window is left early: the next one starts at once,
// with nothing counted. Backward, into an earlier window, Take and Give keep counting into the
// stored window as if now were its Start (as every limiter here does with a now behind its
// state): a step back never opens a window again, so it never hands out more units; the
// stored window lasts until the clock has passed its end again.
//
// The zero CalendarWindow is not valid: it admits nothing, changes no WindowState and finds
// none Valid.
type CalendarWindow struct {
	limit CalendarLimit
}

// NewCalendarWindow validates l: Capacity 1..1e9, Unit Day, Week or Month.
func NewCalendarWindow(l CalendarLimit) (CalendarWindow, error) {
	if l.Capacity < 1 || l.Capacity > maxWindowCapacity || l.Unit < Day || l.Unit > Month {
		return CalendarWindow{}, errCalendar
	}
	return CalendarWindow{limit: l}, nil
}

// Limit returns the CalendarLimit the window was made from.
func (w CalendarWindow) Limit() CalendarLimit { return w.limit }

// Bounds returns the window containing now: its start (<= now) and its end (> now), in
// nanoseconds of Unix time. An end beyond the int64 range (after the year 2262) is
// math.MaxInt64. The window containing math.MinInt64 (in 1677), whose start is below the int64
// range, is not representable: now is then read as the start of the next window, as
// WindowLimit does, which can only admit less.
func (w CalendarWindow) Bounds(now int64) (start, end int64) {
	first, next := w.dayBounds(floorDivide(now, nanosPerDay))
	if first < math.MinInt64/nanosPerDay {
		// Only the first representable window; its successor starts on a day in range.
		first, next = w.dayBounds(next)
	}
	start = first * nanosPerDay
	if next > math.MaxInt64/nanosPerDay {
		return start, math.MaxInt64
	}
	return start, next * nanosPerDay
}

// dayBounds returns the window containing a day (days since 1970-01-01): its first day and the
// first day of the next window.
func (w CalendarWindow) dayBounds(day int64) (first, next int64) {
	switch w.limit.Unit {
	case Day:
		return day, day + 1
	case Week:
		// 1970-01-01 was a Thursday: Mondays are the days d with (d+3) mod 7 = 0.
		first = day - floorMod(day+3, 7)
		return first, first + 7
	default:
		year, month, dayOfMonth := civilDate(day)
		first = day - (dayOfMonth - 1)
		return first, first + daysInMonth(year, month)
	}
}

// civilDate is the date of a day (days since 1970-01-01) in the proleptic Gregorian calendar,
// computed here rather than with package time, which the module does not link. It counts in
// 400-year eras of 146,097 days from 0000-03-01, so that the leap day ends a year.
func civilDate(day int64) (year, month, dayOfMonth int64) {
	const daysPerEra = 146097
	shifted := day + 719468 // days from 0000-03-01 to 1970-01-01
	era := floorDivide(shifted, daysPerEra)
	dayOfEra := shifted - era*daysPerEra                                             // 0..146096
	yearOfEra := (dayOfEra - dayOfEra/1460 + dayOfEra/36524 - dayOfEra/146096) / 365 // 0..399
	dayOfYear := dayOfEra - (365*yearOfEra + yearOfEra/4 - yearOfEra/100)            // 0..365, from March 1
	monthFromMarch := (5*dayOfYear + 2) / 153                                        // 0..11
	dayOfMonth = dayOfYear - (153*monthFromMarch+2)/5 + 1                            // 1..31
	month = monthFromMarch + 3
	if month > 12 {
		month -= 12
	}
	year = yearOfEra + era*400
	if month <= 2 {
		year++
	}
	return year, month, dayOfMonth
}

// daysInMonth is the length of a month (1..12) of a year of the Gregorian calendar.
func daysInMonth(year, month int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// Initial returns the state of a key never seen: the window containing now, nothing counted.
func (w CalendarWindow) Initial(now int64) WindowState {
	if w.limit.Unit == 0 {
		return WindowState{Start: now}
	}
	start, _ := w.Bounds(now)
	return WindowState{Start: start}
}

// Valid reports whether s could have been stored by w: Start is the start of a window, Count is
// within 0 and Capacity, and Previous is 0.
func (w CalendarWindow) Valid(s WindowState) bool {
	if w.limit.Unit == 0 {
		return false
	}
	start, _ := w.Bounds(s.Start)
	return start == s.Start && 0 <= s.Count && s.Count <= w.limit.Capacity && s.Previous == 0
}

// Fingerprint is a stable hash of the algorithm, Capacity and Unit. A stored WindowState
// should only be reused by a limiter with the same fingerprint; otherwise start from Initial.
func (w CalendarWindow) Fingerprint() uint32 {
	return WindowLimit{Capacity: w.limit.Capacity, Window: duration.Duration(w.limit.Unit)}.fingerprint(calendarWindowTag)
}

// Take brings s to the window containing now and then tries to count n units in it; n < 1
// counts as 1. A now behind s.Start (a wall clock stepped back) is read as s.Start: s stays in
// its window and every duration is counted from Start. The request is admitted when Count+n is
// at most Capacity. A rejected request counts nothing but still returns the advanced
// WindowState; it may retry when the window ends. A request for more than Capacity units is
// always rejected, with RetryAfter math.MaxInt64 nanoseconds.
//
// Remaining is Capacity-Count after the decision, and Reset the time until the window ends if
// Count > 0, else 0.
func (w CalendarWindow) Take(s WindowState, now int64, n int64) (WindowState, Decision) {
	if w.limit.Unit == 0 {
		return s, Decision{RetryAfter: never}
	}
	n = max(n, 1)
	s, now, end := w.advance(s, now)
	left := duration.Duration(end - now) // time until the window ends, >= 1
	d := Decision{}
	switch {
	case n > w.limit.Capacity:
		d.RetryAfter = never
	case s.Count <= w.limit.Capacity-n:
		s.Count += n
		d.Allowed = true
	default:
		d.RetryAfter = left
	}
	d.Remaining = w.limit.Capacity - s.Count
	if s.Count > 0 {
		d.Reset = left
	}
	return s, d
}

// Give brings s to the window containing now, as Take does, and then, if s was already in that
// window, uncounts n units from it, not below 0; n < 1 counts as 1. A refund for an older window
// is dropped: that window no longer counts. So is one whose now lies in a window before the
// stored one (a clock stepped back, or another worker that moved the state on since): the units
// may not be in its Count, and dropping errs towards admitting less.
func (w CalendarWindow) Give(s WindowState, now int64, n int64) WindowState {
	if w.limit.Unit == 0 {
		return s
	}
	if start, _ := w.Bounds(now); start < s.Start && w.Valid(s) {
		// Counted in a window that has since moved on past now's: not in its Count.
		return s
	}
	s, _, _ = w.advance(s, now)
	s.Count = max(s.Count-max(n, 1), 0)
	return s
}

// advance clamps the count of s into [0, Capacity] and brings s to the window containing now,
// or keeps it in its own window when that starts after now's (read as of Start). It returns the
// state, the now it is decided at (Start when behind it) and the end of the state's window.
func (w CalendarWindow) advance(s WindowState, now int64) (WindowState, int64, int64) {
	count := min(max(s.Count, 0), w.limit.Capacity)
	start, end := w.Bounds(now)
	switch {
	case s.Start == start:
		return WindowState{Start: start, Count: count}, max(now, start), end
	case s.Start > start:
		if own, ownEnd := w.Bounds(s.Start); own == s.Start {
			// A window ahead of now's: the clock was stepped back, or another worker stored
			// a later decision after this one read its clock. Decide as of Start.
			return WindowState{Start: s.Start, Count: count}, s.Start, ownEnd
		}
	}
	// An older window, or a Start no limiter stores: nothing of s counts in now's window.
	return WindowState{Start: start}, max(now, start), end
}

// floorDivide is ⌊a/b⌋ for b > 0.
func floorDivide(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// floorMod is a mod b in 0..b-1 for b > 0.
func floorMod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}

var _ Algorithm[WindowState] = CalendarWindow{}
