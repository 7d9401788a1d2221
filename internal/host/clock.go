package host

import (
	"sync/atomic"
	"time"
)

// Clock is the host's time source: WASI clock 0 reads Wall, clock 1 reads Monotonic. Envoy serves
// both from its dispatcher; Monotonic is one steady clock for the whole process.
type Clock interface {
	Wall() int64      // nanoseconds since the Unix epoch
	Monotonic() int64 // nanoseconds on an arbitrary, never-decreasing base shared by all VMs
}

// SystemClock is the real clock.
type SystemClock struct{}

var systemMonotonicBase = time.Now()

// Wall implements Clock.
func (SystemClock) Wall() int64 { return time.Now().UnixNano() }

// Monotonic implements Clock. The offset keeps values far from zero, as on a host that has been
// up for a while, so nothing can rely on a small base.
func (SystemClock) Monotonic() int64 { return int64(time.Since(systemMonotonicBase)) + 1<<40 }

// ManualClock is a clock that moves only when told; safe for concurrent use. Tests use it to put
// requests at exact instants.
type ManualClock struct {
	wall, mono atomic.Int64
}

// NewManualClock returns a clock at the given readings.
func NewManualClock(wall time.Time, monotonic int64) *ManualClock {
	c := &ManualClock{}
	c.wall.Store(wall.UnixNano())
	c.mono.Store(monotonic)
	return c
}

// Wall implements Clock.
func (c *ManualClock) Wall() int64 { return c.wall.Load() }

// Monotonic implements Clock.
func (c *ManualClock) Monotonic() int64 { return c.mono.Load() }

// Advance moves both clocks forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.wall.Add(int64(d))
	c.mono.Add(int64(d))
}

// StepMonotonic moves only the monotonic clock, by d, which may be negative or huge. Envoy's
// monotonic clock (std::chrono::steady_clock) never steps backwards and never leaps; this exists
// to show that a module survives a host that breaks that promise (a stale value, a snapshot
// restored, a bug), not because Envoy does it.
func (c *ManualClock) StepMonotonic(d time.Duration) { c.mono.Add(int64(d)) }

// SetMonotonic sets the monotonic reading, for the same fault tests as StepMonotonic.
func (c *ManualClock) SetMonotonic(nanos int64) { c.mono.Store(nanos) }

// StepWall moves only the wall clock, by d (negative for a step backwards), as NTP or an operator
// does; the monotonic clock is unaffected, as on a real host.
func (c *ManualClock) StepWall(d time.Duration) { c.wall.Add(int64(d)) }
