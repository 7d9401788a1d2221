package config_test

import (
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

func TestUsage(t *testing.T) {
	withUsage := func(u config.Usage) *config.Config {
		return baseRuleConfig(func(r *config.Rule) {
			r.Usage = &u
			r.Cost = config.Cost{Units: u.Reserve}
		})
	}
	tests := []struct {
		name     string
		input    string
		want     *config.Config
		problems []problem
	}{
		// Valid.
		{name: "openai, defaults", input: withRuleMembers(`"usage": {"source": "openai"}`),
			want: withUsage(config.Usage{Source: config.UsageOpenAI, Reserve: 1, Unknown: 1})},
		{name: "anthropic output tokens, reserve and unknown", input: withRuleMembers(`"usage": {"source": "anthropic", "count": "output", "reserve": 5, "unknown": 10}`),
			want: withUsage(config.Usage{Source: config.UsageAnthropic, Count: config.UsageOutput, Reserve: 5, Unknown: 10})},
		{name: "unknown defaults to reserve", input: withRuleMembers(`"usage": {"source": "openai", "count": "input", "reserve": 7}`),
			want: withUsage(config.Usage{Source: config.UsageOpenAI, Count: config.UsageInput, Reserve: 7, Unknown: 7})},
		{name: "a header, lower-cased", input: withRuleMembers(`"usage": {"source": "header", "header": "X-Usage-Tokens"}`),
			want: withUsage(config.Usage{Source: config.UsageHeader, Header: "x-usage-tokens", Reserve: 1, Unknown: 1})},
		{name: "response bytes, unknown 0 when configured", input: withRuleMembers(`"usage": {"source": "response_bytes", "unknown": 0}`),
			want: withUsage(config.Usage{Source: config.UsageResponseBytes, Reserve: 1, Unknown: 0})},
		{name: "on a shadow rule", input: withRuleMembers(`"shadow": true, "usage": {"source": "openai"}`),
			want: baseRuleConfig(func(r *config.Rule) {
				r.Shadow, r.Usage = true, &config.Usage{Source: config.UsageOpenAI, Reserve: 1, Unknown: 1}
			})},

		// Invalid fields.
		{name: "not an object", input: withRuleMembers(`"usage": "openai"`),
			problems: []problem{{"rules[0].usage", `want an object: usage is an object such as {"source": "openai", "reserve": 500}`}}},
		{name: "source missing", input: withRuleMembers(`"usage": {}`),
			problems: []problem{{"rules[0].usage.source", `required field is missing: add "source": "openai"`}}},
		{name: "source misspelt", input: withRuleMembers(`"usage": {"source": "opneai"}`),
			problems: []problem{{"rules[0].usage.source", `"opneai" is not a usage source: source is "openai"`}}},
		{name: "count for a header", input: withRuleMembers(`"usage": {"source": "header", "header": "x-u", "count": "input"}`),
			problems: []problem{{"rules[0].usage.count", `is only for "source": "openai" or "anthropic"`}}},
		{name: "count misspelt", input: withRuleMembers(`"usage": {"source": "openai", "count": "outputs"}`),
			problems: []problem{{"rules[0].usage.count", `"outputs" is not a usage count`}}},
		{name: "header missing", input: withRuleMembers(`"usage": {"source": "header"}`),
			problems: []problem{{"rules[0].usage.header", `missing: "source": "header" needs the response header`}}},
		{name: "header without source header", input: withRuleMembers(`"usage": {"source": "openai", "header": "x-u"}`),
			problems: []problem{{"rules[0].usage.header", `is only for "source": "header"`}}},
		{name: "reserve from the request body", input: withRuleMembers(`"usage": {"source": "openai", "reserve": {"request_field": "max_tokens"}}`),
			problems: []problem{{"rules[0].usage.reserve", `a reserve read from the request body ({"request_field": ...}) is not supported: give the most a request may use as a number`}}},
		{name: "reserve 0", input: withRuleMembers(`"usage": {"source": "openai", "reserve": 0}`),
			problems: []problem{{"rules[0].usage.reserve", `0 is not allowed: reserve is what a request is charged when it is admitted`}}},
		{name: "reserve fractional", input: withRuleMembers(`"usage": {"source": "openai", "reserve": 1.5}`),
			problems: []problem{{"rules[0].usage.reserve", `1.5 is not a whole number`}}},
		{name: "reserve above 2^53", input: withRuleMembers(`"usage": {"source": "openai", "reserve": 9007199254740993}`),
			problems: []problem{{"rules[0].usage.reserve", `is too large`}}},
		{name: "reserve above the capacity", input: withRuleMembers(`"usage": {"source": "openai", "reserve": 11}`),
			problems: []problem{{"rules[0].usage.reserve", `11 is above the capacity 10 of rules[0].limits[0], so no request could ever be admitted`}}},
		{name: "unknown negative", input: withRuleMembers(`"usage": {"source": "openai", "unknown": -1}`),
			problems: []problem{{"rules[0].usage.unknown", `-1 is not allowed`}}},
		{name: "unknown a string", input: withRuleMembers(`"usage": {"source": "openai", "unknown": "5"}`),
			problems: []problem{{"rules[0].usage.unknown", `want a number`}}},
		{name: "an unknown field", input: withRuleMembers(`"usage": {"source": "openai", "reserved": 5}`),
			problems: []problem{{"rules[0].usage", `unknown field "reserved"`}}},

		// Invalid combinations.
		{name: "with count", input: withRuleMembers(`"usage": {"source": "openai"}, "count": {"statuses": ["401"]}`),
			problems: []problem{{"rules[0].count", "a rule with usage cannot have count: the response's usage settles the charge"}}},
		{name: "with refund", input: withRuleMembers(`"usage": {"source": "openai"}, "refund": {"statuses": ["5xx"]}`),
			problems: []problem{{"rules[0].refund", "a rule with usage cannot have refund"}}},
		{name: "with cost", input: withRuleMembers(`"usage": {"source": "openai"}, "cost": 2`),
			problems: []problem{{"rules[0].cost", "a rule with usage cannot have cost: usage.reserve is what admission charges"}}},
		{name: "with on_limit delay", input: withRuleMembers(`"usage": {"source": "openai"}, "on_limit": {"action": "delay", "max_delay": "1s"}`),
			problems: []problem{{"rules[0].on_limit", "a rule with usage rejects over its limits"}}},
		{name: "with a concurrency limit", input: `{"rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"algorithm": "concurrency", "max_in_flight": 5}], "usage": {"source": "openai"}}]}`,
			problems: []problem{{"rules[0].usage", "a rule with usage cannot have a concurrency limit"}}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) { checkParse(t, test.input, test.want, test.problems) })
	}
}

// A rule with usage whose usage may go unread is flagged: a header no response carries to the
// filter, or an unknown no larger than the reserve. Bytes are always read.
func TestUsageWarnings(t *testing.T) {
	const cheap = `a response whose usage cannot be read is charged 1, no more than the reserve: a client that hangs up`
	for _, tt := range []struct {
		usage string
		want  []string
	}{
		{`{"source": "openai"}`, []string{"rules[0].usage.unknown: " + cheap}},
		{`{"source": "openai", "reserve": 2, "unknown": 2}`, []string{"rules[0].usage.unknown: a response whose usage cannot be read is charged 2"}},
		{`{"source": "anthropic", "unknown": 4096}`, nil},
		{`{"source": "response_bytes"}`, nil},
		{`{"source": "header", "header": "te", "unknown": 9}`, []string{`rules[0].usage.header: "te" is not a header an upstream's response carries`}},
		{`{"source": "header", "header": ":path", "unknown": 9}`, []string{`rules[0].usage.header: ":path" is not a header`}},
		{`{"source": "header", "header": "x-usage-tokens", "unknown": 9}`, nil},
	} {
		cfg, err := config.Parse([]byte(withRuleMembers(`"usage": ` + tt.usage)))
		if err != nil {
			t.Fatalf("%s: %v", tt.usage, err)
		}
		got := config.Warnings(cfg)
		if len(got) != len(tt.want) {
			t.Fatalf("%s: warnings %v, want %d", tt.usage, got, len(tt.want))
		}
		for i, w := range tt.want {
			if !strings.HasPrefix(got[i].String(), w) {
				t.Errorf("%s: warning %q, want it to start with %q", tt.usage, got[i], w)
			}
		}
	}
}
