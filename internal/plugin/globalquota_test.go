package plugin

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
)

// xRateLimit is a response's X-RateLimit-Limit/Remaining/Reset.
func xRateLimit(s *abitest.Stream) string {
	return s.ResponseHeader("x-ratelimit-limit") + "/" + s.ResponseHeader("x-ratelimit-remaining") + "/" +
		s.ResponseHeader("x-ratelimit-reset")
}

// An admitted request of a rule with a global limit carries the tighter of the local and the
// global quota (X-RateLimit-*), or both (the draft's RateLimit lists every policy); an answer
// that names no limit leaves the local figures alone.
func TestGlobalQuotaInAdmittedHeaders(t *testing.T) {
	tests := []struct {
		name   string
		style  string
		tokens int // local capacity, refilled one an hour
		answer []byte
		want   string // X-RateLimit-* as limit/remaining/reset, or the draft's two headers
	}{
		{"global tighter", "x-ratelimit", 100, rlsAnswer(rlsOK, 10, unitMinute, 4, 30000), "10/4/30"},
		// Reset rounds up: 29.2 s is 30.
		{"global tighter, reset rounded up", "x-ratelimit", 100, rlsAnswer(rlsOK, 10, unitMinute, 4, 29200), "10/4/30"},
		{"local tighter", "x-ratelimit", 3, rlsAnswer(rlsOK, 10, unitMinute, 4, 30000), "3/2/3600"},
		{"as tight: the local stays", "x-ratelimit", 5, rlsAnswer(rlsOK, 10, unitMinute, 4, 30000), "5/4/3600"},
		{"no limit named", "x-ratelimit", 100, rlsAnswer(rlsOK, 0, 0, 0, -1), "100/99/3600"},
		// No duration_until_reset: the whole unit.
		{"no reset sent", "x-ratelimit", 100, rlsAnswer(rlsOK, 10, unitMinute, 4, -1), "10/4/60"},
		{"draft", "draft", 100, rlsAnswer(rlsOK, 10, unitMinute, 4, 30000),
			`"g";q=100;w=360000, "g/global";q=10;w=60 | "g";r=99;t=3600;pk=*, "g/global";r=4;t=30`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := strings.Replace(globalConfig(globalRuleJSON("g", "allow", tt.tokens, "")), `"x-ratelimit"`, `"`+tt.style+`"`, 1)
			host := rig(t, cfg)
			s, _ := host.Request(keyed("alice", "/"))
			host.Answer(onlyCall(t, host, "alice", s.ID()).Token, tt.answer)
			if outcome(s) != "continued" {
				t.Fatalf("%s, want continued", outcome(s))
			}
			s.ResponseHeaders(200, nil)
			got := xRateLimit(s)
			if tt.style == "draft" {
				got = s.ResponseHeader("ratelimit-policy") + " | " + hidePartitionHash(s.ResponseHeader("ratelimit"))
			}
			if got != tt.want {
				t.Fatalf("headers %s, want %s", got, tt.want)
			}
		})
	}
}

// hidePartitionHash replaces each pk parameter's value with "*".
func hidePartitionHash(v string) string { return partitionHash.ReplaceAllString(v, "pk=*") }

var partitionHash = regexp.MustCompile(`pk=:[^:]*:`)

// With a lease, a request shows what the service said was left at the last grant plus the tokens
// still leased here: on one replica, exactly what is left of the global limit (10 a minute).
func TestGlobalQuotaWithALease(t *testing.T) {
	host := rig(t, leaseConfig("deny"))
	answer := func(remaining uint64) []byte { return rlsAnswer(rlsOK, 10, unitMinute, remaining, 60000) }
	type o = map[string]string
	streams := runLeaseSteps(t, host, []leaseStep{
		{name: "a", key: "k", outcomes: o{"a": "held"}, calls: 1, ask: 1},
		{answer: answer(9), outcomes: o{"a": "continued"}},
		{at: 1 * ms, name: "b", key: "k", outcomes: o{"b": "held"}, calls: 1, ask: 1},
		{at: 1 * ms, answer: answer(8), outcomes: o{"b": "continued"}},
		{at: 2 * ms, name: "c", key: "k", outcomes: o{"c": "held"}, calls: 1, ask: 2},
		{at: 2 * ms, answer: answer(6), outcomes: o{"c": "continued"}},     // one of the two tokens left here
		{at: 500 * ms, name: "d", key: "k", outcomes: o{"d": "continued"}}, // served from the lease
	})
	// The local limit (100) is looser; the window's reset counts from when the lease request went
	// out: 60 s after 2 ms is 59.502 s after 500 ms, rounded up.
	for name, want := range map[string]string{"a": "10/9/60", "b": "10/8/60", "c": "10/7/60", "d": "10/6/60"} {
		s := streams[name]
		s.ResponseHeaders(200, nil)
		if got := xRateLimit(s); got != want {
			t.Errorf("%s: X-RateLimit %s, want %s", name, got, want)
		}
	}
}
