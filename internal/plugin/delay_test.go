package plugin

import (
	"regexp"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
)

const ms = int64(1e6)

// step is one instant of a held-request script: at that time (since the start) the named client
// goes away, a new request with that name arrives, or the plugin ticks; then the named streams'
// outcomes are checked.
type step struct {
	at       int64
	do       string // "request", "gone", "tick" or "release" (the named stream ends after its response)
	name     string
	key      string
	outcomes map[string]string
}

// runSteps plays steps on host, keeping the streams by name.
func runSteps(t *testing.T, host *abitest.Host, steps []step) map[string]*abitest.Stream {
	t.Helper()
	streams := map[string]*abitest.Stream{}
	for i, s := range steps {
		host.SetMonotonic(abitest.DefaultMonotonic + s.at)
		switch s.do {
		case "request":
			streams[s.name], _ = host.Request(keyed(s.key, "/"))
		case "gone":
			streams[s.name].End()
		case "release":
			streams[s.name].ResponseHeaders(200, nil)
			streams[s.name].End()
		case "tick":
			host.Tick()
		}
		for name, want := range s.outcomes {
			if got := outcome(streams[name]); got != want {
				t.Fatalf("step %d (t=%d ms, %s %s): %s is %s, want %s", i, s.at/ms, s.do, s.name, name, got, want)
			}
		}
	}
	return streams
}

// A delaying rule holds a request until its token is due (on the first tick at or after it),
// rejects one whose token is due past max_delay with that Retry-After, and gives a gone
// client's token back when no request was held behind it.
func TestDelayHoldsUntilTheTokenIsDue(t *testing.T) {
	host := rig(t, `{"rules": [{"name": "pace", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}],
	  "on_limit": {"action": "delay", "max_delay": "2s"}}]}`)
	if host.TickPeriod() != heldTickPeriod {
		t.Fatalf("tick period %d ms, want %d", host.TickPeriod(), heldTickPeriod)
	}
	type o = map[string]string
	runSteps(t, host, []step{
		{at: 0, do: "request", name: "a", key: "k", outcomes: o{"a": "continued"}},
		{at: 0, do: "request", name: "b", key: "k", outcomes: o{"b": "held"}},     // due at 1 s
		{at: 0, do: "request", name: "c", key: "k", outcomes: o{"c": "held"}},     // due at 2 s
		{at: 0, do: "request", name: "d", key: "k", outcomes: o{"d": "429 ra=3"}}, // due at 3 s: past max_delay
		{at: 990 * ms, do: "tick", outcomes: o{"b": "held"}},
		{at: 1000 * ms, do: "tick", outcomes: o{"b": "continued", "c": "held"}},
		// c leaves; it was the last held on the bucket, so its token comes back: e's is due at 2 s
		// (not 3 s, which max_delay would have rejected).
		{at: 1500 * ms, do: "gone", name: "c"},
		{at: 1500 * ms, do: "request", name: "e", key: "k", outcomes: o{"e": "held"}},
		{at: 2000 * ms, do: "tick", outcomes: o{"e": "continued"}},
	})
	checkCounters(t, host, map[string]uint64{
		"tollgate.rule.pace.admitted": 3, "tollgate.rule.pace.limited": 1,
		"tollgate.rule.pace.delayed": 3, "tollgate.rule.pace.delay_ms": 1000 + 2000 + 500,
	})
	if v, ok := host.Gauge("tollgate.rule.pace.max_delay_ms"); !ok || v != 2000 {
		t.Errorf("max_delay_ms %d (%v), want 2000", v, ok)
	}
}

// A worker holds at most maxHeld requests; one more that would be held is rejected with the
// Retry-After of its delay, and its token is given back.
func TestDelayBeyondTheHeldBoundIsRejected(t *testing.T) {
	host := rig(t, `{"rules": [{"name": "pace", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "10ms"}],
	  "on_limit": {"action": "delay", "max_delay": "60s"}}], "rate_limit_headers": "x-ratelimit"}`)
	host.Request(keyed("k", "/"))
	for i := 1; i <= maxHeld; i++ {
		if s, _ := host.Request(keyed("k", "/")); outcome(s) != "held" {
			t.Fatalf("request %d: %s, want held", i, outcome(s))
		}
	}
	// The next token is due 10 ms after the last held one's: (maxHeld+1) × 10 ms = 10.25 s.
	over, _ := host.Request(keyed("k", "/"))
	if got := outcome(over); got != "429 ra=11" {
		t.Fatalf("the request past the bound: %s, want 429 ra=11", got)
	}
	// Its token was given back: the next one is due at the same instant again.
	again, _ := host.Request(keyed("k", "/"))
	if got := outcome(again); got != "429 ra=11" {
		t.Fatalf("the next one: %s, want 429 ra=11", got)
	}
	checkCounters(t, host, map[string]uint64{"tollgate.rule.pace.limited": 2, "tollgate.rule.pace.delayed": uint64(maxHeld)})
}

// A delayed request of a rule with a global limit asks the rate limit service when it is due,
// not when it arrives; at debug level its hold is logged with the bucket's owner by hash.
func TestDelayedRequestAsksTheServiceWhenDue(t *testing.T) {
	host := rigWith(t, globalConfig(`{"name": "pace", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}],
	  "on_limit": {"action": "delay", "max_delay": "2s"},
	  "global": {"cluster": "ratelimit", "domain": "dom", "timeout": "20ms", "failure_mode": "deny"}}`),
		abitest.Options{LogLevel: abi.LogLevelDebug})
	ok := rlsAnswer(rlsOK, 100, unitMinute, 90, 60000)
	type o = map[string]string
	streams := runLeaseSteps(t, host, []leaseStep{
		{name: "a", key: "secret-k", outcomes: o{"a": "held"}, calls: 1},
		{answer: ok, outcomes: o{"a": "continued"}},
		{name: "b", key: "secret-k", outcomes: o{"b": "held"}}, // for its token: no call yet
	})
	host.SetMonotonic(abitest.DefaultMonotonic + 1000*ms)
	host.Tick()
	if got := outcome(streams["b"]); got != "held" {
		t.Fatalf("b when due: %s, want held for the service", got)
	}
	host.Answer(onlyCall(t, host, "secret-k", 0).Token, ok)
	if got := outcome(streams["b"]); got != "continued" || len(host.Calls()) != 0 {
		t.Fatalf("b after the answer: %s with %d calls pending, want continued", got, len(host.Calls()))
	}
	checkCounters(t, host, map[string]uint64{"tollgate.rule.pace.admitted": 2, "tollgate.rule.pace.global_ok": 2,
		"tollgate.rule.pace.delayed": 1})
	re := regexp.MustCompile(`^tollgate: decision delayed rule pace owner#[0-9a-f]+ for 1s \(1 held\)$`)
	found := false
	for _, line := range host.LogsAt(abi.LogLevelDebug) {
		found = found || re.MatchString(line)
	}
	if !found {
		t.Errorf("no line %s in %q", re, host.LogsAt(abi.LogLevelDebug))
	}
}
