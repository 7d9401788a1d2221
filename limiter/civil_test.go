package limiter

import (
	"math"
	"testing"
	"time"
)

// civilDate and daysInMonth, which months' bounds use instead of package time, give package
// time's dates: every day of four centuries around 1970 and around 2000 (leap years of each
// kind), and days spread over the whole range a Unix time in int64 nanoseconds can name.
func TestCivilDateMatchesPackageTime(t *testing.T) {
	check := func(day int64) {
		t.Helper()
		date := time.Unix(day*86400, 0).UTC()
		year, month, dayOfMonth := civilDate(day)
		if year != int64(date.Year()) || month != int64(date.Month()) || dayOfMonth != int64(date.Day()) {
			t.Fatalf("day %d: civilDate %d-%d-%d, package time %s", day, year, month, dayOfMonth, date.Format(time.DateOnly))
		}
		nextMonth := time.Date(date.Year(), date.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		thisMonth := time.Date(date.Year(), date.Month(), 1, 0, 0, 0, 0, time.UTC)
		if got, want := daysInMonth(year, month), int64(nextMonth.Sub(thisMonth)/(24*time.Hour)); got != want {
			t.Fatalf("%s: daysInMonth %d, package time %d", date.Format(time.DateOnly), got, want)
		}
	}
	for _, start := range []int64{-146097 * 2, 10957 - 146097} { // from 1570 and from 1600
		for day := start; day < start+146097*2; day++ {
			check(day)
		}
	}
	for day := math.MinInt64 / nanosPerDay; day <= math.MaxInt64/nanosPerDay; day += 997 {
		check(day)
	}
	check(math.MinInt64/nanosPerDay - 1)
	check(math.MaxInt64 / nanosPerDay)
}
