package plugin

import (
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
)

// leaseConfig: a global limit taken from the service 4 tokens at a time, for at most 1 s.
func leaseConfig(mode string) string {
	return globalConfig(globalRuleJSON("l", mode, 100, `, "lease": {"max_tokens": 4, "ttl": "1s"}`))
}

// leaseStep is one instant of a lease script: a request for key, or the pending call answered
// (answer set) or failed (fail set); then the named streams' outcomes and the pending calls.
type leaseStep struct {
	at       int64
	name     string // a new request's name
	key      string
	answer   []byte
	fail     bool
	outcomes map[string]string
	calls    int
	ask      byte // the tokens the pending call asks for (its hits_addend); 0: not checked
}

func runLeaseSteps(t *testing.T, host *abitest.Host, steps []leaseStep) map[string]*abitest.Stream {
	t.Helper()
	streams := map[string]*abitest.Stream{}
	for i, s := range steps {
		host.SetMonotonic(abitest.DefaultMonotonic + s.at)
		switch {
		case s.answer != nil:
			host.Answer(onlyCall(t, host, "", 0).Token, s.answer)
		case s.fail:
			host.Fail(onlyCall(t, host, "", 0).Token, 14, "no healthy upstream")
		default:
			streams[s.name], _ = host.Request(keyed(s.key, "/"))
		}
		for name, want := range s.outcomes {
			if got := outcome(streams[name]); got != want {
				t.Fatalf("step %d (t=%d ms): %s is %s, want %s", i, s.at/ms, name, got, want)
			}
		}
		if got := len(host.Calls()); got != s.calls {
			t.Fatalf("step %d (t=%d ms): %d calls pending, want %d", i, s.at/ms, got, s.calls)
		}
		if s.ask != 0 {
			// hits_addend (field 3, varint) is the message's last field; these asks fit one byte.
			if m := host.Calls()[0].Message; m[len(m)-2] != 3<<3 || m[len(m)-1] != s.ask {
				t.Fatalf("step %d: the call asks for %v, want %d tokens", i, m[len(m)-2:], s.ask)
			}
		}
	}
	return streams
}

// A first lease asks for the cost; the tokens granted serve the waiters they cover, and an
// uncovered waiter asks again. A lease that runs dry within half its ttl doubles (up to
// max_tokens); leased tokens serve requests without a call, and expire with the ttl.
func TestLeaseServesWaitersAndLaterRequests(t *testing.T) {
	host := rig(t, leaseConfig("deny"))
	ok := rlsAnswer(rlsOK, 100, unitMinute, 90, 60000)
	type o = map[string]string
	runLeaseSteps(t, host, []leaseStep{
		{name: "a", key: "k", outcomes: o{"a": "held"}, calls: 1, ask: 1},
		{name: "b", key: "k", outcomes: o{"b": "held"}, calls: 1, ask: 1}, // waits for a's lease request
		{answer: ok, outcomes: o{"a": "continued", "b": "held"}, calls: 1, ask: 1},
		{answer: ok, outcomes: o{"b": "continued"}},
		{name: "c", key: "k", outcomes: o{"c": "held"}, calls: 1, ask: 2},
		{answer: ok, outcomes: o{"c": "continued"}},
		{name: "d", key: "k", outcomes: o{"d": "continued"}}, // the lease's second token
		{name: "e", key: "k", outcomes: o{"e": "held"}, calls: 1, ask: 4},
		{answer: ok, outcomes: o{"e": "continued"}},
		{name: "f", key: "k", outcomes: o{"f": "continued"}},
		{at: 1000 * ms, name: "g", key: "k", outcomes: o{"g": "held"}, calls: 1}, // 2 tokens expired
	})
	checkCounters(t, host, map[string]uint64{
		"tollgate.rule.l.global_lease_requests": 5, "tollgate.rule.l.global_lease_tokens": 1 + 1 + 2 + 4,
		"tollgate.rule.l.global_lease_served": 2, "tollgate.rule.l.global_lease_expired": 2,
		"tollgate.rule.l.global_ok": 4, "tollgate.rule.l.admitted": 6,
	})
}

// An OVER_LIMIT answer to a lease request rejects its waiters and is remembered until the
// reset: requests meanwhile are rejected without a call, with the Retry-After left.
func TestLeaseRemembersOverLimit(t *testing.T) {
	host := rig(t, leaseConfig("allow"))
	type o = map[string]string
	runLeaseSteps(t, host, []leaseStep{
		{name: "a", key: "m", calls: 1},
		{name: "b", key: "m", calls: 1},
		{answer: rlsAnswer(rlsOverLimit, 100, unitMinute, 0, 3000), outcomes: o{"a": "429 ra=3", "b": "429 ra=3"}},
		{at: 1000 * ms, name: "c", key: "m", outcomes: o{"c": "429 ra=2"}},
		{at: 3000 * ms, name: "d", key: "m", outcomes: o{"d": "held"}, calls: 1},
	})
	checkCounters(t, host, map[string]uint64{
		"tollgate.rule.l.global_over_limit": 1, "tollgate.rule.l.global_over_limit_remembered": 1,
		"tollgate.rule.l.limited": 3, "tollgate.rule.l.global_lease_requests": 2,
	})
}

// A lease request that fails answers its waiters by the failure mode.
func TestLeaseFailureFollowsTheFailureMode(t *testing.T) {
	for mode, want := range map[string]string{"allow": "continued", "deny": "503 ra="} {
		t.Run(mode, func(t *testing.T) {
			host := rig(t, leaseConfig(mode))
			runLeaseSteps(t, host, []leaseStep{
				{name: "a", key: "k", calls: 1},
				{name: "b", key: "k", calls: 1},
				{fail: true, outcomes: map[string]string{"a": want, "b": want}},
			})
			checkCounters(t, host, map[string]uint64{"tollgate.rule.l.global_error": 1})
		})
	}
}

// A waiter whose client goes away leaves the lease request, and its token, to the others.
func TestLeaseWaiterGone(t *testing.T) {
	host := rig(t, leaseConfig("deny"))
	var a *abitest.Stream
	a, _ = host.Request(keyed("k", "/"))
	b, _ := host.Request(keyed("k", "/"))
	a.End()
	if len(host.Calls()) != 1 {
		t.Fatalf("%d calls pending after a waiter left, want the lease request still", len(host.Calls()))
	}
	host.Answer(host.Calls()[0].Token, rlsAnswer(rlsOK, 100, unitMinute, 90, 60000))
	if outcome(b) != "continued" {
		t.Fatalf("the remaining waiter: %s, want continued", outcome(b))
	}
	checkCounters(t, host, map[string]uint64{"tollgate.rule.l.admitted": 1, "tollgate.rule.l.global_lease_tokens": 1})
}
