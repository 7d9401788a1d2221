//go:build !wasip1

package duration

import "time"

// Duration is time.Duration.
type Duration = time.Duration

// The units, as package time defines them.
const (
	Nanosecond  = time.Nanosecond
	Microsecond = time.Microsecond
	Millisecond = time.Millisecond
	Second      = time.Second
	Minute      = time.Minute
	Hour        = time.Hour
)
