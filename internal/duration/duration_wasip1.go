//go:build wasip1

package duration

// Duration is an elapsed time in nanoseconds, time.Duration without package time.
type Duration int64

// The units, as package time defines them.
const (
	Nanosecond  Duration = 1
	Microsecond          = 1000 * Nanosecond
	Millisecond          = 1000 * Microsecond
	Second               = 1000 * Millisecond
	Minute               = 60 * Second
	Hour                 = 60 * Minute
)

// String formats d as time.Duration's String does, e.g. "1.5s" or "1h0m0s".
func (d Duration) String() string { return Format(d) }
