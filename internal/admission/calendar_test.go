package admission

import (
	"errors"
	"testing"
	"time"
)

// wallClock is a test wall clock that counts its reads.
type wallClock struct {
	at    int64
	reads int
	err   error
}

func (c *wallClock) read() (int64, error) {
	c.reads++
	return c.at, c.err
}

func utcNanos(year int, month time.Month, day, hour int) int64 {
	return time.Date(year, month, day, hour, 0, 0, 0, time.UTC).UnixNano()
}

// A monthly quota at fixed instants of both clocks: the windows are calendar months of the wall
// clock, whatever the monotonic clock does; a wall clock stepped forward starts the next month
// early, one stepped back keeps counting into the month stored; the rate-limit status gives the
// month's length and the time to its end.
func TestCalendarMonthSteps(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "monthly", "key": [{"header": "k"}],
	  "limits": [{"algorithm": "fixed_window", "capacity": 3, "calendar": "month"}]}]}`)
	clock := &wallClock{}
	g.SetWallClock(clock.read)
	store := newMemStore()
	day := 24 * time.Hour
	steps := []struct {
		name      string
		mono      int64
		wall      int64
		verdict   Verdict
		remaining int64
		reset     time.Duration // for an admitted request; RetryAfter for a limited one
		window    int64         // RateLimit-Policy w, seconds
	}{
		{"1", 100 * sec, utcNanos(2025, 1, 31, 20), Allow, 2, 4 * time.Hour, 31 * 86400},
		{"2", 101 * sec, utcNanos(2025, 1, 31, 21), Allow, 1, 3 * time.Hour, 31 * 86400},
		{"3", 102 * sec, utcNanos(2025, 1, 31, 22), Allow, 0, 2 * time.Hour, 31 * 86400},
		{"over", 103 * sec, utcNanos(2025, 1, 31, 23), Limited, 0, time.Hour, 31 * 86400},
		// The monotonic clock barely moves; the wall clock reaches February: a new month.
		{"February", 104 * sec, utcNanos(2025, 2, 1, 0), Allow, 2, 28 * day, 28 * 86400},
		// Stepped back into January: February keeps counting.
		{"stepped back", 105 * sec, utcNanos(2025, 1, 31, 23), Allow, 1, 28 * day, 28 * 86400},
		{"stepped back again", 106 * sec, utcNanos(2025, 1, 31, 23), Allow, 0, 28 * day, 28 * 86400},
		{"February is used up", 107 * sec, utcNanos(2025, 2, 14, 0), Limited, 0, 15 * day, 28 * 86400},
		// Stepped forward to March: it starts early.
		{"March", 108 * sec, utcNanos(2025, 3, 1, 0), Allow, 2, 31 * day, 31 * 86400},
	}
	for _, s := range steps {
		clock.at = s.wall
		reads := clock.reads
		out := g.Admit(header("k", "alice"), store, s.mono)
		if clock.reads != reads+1 {
			t.Errorf("%s: %d wall clock reads, want 1", s.name, clock.reads-reads)
		}
		if out.Verdict != s.verdict || len(out.Limits) != 1 {
			t.Fatalf("%s: %+v, want verdict %d", s.name, out, s.verdict)
		}
		l := out.Limits[0]
		wait := l.Reset
		if s.verdict == Limited {
			wait = out.RetryAfter
		}
		if l.Remaining != s.remaining || wait != s.reset || l.WindowSeconds != s.window || l.Quota != 3 {
			t.Errorf("%s: remaining %d, wait %v, window %d s, quota %d; want %d, %v, %d s", s.name, l.Remaining, wait,
				l.WindowSeconds, l.Quota, s.remaining, s.reset, s.window)
		}
	}
	// The slot's idle time is on the monotonic clock: the end of March, counted from the last
	// decision's monotonic now.
	st, ok := storedSlot(g, store, &g.rules[0].limits[0], "5:alice")
	if want := 108*sec + int64(31*day); !ok || st.idleAt != want {
		t.Errorf("slot idle at %d, want %d (monotonic)", st.idleAt, want)
	}
}

// Weeks start on Monday; the 7-day and 30-day windows of a fixed length stay on the monotonic
// clock and read no wall clock.
func TestCalendarWeekAndLongWindows(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [
	  {"algorithm": "fixed_window", "capacity": 2, "calendar": "week"},
	  {"algorithm": "fixed_window", "capacity": 5, "window": "7d"},
	  {"algorithm": "sliding_window", "capacity": 9, "window": "30d"},
	  {"capacity": 100000, "refill_tokens": 1, "refill_interval": "1d"}]}]}`)
	clock := &wallClock{at: utcNanos(2025, 6, 8, 12)} // a Sunday
	g.SetWallClock(clock.read)
	store := newMemStore()
	day := int64(24 * time.Hour)
	mono := 10 * day
	for i := 0; i < 2; i++ {
		if out := g.Admit(header("k", "a"), store, mono); out.Verdict != Allow {
			t.Fatalf("request %d: %+v", i, out)
		}
	}
	out := g.Admit(header("k", "a"), store, mono)
	if out.Verdict != Limited || out.Rule != 0 || out.RetryAfter != 12*time.Hour {
		t.Fatalf("third request on Sunday: %+v, want limited until Monday", out)
	}
	clock.at = utcNanos(2025, 6, 9, 0)
	out = g.Admit(header("k", "a"), store, mono+12*int64(time.Hour))
	if out.Verdict != Allow {
		t.Fatalf("Monday: %+v", out)
	}
	want := []struct {
		remaining, window int64
	}{{1, 7 * 86400}, {2, 7 * 86400}, {6, 30 * 86400}, {99_997, 100_000 * 86400}}
	for i, l := range out.Limits {
		if l.Remaining != want[i].remaining || l.WindowSeconds != want[i].window {
			t.Errorf("limit %d: remaining %d, window %d s; want %d, %d", i, l.Remaining, l.WindowSeconds, want[i].remaining, want[i].window)
		}
	}
	// The 7-day window is full after five, on the monotonic clock: aligned on multiples of
	// 7 days, so the wait is to the next one.
	clock.at = utcNanos(2025, 6, 10, 0)
	g.Admit(header("k", "a"), store, mono+13*int64(time.Hour)) // the week's second
	out = g.Admit(header("k", "a"), store, mono+13*int64(time.Hour))
	if out.Verdict != Limited || out.Rule != 0 {
		t.Fatalf("third of the week: %+v", out)
	}

	plain := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [
	  {"algorithm": "fixed_window", "capacity": 5, "window": "30d"}]}]}`)
	plainClock := &wallClock{}
	plain.SetWallClock(plainClock.read)
	for i := 0; i < 6; i++ {
		plain.Admit(header("k", "a"), newMemStore(), mono)
	}
	if plainClock.reads != 0 {
		t.Errorf("a rule without a calendar read the wall clock %d times", plainClock.reads)
	}
}

// A wall clock that cannot be read, or none at all, is an internal error: the failure mode
// decides, and nothing is charged.
func TestCalendarWithoutWallClock(t *testing.T) {
	doc := `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [
	  {"capacity": 5, "refill_tokens": 1, "refill_interval": "1s"},
	  {"algorithm": "fixed_window", "capacity": 2, "calendar": "day"}]}]}`
	g := mustGate(t, doc)
	store := newMemStore()
	if out := g.Admit(header("k", "a"), store, sec); out.Verdict != Failed || out.Err == nil {
		t.Errorf("no wall clock: %+v, want Failed", out)
	}
	g.SetWallClock((&wallClock{err: errors.New("clock broken")}).read)
	if out := g.Admit(header("k", "a"), store, sec); out.Verdict != Failed || out.Err == nil {
		t.Errorf("broken wall clock: %+v, want Failed", out)
	}
	if store.keys() != 0 {
		t.Errorf("a failed decision wrote %d values", store.keys())
	}
}
