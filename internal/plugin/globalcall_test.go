package plugin

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
	"github.com/tollgate-proxy/tollgate/internal/rls"
)

// globalRuleJSON is a rule with local tokens (refilled one an hour) and a global limit asked of
// the rate limit service within 20 ms; extra is spliced into its global object.
func globalRuleJSON(name, mode string, tokens int, extra string) string {
	return `{"name": "` + name + `", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": ` + strconv.Itoa(tokens) + `, "refill_tokens": 1, "refill_interval": "1h"}],
	  "global": {"cluster": "ratelimit", "domain": "dom", "timeout": "20ms", "failure_mode": "` + mode + `"` + extra + `}}`
}

func globalConfig(rules ...string) string {
	return `{"rules": [` + strings.Join(rules, ",") + `], "rate_limit_headers": "x-ratelimit"}`
}

// onlyCall is the one pending gRPC call, checked to ask the rate limit service of domain "dom"
// for the stream with the given context (0: any), naming the key by a hash, never as sent.
func onlyCall(t *testing.T, host *abitest.Host, key string, context uint32) *abitest.Call {
	t.Helper()
	calls := host.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls pending, want 1", len(calls))
	}
	c := calls[0]
	if c.Cluster != rlsCluster || c.Service != rls.Service || c.Method != rls.Method || c.TimeoutMilliseconds != 20 ||
		context != 0 && c.Context != context || !bytes.Contains(c.Message, []byte("dom")) || key != "" && bytes.Contains(c.Message, []byte(key)) {
		t.Fatalf("call %+v, want one to %s without %q for context %d", c, rlsCluster, key, context)
	}
	return c
}

// Each answer of the rate limit service, under each failure mode: what the request gets, what
// is counted and logged, and whether its local token was given back (the next request asks the
// service again rather than being rejected locally).
func TestGlobalCallAnswers(t *testing.T) {
	answer := func(b []byte) func(*abitest.Host, *abitest.Call, *abitest.Stream) {
		return func(h *abitest.Host, c *abitest.Call, _ *abitest.Stream) { h.Answer(c.Token, b) }
	}
	unavailable := func(h *abitest.Host, c *abitest.Call, _ *abitest.Stream) { h.Fail(c.Token, 14, "no healthy upstream") }
	timeOut := func(h *abitest.Host, c *abitest.Call, _ *abitest.Stream) { h.TimeOut(c.Token) }
	const failedLog = "tollgate: rule g: the rate limit service failed: gRPC status 14 (no healthy upstream) (global failure_mode %s)"
	const timeoutLog = "tollgate: rule g: the rate limit service did not answer within 20ms (global failure_mode %s)"
	tests := []struct {
		name, mode string
		settle     func(*abitest.Host, *abitest.Call, *abitest.Stream)
		outcome    string
		headers    string // x-ratelimit limit/remaining/reset of the reply
		counter    string // the global counter counted once
		warning    string // %s is the mode
		givenBack  bool
	}{
		{"ok", "allow", answer(rlsAnswer(rlsOK, 10, unitMinute, 9, 30000)), "continued", "", "global_ok", "", false},
		// Retry-After is duration_until_reset rounded up: 1.5 s is 2.
		{"over limit", "allow", answer(rlsAnswer(rlsOverLimit, 10, unitMinute, 0, 1500)), "429 ra=2", "10/0/2", "global_over_limit", "", true},
		{"over limit without reset", "deny", answer(rlsAnswer(rlsOverLimit, 0, 0, 0, -1)), "429 ra=1", "//", "global_over_limit", "", true},
		{"error, allow", "allow", unavailable, "continued", "", "global_error", failedLog, false},
		{"error, deny", "deny", unavailable, "503 ra=", "//", "global_error", failedLog, true},
		{"unreadable answer, allow", "allow", answer([]byte{0xff}), "continued", "", "global_error", "", false},
		{"timeout, allow", "allow", timeOut, "continued", "", "global_timeout", timeoutLog, false},
		{"timeout, deny", "deny", timeOut, "503 ra=", "//", "global_timeout", timeoutLog, true},
		{"client gone", "deny", func(_ *abitest.Host, _ *abitest.Call, s *abitest.Stream) { s.End() }, "ended", "", "global_cancelled", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := rig(t, globalConfig(globalRuleJSON("g", tt.mode, 1, "")))
			s, _ := host.Request(keyed("alice", "/"))
			if outcome(s) != "held" {
				t.Fatalf("before the answer: %s, want held", outcome(s))
			}
			tt.settle(host, onlyCall(t, host, "alice", s.ID()), s)
			if got := outcome(s); got != tt.outcome {
				t.Fatalf("after the answer: %s, want %s", got, tt.outcome)
			}
			if r := s.Reply(); r != nil {
				if got := r.Header("x-ratelimit-limit") + "/" + r.Header("x-ratelimit-remaining") + "/" + r.Header("x-ratelimit-reset"); got != tt.headers {
					t.Errorf("rate-limit headers %s, want %s", got, tt.headers)
				}
			}
			if len(host.Calls()) != 0 || abi.PendingGrpcCalls() != 0 {
				t.Fatalf("%d calls still pending", len(host.Calls()))
			}
			if tt.warning != "" {
				if got := host.LogsAt(abi.LogLevelWarn); len(got) != 1 || got[0] != fmt.Sprintf(tt.warning, tt.mode) {
					t.Errorf("warnings %q, want %q", got, fmt.Sprintf(tt.warning, tt.mode))
				}
			}
			next, _ := host.Request(keyed("alice", "/"))
			if gotBack := outcome(next) == "held"; gotBack != tt.givenBack {
				t.Errorf("the next request: %s; the local token given back %v, want %v", outcome(next), gotBack, tt.givenBack)
			}
			checkCounters(t, host, map[string]uint64{"tollgate.rule.g.global_ok": 0, "tollgate.rule.g." + tt.counter: 1})
		})
	}
}

// Two rules with global limits: the request waits for both answers, and either's OVER_LIMIT
// rejects it, with that rule's Retry-After.
func TestTwoGlobalRules(t *testing.T) {
	host := rig(t, globalConfig(globalRuleJSON("g1", "allow", 1, ""), globalRuleJSON("g2", "allow", 1, "")))
	steps := []struct {
		rule    int // whose call is answered: 0 or 1
		answer  []byte
		outcome string
		pending int // calls still pending after the answer
	}{
		{0, rlsAnswer(rlsOK, 10, unitMinute, 9, 1000), "held", 1},
		{1, rlsAnswer(rlsOK, 10, unitMinute, 9, 1000), "continued", 0},
		{1, rlsAnswer(rlsOverLimit, 10, unitMinute, 0, 4200), "429 ra=5", 0}, // the other call is cancelled
	}
	var s *abitest.Stream
	var calls []*abitest.Call
	for i, step := range steps {
		if len(host.Calls()) == 0 { // a new request, for a new key
			s, _ = host.Request(keyed(fmt.Sprint("key", i), "/"))
			if calls = host.Calls(); len(calls) != 2 {
				t.Fatalf("step %d: %d calls, want one per rule", i, len(calls))
			}
		}
		host.Answer(calls[step.rule].Token, step.answer)
		if got := outcome(s); got != step.outcome || len(host.Calls()) != step.pending {
			t.Fatalf("step %d: %s with %d calls pending, want %s with %d", i, got, len(host.Calls()), step.outcome, step.pending)
		}
	}
	checkCounters(t, host, map[string]uint64{"tollgate.rule.g1.admitted": 1, "tollgate.rule.g2.admitted": 1,
		"tollgate.rule.g2.limited": 1, "tollgate.rule.g1.global_ok": 1, "tollgate.rule.g2.global_over_limit": 1})
}
