package simulate

import (
	"fmt"
	"slices"
)

// choices are the names of an enumeration's values, indexed by value: the flag values that
// select them, and how they print. A value beyond the names prints as the zero value's name.
type choices[T ~int | ~uint8] struct {
	what, hint string // the error for an unknown name says: unknown <what> "name": use <hint>
	names      []string
}

// The enumerations read from flags: the log's --format (entry.go) and the fleet's --balance
// (fleet.go).
var (
	formats = choices[Format]{what: "log format", hint: "envoy-json or combined",
		names: []string{EnvoyJSON: "envoy-json", Combined: "combined"}}
	balances = choices[Balance]{what: "balance", hint: "round-robin or hash (of the client address)",
		names: []string{RoundRobin: "round-robin", HashClient: "hash"}}
)

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) { return formats.parse(s) }

// ParseBalance reads a --balance value.
func ParseBalance(s string) (Balance, error) { return balances.parse(s) }

func (f Format) String() string  { return formats.name(f) }
func (b Balance) String() string { return balances.name(b) }

func (c choices[T]) parse(s string) (T, error) {
	if i := slices.Index(c.names, s); i >= 0 {
		return T(i), nil
	}
	return 0, fmt.Errorf("unknown %s %q: use %s", c.what, s, c.hint)
}

func (c choices[T]) name(v T) string {
	if uint64(v) < uint64(len(c.names)) {
		return c.names[v]
	}
	return c.names[0]
}
