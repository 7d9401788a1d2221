package admission

import (
	"errors"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// Calendar windows decide on the wall clock (Unix time), since calendar days, weeks and months
// exist only there; every other limit, and everything the key table compares across slots
// (idle times, stamps), stays on the monotonic clock that all workers share. A decision reads
// the wall clock once, and only if one of its limits is a calendar window, so that requests of
// other rules cost no extra host call.

// calendarWindow stores (window start in Unix nanoseconds, count, 0), the WindowState of
// limiter.CalendarWindow.
type calendarWindow struct {
	algo limiter.CalendarWindow
}

var calendarUnits = [...]limiter.CalendarUnit{config.CalendarDay: limiter.Day, config.CalendarWeek: limiter.Week,
	config.CalendarMonth: limiter.Month}

func newCalendarWindow(l config.Limit) (algorithm, error) {
	var unit limiter.CalendarUnit
	if int(l.Calendar) < len(calendarUnits) {
		unit = calendarUnits[l.Calendar]
	}
	w, err := limiter.NewCalendarWindow(limiter.CalendarLimit{Capacity: l.Capacity, Unit: unit})
	return calendarWindow{algo: w}, err
}

func (w calendarWindow) initial(now int64) cells { return windowCells(w.algo.Initial(now)) }
func (w calendarWindow) take(c cells, now, n int64) (cells, limiter.Decision) {
	s, d := w.algo.Take(windowState(c), now, n)
	return windowCells(s), d
}
func (w calendarWindow) give(c cells, now, n int64) cells {
	return windowCells(w.algo.Give(windowState(c), now, n))
}

// undo: as for a window, the units are still counted wherever the window has not moved on.
func (w calendarWindow) undo(c, _ cells, now, n int64) cells { return w.give(c, now, n) }
func (w calendarWindow) valid(c cells) bool                  { return w.algo.Valid(windowState(c)) }
func (w calendarWindow) fingerprint() uint32                 { return w.algo.Fingerprint() }

// idleAt is on the wall clock: the end of the window if it counted anything, else its start.
// The key table converts it to the monotonic clock (idleOnMonotonic).
func (w calendarWindow) idleAt(c cells) int64 {
	if c[1] <= 0 {
		return c[0]
	}
	_, end := w.algo.Bounds(c[0])
	return end
}

// convert keeps the count of a changed capacity's window, clamped, if it is still a window of
// this calendar; otherwise the key starts in the window of now.
func (w calendarWindow) convert(c cells, now int64) (cells, bool) {
	count := min(max(c[1], 0), w.algo.Limit().Capacity)
	if start, _ := w.algo.Bounds(c[0]); start == c[0] {
		return cells{c[0], count, 0}, true
	}
	return w.initial(now), true
}

// policy: the quota per window, and the window's length for a day or a week. A month's length
// depends on the month: windowSeconds gives it for the window a decision is in.
func (w calendarWindow) policy() (int64, int64) {
	start, end := w.algo.Bounds(0)
	return w.algo.Limit().Capacity, (end - start) / 1e9
}

// windowSeconds is the length of the window a state is in, in seconds (28 to 31 days for a
// month), for RateLimit-Policy's w.
func (w calendarWindow) windowSeconds(c cells) int64 {
	start, end := w.algo.Bounds(c[0])
	return max(ceilSeconds(duration.Duration(end-start)), 1)
}

// SetWallClock gives the Gate its wall clock, read (Unix nanoseconds) by decisions that involve
// a calendar window and by nothing else.
func (g *Gate) SetWallClock(read func() (int64, error)) { g.wallClock = read }

var errNoWallClock = errors.New("a calendar window needs the wall clock, and the Gate has none")

// wallNow is the wall clock, read once per decision (Admit or GiveBack), when first needed.
func (g *Gate) wallNow() (int64, error) {
	if g.wallRead {
		return g.wallAt, nil
	}
	if g.wallClock == nil {
		return 0, errNoWallClock
	}
	at, err := g.wallClock()
	if err != nil {
		return 0, wrapError("cannot read the wall clock", err)
	}
	g.wallAt, g.wallRead = at, true
	return at, nil
}

// timeFor is the time a limit decides at: the monotonic now, or the wall clock for a calendar
// window.
func (g *Gate) timeFor(l *limit, now int64) (int64, error) {
	if !l.wall {
		return now, nil
	}
	return g.wallNow()
}

// when is the time the applied limit decides at, given the monotonic time the key table uses
// for it (now or a stamp): a calendar window's wall-clock reading instead.
func (a *applied) when(monotonic int64) int64 {
	if a.limit.wall {
		return a.at
	}
	return monotonic
}

// idleOnMonotonic converts the idle time of a decided state to the monotonic clock the key table
// compares across slots: a calendar window idle at wall time t is idle that much after now.
func (a *applied) idleOnMonotonic(idleAt, now int64) int64 {
	if !a.limit.wall {
		return idleAt
	}
	if idleAt <= a.at {
		return now
	}
	return satAdd(now, idleAt-a.at)
}
