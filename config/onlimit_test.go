package config_test

import (
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

const onLimitPath = "rules[0].on_limit"

func withOnLimit(onLimitJSON string) string { return withRuleMembers(`"on_limit": ` + onLimitJSON) }

func onLimitConfig(o config.OnLimit) *config.Config {
	return baseRuleConfig(func(r *config.Rule) { r.OnLimit = o })
}

func TestOnLimit(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		want     *config.Config
		problems []problem
	}{
		{name: "reject, the default", input: withOnLimit(`{"action": "reject"}`), want: onLimitConfig(config.OnLimit{})},
		{name: "delay", input: withOnLimit(`{"action": "delay", "max_delay": "2s"}`),
			want: onLimitConfig(config.OnLimit{Action: config.OnLimitDelay, MaxDelay: 2 * time.Second})},
		{name: "shortest max_delay", input: withOnLimit(`{"action": "delay", "max_delay": "1ms"}`),
			want: onLimitConfig(config.OnLimit{Action: config.OnLimitDelay, MaxDelay: time.Millisecond})},
		{name: "longest max_delay", input: withOnLimit(`{"action": "delay", "max_delay": "1m"}`),
			want: onLimitConfig(config.OnLimit{Action: config.OnLimitDelay, MaxDelay: time.Minute})},
		{name: "a delaying shadow rule", input: withRuleMembers(`"shadow": true, "on_limit": {"action": "delay", "max_delay": "1s"}`),
			want: baseRuleConfig(func(r *config.Rule) {
				r.Shadow, r.OnLimit = true, config.OnLimit{Action: config.OnLimitDelay, MaxDelay: time.Second}
			})},

		{name: "not an object", input: withOnLimit(`"delay"`),
			problems: []problem{{onLimitPath, `want an object: on_limit is {"action": "reject"}`}}},
		{name: "no action", input: withOnLimit(`{"max_delay": "1s"}`),
			problems: []problem{{onLimitPath + ".action", `required field is missing: add "action": "delay"`}}},
		{name: "action misspelt", input: withOnLimit(`{"action": "dealy", "max_delay": "1s"}`),
			problems: []problem{{onLimitPath + ".action", `"dealy" is not an on_limit action: action is "reject" (answer 429 at once, the default) or "delay" (hold the request until its tokens are due, at most max_delay) (did you mean "delay"?)`}}},
		{name: "unknown field", input: withOnLimit(`{"action": "delay", "max_delay": "1s", "queue": 10}`),
			problems: []problem{{onLimitPath, `unknown field "queue"`}}},
		{name: "delay without max_delay", input: withOnLimit(`{"action": "delay"}`),
			problems: []problem{{onLimitPath + ".max_delay", `missing: a delaying rule needs the longest a request may be held, e.g. "max_delay": "2s"`}}},
		{name: "reject with max_delay", input: withOnLimit(`{"action": "reject", "max_delay": "1s"}`),
			problems: []problem{{onLimitPath + ".max_delay", `is only for "action": "delay": a rejecting rule holds nothing; remove max_delay or write "action": "delay"`}}},
		{name: "max_delay too long", input: withOnLimit(`{"action": "delay", "max_delay": "61s"}`),
			problems: []problem{{onLimitPath + ".max_delay", `"61s" is out of range: max_delay is the longest a request is held, a duration from "1ms" to "60s"`}}},
		{name: "max_delay too short", input: withOnLimit(`{"action": "delay", "max_delay": "0.999ms"}`),
			problems: []problem{{onLimitPath + ".max_delay", `"0.999ms" is out of range`}}},
		{name: "max_delay in nanoseconds", input: withOnLimit(`{"action": "delay", "max_delay": "2000000ns"}`),
			problems: []problem{{onLimitPath + ".max_delay", `"2000000ns" is not a valid duration (the units are ms, s, m and h): max_delay is the longest`}}},
		{name: "max_delay without a unit", input: withOnLimit(`{"action": "delay", "max_delay": 2}`),
			problems: []problem{{onLimitPath + ".max_delay", `want a string: quote the duration and give it a unit`}}},
		{name: "max_delay not a duration", input: withOnLimit(`{"action": "delay", "max_delay": "soon"}`),
			problems: []problem{{onLimitPath + ".max_delay", `"soon" is not a valid duration: max_delay is`}}},
		{name: "delay with a window", input: `{"rules": [{"name": "r", "key": [{"client_ip": {}}],
			"limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}, {"algorithm": "sliding_window", "capacity": 10, "window": "1m"}],
			"on_limit": {"action": "delay", "max_delay": "1s"}}]}`,
			problems: []problem{{onLimitPath + ".action", `"delay" works with token_bucket and concurrency limits only, and rules[0].limits[1] is a sliding_window: make it a token bucket`}}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) { checkParse(t, test.input, test.want, test.problems) })
	}
}

// A concurrency limit delays: its requests wait for a free slot, alone or with a token bucket.
func TestOnLimitDelayWithConcurrency(t *testing.T) {
	for _, limits := range []string{
		`[{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "30s"}]`,
		`[{"capacity": 10, "refill_tokens": 10, "refill_interval": "1s"}, {"algorithm": "concurrency", "max_in_flight": 2}]`,
	} {
		cfg, err := config.Parse([]byte(`{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": ` + limits +
			`, "on_limit": {"action": "delay", "max_delay": "2s"}}]}`))
		if err != nil {
			t.Fatalf("%s: %v", limits, err)
		}
		r := &cfg.Rules[0]
		if !r.Delays(cfg) || !r.HasConcurrency() || r.OnLimit.MaxDelay != 2*time.Second {
			t.Errorf("%s: delays %v, concurrency %v, max_delay %v; want a rule that waits 2s for a slot",
				limits, r.Delays(cfg), r.HasConcurrency(), r.OnLimit.MaxDelay)
		}
	}
}

// Delays is true only for a delaying rule that is not a shadow rule.
func TestRuleDelays(t *testing.T) {
	delay := config.OnLimit{Action: config.OnLimitDelay, MaxDelay: time.Second}
	for _, c := range []struct {
		rule       config.Rule
		topShadow  bool
		wantDelays bool
	}{
		{config.Rule{OnLimit: delay}, false, true},
		{config.Rule{OnLimit: delay, Shadow: true}, false, false},
		{config.Rule{OnLimit: delay}, true, false},
		{config.Rule{}, false, false},
	} {
		if got := c.rule.Delays(&config.Config{Shadow: c.topShadow}); got != c.wantDelays {
			t.Errorf("%+v (top-level shadow %v): Delays %v, want %v", c.rule, c.topShadow, got, c.wantDelays)
		}
	}
}
