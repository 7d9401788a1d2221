package plugin

import "testing"

// slotConfig: one request in flight per key; a request finding the slot taken waits for it up
// to 50 ms.
const slotConfig = `{"rules": [{"name": "one", "key": [{"header": "x-api-key"}],
  "limits": [{"algorithm": "concurrency", "max_in_flight": 1, "slot_timeout": "30s"}],
  "on_limit": {"action": "delay", "max_delay": "50ms"}}]}`

// A request waiting for a free slot goes on at the first tick after the slot frees; one still
// waiting on the first tick at or after max_delay gets a full limit's 429 with Retry-After 1; a
// waiter whose client goes away holds nothing, and a slot released frees it for the next.
func TestSlotWaitResumesWhenASlotFrees(t *testing.T) {
	host := rig(t, slotConfig)
	type o = map[string]string
	runSteps(t, host, []step{
		{at: 0, do: "request", name: "a", key: "k", outcomes: o{"a": "continued"}},
		{at: 0, do: "request", name: "b", key: "k", outcomes: o{"b": "held"}},
		{at: 0, do: "request", name: "other", key: "j", outcomes: o{"other": "continued"}}, // another key's slot
		{at: 10 * ms, do: "tick", outcomes: o{"b": "held"}},
		{at: 15 * ms, do: "release", name: "a"},
		{at: 20 * ms, do: "tick", outcomes: o{"b": "continued"}},
		{at: 20 * ms, do: "request", name: "c", key: "k", outcomes: o{"c": "held"}},
		{at: 20 * ms, do: "request", name: "d", key: "k", outcomes: o{"d": "held"}},
		{at: 60 * ms, do: "tick", outcomes: o{"c": "held", "d": "held"}},
		{at: 65 * ms, do: "gone", name: "d"},
		{at: 70 * ms, do: "tick", outcomes: o{"c": "429 ra=1"}},
		{at: 75 * ms, do: "release", name: "b"},
		{at: 75 * ms, do: "request", name: "e", key: "k", outcomes: o{"e": "continued"}},
	})
	checkCounters(t, host, map[string]uint64{
		"tollgate.rule.one.admitted": 4, "tollgate.rule.one.limited": 1, "tollgate.rule.one.in_flight_limited": 1,
		"tollgate.rule.one.delayed": 1, "tollgate.rule.one.delay_ms": 20,
	})
}

// Waiters of one key are tried in arrival order: the oldest gets the slot a tick finds free,
// and the younger waits on.
func TestSlotWaitersGoInArrivalOrder(t *testing.T) {
	host := rig(t, slotConfig)
	type o = map[string]string
	runSteps(t, host, []step{
		{at: 0, do: "request", name: "a", key: "k"},
		{at: 1 * ms, do: "request", name: "b", key: "k"},
		{at: 2 * ms, do: "request", name: "c", key: "k", outcomes: o{"b": "held", "c": "held"}},
		{at: 5 * ms, do: "release", name: "a"},
		{at: 10 * ms, do: "tick", outcomes: o{"b": "continued", "c": "held"}},
		{at: 12 * ms, do: "release", name: "b"},
		{at: 20 * ms, do: "tick", outcomes: o{"c": "continued"}},
	})
	checkCounters(t, host, map[string]uint64{"tollgate.rule.one.delayed": 2, "tollgate.rule.one.delay_ms": 9 + 18})
}
