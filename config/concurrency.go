package config

import (
	"strconv"

	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// Bounds and default of a concurrency limit.
const (
	maxInFlight    = 1_000_000
	minSlotTimeout = duration.Second
	maxSlotTimeout = 24 * duration.Hour
	// DefaultSlotTimeout is the slot_timeout of a concurrency limit that gives none: longer than
	// Envoy's default route timeout (15 s), so an ordinary request is always counted until it
	// ends, and short enough that a slot whose end was never seen is free again within 2 minutes.
	DefaultSlotTimeout = duration.Minute
)

const (
	exampleConcurrencyLimit = `{"algorithm": "concurrency", "max_in_flight": 4, "slot_timeout": "30s"}`
	maxInFlightRule         = "max_in_flight is how many requests of a key may be in flight at once, " +
		"a whole number from 1 to 1000000"
	slotTimeoutRule = `slot_timeout is how long a request holds its slot at least when its end is never seen ` +
		`(a worker that died), a duration from "1s" to "24h" inclusive (default "1m"), e.g. "30s" or "5m"`
)

// concurrency reads the fields of a concurrency limit.
func (v *validator) concurrency(path string, value *jsonValue, limit *Limit) {
	limit.SlotTimeout = DefaultSlotTimeout
	if n := v.required(value, path, "max_in_flight", "4"); n != nil {
		limit.MaxInFlight, _ = v.wholeNumber(fieldPath(path, "max_in_flight"), n, 1, maxInFlight, maxInFlightRule)
	}
	if timeout := value.member("slot_timeout"); timeout != nil {
		timeoutPath := fieldPath(path, "slot_timeout")
		if d, ok := v.boundedDuration(timeoutPath, timeout, &durations, slotTimeoutRule); ok {
			if d < minSlotTimeout {
				v.add(timeoutPath, quoteClipped(timeout.text)+" is shorter than 1s: "+slotTimeoutRule)
			} else {
				limit.SlotTimeout = d
			}
		}
	}
	for _, name := range []string{"capacity", "refill_tokens", "refill_interval", "window", "calendar"} {
		if value.member(name) != nil {
			v.add(fieldPath(path, name), name+` does not apply to a "concurrency" limit, which admits max_in_flight `+
				`requests at once whatever their rate: remove it (use max_in_flight), or add a separate limit such as `+
				exampleLimit+` to the rule to limit the rate as well`)
		}
	}
}

// refuseConcurrencyFields reports the fields of a concurrency limit on a limit of another
// algorithm.
func (v *validator) refuseConcurrencyFields(path string, value *jsonValue, algorithm Algorithm) {
	for _, name := range []string{"max_in_flight", "slot_timeout"} {
		if value.member(name) != nil {
			v.add(fieldPath(path, name), name+` belongs to the "concurrency" algorithm, but this limit is a `+
				strconv.Quote(algorithm.String())+`: set "algorithm": "concurrency" (e.g. `+exampleConcurrencyLimit+
				`), or remove `+name)
		}
	}
}

// HasConcurrency reports whether the rule has a concurrency limit, among its limits or any
// tier's.
func (r *Rule) HasConcurrency() bool {
	has := func(limits []Limit) bool {
		for _, l := range limits {
			if l.Algorithm == Concurrency {
				return true
			}
		}
		return false
	}
	if has(r.Limits) {
		return true
	}
	if r.LimitsBy != nil {
		for _, t := range r.LimitsBy.Tiers {
			if has(t.Limits) {
				return true
			}
		}
	}
	return false
}
