package limiter_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

func utc(year int, month time.Month, day, hour int) int64 {
	return time.Date(year, month, day, hour, 0, 0, 0, time.UTC).UnixNano()
}

func mustCalendar(t testing.TB, capacity int64, unit limiter.CalendarUnit) limiter.CalendarWindow {
	t.Helper()
	w, err := limiter.NewCalendarWindow(limiter.CalendarLimit{Capacity: capacity, Unit: unit})
	if err != nil {
		t.Fatalf("NewCalendarWindow(%d, %d): %v", capacity, unit, err)
	}
	return w
}

// Calendar windows are UTC days, ISO weeks from Monday and calendar months.
func TestCalendarBounds(t *testing.T) {
	tests := []struct {
		unit       limiter.CalendarUnit
		at         int64
		start, end int64
	}{
		{limiter.Day, utc(2024, 2, 29, 13), utc(2024, 2, 29, 0), utc(2024, 3, 1, 0)},
		{limiter.Day, utc(2024, 3, 1, 0), utc(2024, 3, 1, 0), utc(2024, 3, 2, 0)},
		{limiter.Day, utc(2024, 3, 1, 0) - 1, utc(2024, 2, 29, 0), utc(2024, 3, 1, 0)},
		{limiter.Day, -1, -int64(24 * time.Hour), 0},
		// 2024-01-01 was a Monday; 2023-12-31 a Sunday.
		{limiter.Week, utc(2024, 1, 1, 0), utc(2024, 1, 1, 0), utc(2024, 1, 8, 0)},
		{limiter.Week, utc(2023, 12, 31, 23), utc(2023, 12, 25, 0), utc(2024, 1, 1, 0)},
		{limiter.Week, utc(2024, 1, 7, 23), utc(2024, 1, 1, 0), utc(2024, 1, 8, 0)},
		{limiter.Week, 0, utc(1969, 12, 29, 0), utc(1970, 1, 5, 0)}, // the epoch was a Thursday
		{limiter.Week, utc(1969, 12, 28, 12), utc(1969, 12, 22, 0), utc(1969, 12, 29, 0)},
		{limiter.Month, utc(2024, 2, 15, 12), utc(2024, 2, 1, 0), utc(2024, 3, 1, 0)}, // 29 days
		{limiter.Month, utc(2023, 2, 28, 23), utc(2023, 2, 1, 0), utc(2023, 3, 1, 0)}, // 28 days
		{limiter.Month, utc(2024, 12, 31, 23), utc(2024, 12, 1, 0), utc(2025, 1, 1, 0)},
		{limiter.Month, utc(2025, 1, 1, 0), utc(2025, 1, 1, 0), utc(2025, 2, 1, 0)},
		{limiter.Month, utc(2025, 4, 30, 23), utc(2025, 4, 1, 0), utc(2025, 5, 1, 0)}, // 30 days
		{limiter.Month, -1, utc(1969, 12, 1, 0), 0},
		// The edges of int64 nanoseconds: the last window ends at math.MaxInt64; the first,
		// which starts before math.MinInt64, is read as the next one.
		{limiter.Month, math.MaxInt64, utc(2262, 4, 1, 0), math.MaxInt64},
		{limiter.Day, math.MaxInt64, utc(2262, 4, 11, 0), math.MaxInt64},
		{limiter.Month, math.MinInt64, utc(1677, 10, 1, 0), utc(1677, 11, 1, 0)},
		{limiter.Week, math.MinInt64, utc(1677, 9, 27, 0), utc(1677, 10, 4, 0)},
		{limiter.Day, math.MinInt64, utc(1677, 9, 22, 0), utc(1677, 9, 23, 0)},
	}
	for _, tt := range tests {
		w := mustCalendar(t, 1, tt.unit)
		start, end := w.Bounds(tt.at)
		if start != tt.start || end != tt.end {
			t.Errorf("unit %d at %v: [%v, %v), want [%v, %v)", tt.unit, time.Unix(0, tt.at).UTC(),
				time.Unix(0, start).UTC(), time.Unix(0, end).UTC(), time.Unix(0, tt.start).UTC(), time.Unix(0, tt.end).UTC())
		}
	}
}

// A monthly quota of 3 at fixed instants, through wall-clock steps: forward, the next window
// starts early; backward into an earlier window, the stored newer window keeps counting, so no
// unit is handed out twice.
func TestCalendarWindowTrace(t *testing.T) {
	w := mustCalendar(t, 3, limiter.Month)
	hour := time.Hour
	endOfJan := utc(2025, 2, 1, 0)
	steps := []struct {
		name string
		at   int64
		n    int64
		want limiter.Decision
	}{
		{"first of three", utc(2025, 1, 31, 20), 1, allowed(2, 4*hour)},
		{"second", utc(2025, 1, 31, 21), 1, allowed(1, 3*hour)},
		{"third", utc(2025, 1, 31, 22), 1, allowed(0, 2*hour)},
		{"over: wait for February", utc(2025, 1, 31, 23), 1, rejected(0, hour, hour)},
		{"February: a new window", endOfJan, 2, allowed(1, 28*24*hour)},
		// The wall clock is stepped back an hour, into January: February keeps counting.
		{"stepped back into January", utc(2025, 1, 31, 23), 1, allowed(0, 28*24*hour)},
		{"still February's count", utc(2025, 1, 31, 23), 1, rejected(0, 28*24*hour, 28*24*hour)},
		{"a month back", utc(2024, 12, 31, 0), 1, rejected(0, 28*24*hour, 28*24*hour)},
		{"back in February", utc(2025, 2, 10, 0), 1, rejected(0, 19*24*hour, 19*24*hour)},
		// Stepped forward by weeks: March starts early, with nothing counted.
		{"stepped forward to March", utc(2025, 3, 1, 0), 3, allowed(0, 31*24*hour)},
		{"more than the capacity", utc(2025, 3, 1, 0), 4, rejected(0, never(), 31*24*hour)},
	}
	s := w.Initial(steps[0].at)
	for _, st := range steps {
		var d limiter.Decision
		s, d = w.Take(s, st.at, st.n)
		if d != st.want {
			t.Errorf("%s: Take(%d) at %v = %+v, want %+v", st.name, st.n, time.Unix(0, st.at).UTC(), d, st.want)
		}
		if !w.Valid(s) {
			t.Errorf("%s: invalid state %+v", st.name, s)
		}
	}
	// A refund within the window is uncounted; one at a now stepped back before the stored
	// window, or for a window that has ended, is dropped.
	feb := limiter.WindowState{Start: endOfJan, Count: 3}
	if got := w.Give(feb, utc(2025, 2, 3, 0), 1); got != (limiter.WindowState{Start: endOfJan, Count: 2}) {
		t.Errorf("Give in February: %+v", got)
	}
	if got := w.Give(feb, utc(2025, 1, 31, 23), 1); got != feb {
		t.Errorf("Give stepped back into January: %+v", got)
	}
	if got := w.Give(feb, utc(2025, 3, 2, 0), 1); got != (limiter.WindowState{Start: utc(2025, 3, 1, 0)}) {
		t.Errorf("Give in March for February: %+v", got)
	}
}

func never() time.Duration { return time.Duration(math.MaxInt64) }

// Weeks start on Monday 00:00 UTC; a day window resets at midnight UTC.
func TestCalendarWeekAndDay(t *testing.T) {
	week := mustCalendar(t, 2, limiter.Week)
	s := week.Initial(utc(2025, 6, 8, 12)) // a Sunday
	s, d := week.Take(s, utc(2025, 6, 8, 12), 2)
	if d != allowed(0, 12*time.Hour) {
		t.Errorf("Sunday noon: %+v", d)
	}
	if _, d = week.Take(s, utc(2025, 6, 8, 23), 1); d != rejected(0, time.Hour, time.Hour) {
		t.Errorf("Sunday 23:00: %+v", d)
	}
	if _, d = week.Take(s, utc(2025, 6, 9, 0), 1); d != allowed(1, 7*24*time.Hour) {
		t.Errorf("Monday 00:00: %+v", d)
	}
	day := mustCalendar(t, 1, limiter.Day)
	s, _ = day.Take(day.Initial(0), utc(2025, 6, 9, 6), 1)
	if _, d = day.Take(s, utc(2025, 6, 9, 18), 1); d != rejected(0, 6*time.Hour, 6*time.Hour) {
		t.Errorf("same day: %+v", d)
	}
}

func TestNewCalendarWindowValidates(t *testing.T) {
	for _, l := range []limiter.CalendarLimit{{0, limiter.Day}, {1_000_000_001, limiter.Month}, {1, 0}, {1, 4}} {
		if _, err := limiter.NewCalendarWindow(l); err == nil {
			t.Errorf("NewCalendarWindow(%+v) accepted", l)
		}
	}
	var zero limiter.CalendarWindow
	s := limiter.WindowState{Start: 5, Count: 1}
	if got, d := zero.Take(s, 10, 1); got != s || d.Allowed || d.RetryAfter != never() {
		t.Errorf("zero CalendarWindow Take = %+v, %+v", got, d)
	}
	if zero.Valid(limiter.WindowState{}) || zero.Give(s, 10, 1) != s {
		t.Error("zero CalendarWindow accepted a state or changed one")
	}
	a, b := mustCalendar(t, 5, limiter.Week), mustCalendar(t, 5, limiter.Month)
	fixed, _ := limiter.NewFixedWindow(limiter.WindowLimit{Capacity: 5, Window: time.Duration(limiter.Month)})
	if a.Fingerprint() == b.Fingerprint() || b.Fingerprint() == fixed.Fingerprint() {
		t.Error("calendar fingerprints collide")
	}
}

// referenceCalendar is a deliberately plain calendar window on time.Time: the window of a
// time is found with time.Date, and a time before the stored window is read as its start.
type referenceCalendar struct {
	capacity int64
	unit     limiter.CalendarUnit
	start    time.Time
	count    int64
}

func (r *referenceCalendar) window(at time.Time) (time.Time, time.Time) {
	y, m, d := at.UTC().Date()
	switch r.unit {
	case limiter.Day:
		s := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return s, s.AddDate(0, 0, 1)
	case limiter.Week:
		back := (int(at.UTC().Weekday()) + 6) % 7 // days since Monday
		s := time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC)
		return s, s.AddDate(0, 0, 7)
	}
	s := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	return s, s.AddDate(0, 1, 0)
}

func (r *referenceCalendar) take(at time.Time, n int64) limiter.Decision {
	start, end := r.window(at)
	switch {
	case start.After(r.start):
		r.start, r.count = start, 0
	case start.Before(r.start):
		at = r.start
		_, end = r.window(r.start)
	}
	n = max(n, 1)
	left := end.Sub(at)
	var d limiter.Decision
	switch {
	case n > r.capacity:
		d.RetryAfter = never()
	case r.count+n <= r.capacity:
		r.count += n
		d.Allowed = true
	default:
		d.RetryAfter = left
	}
	d.Remaining = r.capacity - r.count
	if r.count > 0 {
		d.Reset = left
	}
	return d
}

// Random walks of a wall clock, with steps back by up to two months and forward by up to a
// year, decide as the reference, and never admit more than the capacity in any calendar window
// of the admissions as stored.
func TestCalendarMatchesReference(t *testing.T) {
	t.Parallel()
	for _, seed := range propertySeeds(t) {
		rng := rand.New(rand.NewPCG(seed, 0xca1))
		unit := limiter.CalendarUnit(1 + rng.IntN(3))
		capacity := 1 + rng.Int64N(5)
		w := mustCalendar(t, capacity, unit)
		clock := utc(2020, 1, 1, 0) + rng.Int64N(int64(4*365*24*time.Hour))
		ref := &referenceCalendar{capacity: capacity, unit: unit}
		ref.start, _ = ref.window(time.Unix(0, clock))
		s := w.Initial(clock)
		perWindow := map[int64]int64{}
		for i := range 300 {
			switch rng.IntN(10) {
			case 0:
				clock -= rng.Int64N(int64(60 * 24 * time.Hour)) // stepped back
			case 1:
				clock += rng.Int64N(int64(365 * 24 * time.Hour))
			default:
				clock += rng.Int64N(int64(36 * time.Hour))
			}
			n := 1 + rng.Int64N(capacity+1)
			var got limiter.Decision
			s, got = w.Take(s, clock, n)
			want := ref.take(time.Unix(0, clock), n)
			if got != want || s.Start != ref.start.UnixNano() || s.Count != ref.count {
				t.Fatalf("seed %#x unit %d capacity %d step %d: take %d at %v: %+v %+v, reference %+v start %v count %d",
					seed, unit, capacity, i, n, time.Unix(0, clock).UTC(), got, s, want, ref.start, ref.count)
			}
			if got.Allowed {
				perWindow[s.Start] += n
				if perWindow[s.Start] > capacity {
					t.Fatalf("seed %#x: %d units in the window from %v", seed, perWindow[s.Start], time.Unix(0, s.Start).UTC())
				}
			}
		}
	}
}

func FuzzCalendarWindow(f *testing.F) {
	f.Add(uint8(3), int64(3), utc(2025, 2, 1, 0), int64(2), int64(0), utc(2025, 1, 31, 23), int64(1))
	f.Add(uint8(2), int64(1), int64(math.MinInt64), int64(-5), int64(7), int64(math.MaxInt64), int64(0))
	f.Fuzz(func(t *testing.T, unit uint8, capacity, start, count, previous, now, n int64) {
		l := limiter.CalendarLimit{Capacity: capacity, Unit: limiter.CalendarUnit(unit)}
		w, err := limiter.NewCalendarWindow(l)
		if invalid := capacity < 1 || capacity > 1_000_000_000 || unit < 1 || unit > 3; invalid != (err != nil) {
			t.Fatalf("NewCalendarWindow(%+v): error %v", l, err)
		}
		if err != nil {
			return
		}
		nowStart, nowEnd := w.Bounds(now)
		if nowStart >= nowEnd || nowEnd <= now && nowEnd != math.MaxInt64 || nowStart > now && nowStart-now > int64(31*24*time.Hour) {
			t.Fatalf("Bounds(%d) = [%d, %d)", now, nowStart, nowEnd)
		}
		s := limiter.WindowState{Start: start, Count: count, Previous: previous}
		got, d := w.Take(s, now, n)
		if !w.Valid(got) {
			t.Fatalf("Take(%+v, %d, %d) with %+v: invalid state %+v", s, now, n, l, got)
		}
		if ahead := w.Valid(limiter.WindowState{Start: start}) && start > nowStart; ahead && got.Start != start || !ahead && got.Start != nowStart {
			t.Fatalf("Take(%+v, %d, %d) with %+v: Start %d, window of now %d", s, now, n, l, got.Start, nowStart)
		}
		if d.Allowed != (d.RetryAfter == 0) || d.RetryAfter < 0 || d.Reset < 0 || d.Remaining != capacity-got.Count {
			t.Fatalf("Take(%+v, %d, %d) with %+v: inconsistent decision %+v, state %+v", s, now, n, l, d, got)
		}
		if given := w.Give(got, now, n); !w.Valid(given) || given.Start != got.Start || given.Count > got.Count {
			t.Fatalf("Give(%+v, %d, %d) with %+v = %+v", got, now, n, l, given)
		}
	})
}
