// Package duration is the module's time.Duration: the same type natively, where it is an alias
// of time.Duration, and an int64 of nanoseconds in the Wasm module, which must not link package
// time. Importing time links what its initialisation needs (internal/godebug, the runtime's
// metrics, syscall's file access for time zones), a twelfth of the module (BENCHMARKS.md,
// section 5), for nothing the filter uses. Parse reads time.ParseDuration's syntax and Format
// writes Duration.String's, so both builds read and print durations alike; their tests compare
// them with package time's.
package duration
