package config

import (
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// Long quotas: refill_interval and window take days and weeks up to maxQuotaDuration, and a
// fixed window may follow the UTC calendar instead of a length.

// Calendar aligns a fixed window on UTC calendar boundaries (read from the host's wall clock)
// instead of giving it a length.
type Calendar uint8

const (
	// NoCalendar: the window has a length (Limit.Window), aligned on the monotonic clock.
	NoCalendar Calendar = iota
	// CalendarDay: each UTC day, from 00:00.
	CalendarDay
	// CalendarWeek: each ISO week, from Monday 00:00 UTC.
	CalendarWeek
	// CalendarMonth: each UTC calendar month, from the 1st at 00:00.
	CalendarMonth
)

var calendarNames = [...]string{NoCalendar: "", CalendarDay: "day", CalendarWeek: "week", CalendarMonth: "month"}

// String returns the spelling used in the JSON configuration ("" for NoCalendar).
func (c Calendar) String() string {
	if c == NoCalendar {
		return ""
	}
	return enumString(calendarNames[:], int(c), "Calendar")
}

const (
	// maxQuotaDuration bounds refill_interval and window: a year, leap or not.
	maxQuotaDuration = 366 * 24 * duration.Hour
	day              = 24 * duration.Hour

	notADuration = "not a duration"
	calendarRule = `calendar is "day", "week" (from Monday) or "month": UTC calendar windows, ` +
		`read from the wall clock, for "algorithm": "fixed_window" only and instead of window`
)

// quotaDurations are refill_interval's and window's: from 1ms to 366d, in the units ms, s, m and
// h plus whole days ("d") and weeks ("w"), e.g. "7d", "1w", "1d12h".
var quotaDurations = durationBounds{parseQuotaDuration, minDuration, maxQuotaDuration, "1ms", `"366d"`,
	`quote the duration and give it a unit, e.g. "1s" or "500ms"`}

// parseQuotaDuration parses a Go duration in which whole numbers of days ("d", 24h) and weeks
// ("w", 7d) may also appear: "7d", "1w", "2w3d", "1d12h". Anything else goes to parseDuration
// (time.ParseDuration's syntax, with the units ms, s, m and h). problem is empty when text parses; a duration far above the
// quota range parses as a value above it.
func parseQuotaDuration(text string) (d duration.Duration, problem string) {
	if !hasDayOrWeekUnit(text) {
		d, problem := parseDuration(text)
		if problem == durationUnits {
			problem = quotaUnits
		}
		return d, problem
	}
	var rest strings.Builder
	var days int64
	for s := text; s != ""; {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == '-' || s[i] == '+') {
			i++
		}
		j := i
		for j < len(s) && (s[j] < '0' || s[j] > '9') && s[j] != '.' && s[j] != '-' && s[j] != '+' {
			j++
		}
		number, unit := s[:i], s[i:j]
		s = s[j:]
		if unit != "d" && unit != "w" {
			rest.WriteString(number + unit)
			continue
		}
		n, err := strconv.ParseInt(number, 10, 64)
		switch {
		case err != nil && strings.ContainsRune(number, '.'):
			return 0, "days and weeks are whole numbers: write \"36h\" rather than \"1.5d\""
		case err != nil || n < 0 || number[0] == '+' || number[0] == '-':
			return 0, "want a whole number of days or weeks before d or w, e.g. \"7d\" or \"1w\""
		}
		if unit == "w" {
			n = min(n, 1<<40) * 7
		}
		days = min(days+min(n, 1<<40), 1<<40)
	}
	if rest.Len() > 0 {
		var problem string
		if d, problem = parseDuration(rest.String()); problem != "" || d < 0 {
			return 0, "want whole days (d) and weeks (w) followed by the units ms, s, m and h"
		}
	}
	if days > int64(maxQuotaDuration/day)+1 || d > maxQuotaDuration {
		return maxQuotaDuration + day, "" // only "longer than 366d" is left to say
	}
	return d + duration.Duration(days)*day, ""
}

// hasDayOrWeekUnit reports whether text has a d or w where a unit goes: first, or after a number
// ("7d", "1.5w", "d"). Only then is it read, and refused, as days and weeks: "1 second" is just
// not a duration.
func hasDayOrWeekUnit(text string) bool {
	for i := 0; i < len(text); i++ {
		if text[i] != 'd' && text[i] != 'w' {
			continue
		}
		if i == 0 || text[i-1] >= '0' && text[i-1] <= '9' || text[i-1] == '.' || text[i-1] == '-' || text[i-1] == '+' {
			return true
		}
	}
	return false
}

// calendar reads a fixed window's calendar and reports it given together with window.
func (v *validator) calendar(path string, value *jsonValue, limit *Limit) {
	index, ok := v.enum(fieldPath(path, "calendar"), value, calendarNames[1:], "a calendar", calendarRule)
	if !ok {
		return
	}
	limit.Calendar = Calendar(index + 1)
}
