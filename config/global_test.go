package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// withGlobal returns a one-rule document whose rule has the given global object.
func withGlobal(globalJSON string) string {
	return withRuleMembers(`"global": ` + globalJSON)
}

// defaultGlobal is the Global of {"cluster": "ratelimit", "domain": "tollgate"} after edit.
func defaultGlobal(edit func(*config.Global)) *config.Config {
	g := &config.Global{Cluster: "ratelimit", Domain: "tollgate", RuleEntry: "rule", KeyEntry: "key",
		Timeout: 20 * time.Millisecond, FailureMode: config.FailureAllow}
	if edit != nil {
		edit(g)
	}
	return baseRuleConfig(func(r *config.Rule) { r.Global = g })
}

const globalPath = "rules[0].global"

func TestGlobal(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		want     *config.Config
		problems []problem
	}{
		// Valid.
		{name: "cluster and domain, the rest defaulted",
			input: withGlobal(`{"cluster": "ratelimit", "domain": "tollgate"}`),
			want:  defaultGlobal(nil)},
		{name: "every field",
			input: withGlobal(`{"cluster": "outbound|8081||ratelimit.default.svc.cluster.local", "domain": "edge",
				"entries": [{"key": "env", "value": "prod"}, {"key": "tenant", "value": "acme corp"}],
				"rule_entry": "tollgate_rule", "key_entry": "tollgate_key", "timeout": "1s", "failure_mode": "deny"}`),
			want: defaultGlobal(func(g *config.Global) {
				g.Cluster, g.Domain = "outbound|8081||ratelimit.default.svc.cluster.local", "edge"
				g.Entries = []config.GlobalEntry{{Key: "env", Value: "prod"}, {Key: "tenant", Value: "acme corp"}}
				g.RuleEntry, g.KeyEntry, g.Timeout, g.FailureMode = "tollgate_rule", "tollgate_key", time.Second, config.FailureDeny
			})},
		{name: "empty entries list",
			input: withGlobal(`{"cluster": "ratelimit", "domain": "tollgate", "entries": []}`),
			want:  defaultGlobal(func(g *config.Global) { g.Entries = []config.GlobalEntry{} })},
		{name: "shortest and longest timeouts",
			input: withGlobal(`{"cluster": "ratelimit", "domain": "tollgate", "timeout": "1ms"}`),
			want:  defaultGlobal(func(g *config.Global) { g.Timeout = time.Millisecond })},
		{name: "longest timeout",
			input: withGlobal(`{"cluster": "ratelimit", "domain": "tollgate", "timeout": "1m"}`),
			want:  defaultGlobal(func(g *config.Global) { g.Timeout = time.Minute })},

		// Invalid: the object itself.
		{name: "not an object", input: withGlobal(`"ratelimit"`),
			problems: []problem{{globalPath, `got the string "ratelimit", want an object: global is an object such as {"cluster": "ratelimit", "domain": "tollgate"}`}}},
		{name: "empty object", input: withGlobal(`{}`),
			problems: []problem{
				{globalPath + ".cluster", `required field is missing: add "cluster": "ratelimit"`},
				{globalPath + ".domain", `required field is missing: add "domain": "tollgate"`},
			}},
		{name: "misspelt field", input: withGlobal(`{"cluster": "ratelimit", "domain": "tollgate", "timeout_ms": 20}`),
			problems: []problem{{globalPath, `unknown field "timeout_ms": the timeout is a duration with its unit, write "timeout": "20ms"`}}},
		{name: "another field misspelt", input: withGlobal(`{"cluster": "ratelimit", "domian": "tollgate"}`),
			problems: []problem{
				{globalPath, `unknown field "domian": known fields are cluster, domain, entries, rule_entry, key_entry, timeout, failure_mode, lease (did you mean "domain"?)`},
				{globalPath + ".domain", `required field is missing`},
			}},
		{name: "field repeated", input: withGlobal(`{"cluster": "a1", "cluster": "a2", "domain": "tollgate"}`),
			problems: []problem{{globalPath + ".cluster", "the field is given more than once"}}},

		// Invalid: cluster.
		{name: "empty cluster", input: withGlobal(`{"cluster": "", "domain": "tollgate"}`),
			problems: []problem{{globalPath + ".cluster", `"" is not allowed: cluster is the name of the rate limit service's cluster`}}},
		{name: "cluster with a space", input: withGlobal(`{"cluster": "rate limit", "domain": "tollgate"}`),
			problems: []problem{{globalPath + ".cluster", `"rate limit" contains ' ', which is not allowed`}}},
		{name: "cluster Envoy would read as a GrpcService", input: withGlobal(`{"cluster": "hx", "domain": "tollgate"}`),
			problems: []problem{{globalPath + ".cluster", `"hx" is also valid protobuf, and Envoy would read it as a serialized GrpcService instead of a cluster name: rename the cluster`}}},
		{name: "cluster too long", input: withGlobal(`{"cluster": "` + strings.Repeat("r", 257) + `", "domain": "tollgate"}`),
			problems: []problem{{globalPath + ".cluster", "is 257 bytes long"}}},
		{name: "cluster a number", input: withGlobal(`{"cluster": 8081, "domain": "tollgate"}`),
			problems: []problem{{globalPath + ".cluster", "got the number 8081, want a string"}}},

		// Invalid: domain and entries.
		{name: "empty domain", input: withGlobal(`{"cluster": "ratelimit", "domain": ""}`),
			problems: []problem{{globalPath + ".domain", `"" is not allowed: domain is the rate limit domain`}}},
		{name: "domain with a newline", input: withGlobal(`{"cluster": "ratelimit", "domain": "a\nb"}`),
			problems: []problem{{globalPath + ".domain", `contains '\n', which is not allowed`}}},
		{name: "entries not a list", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "entries": {"env": "prod"}}`),
			problems: []problem{{globalPath + ".entries", `got an object, want an array: entries is a list of up to 8 constant descriptor entries sent before the rule and key entries, e.g. [{"key": "env", "value": "prod"}]`}}},
		{name: "entry without value", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "entries": [{"key": "env"}]}`),
			problems: []problem{{globalPath + ".entries[0].value", `required field is missing: add "value": "prod"`}}},
		{name: "entry with an unknown field", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "entries": [{"key": "env", "value": "prod", "name": "x"}]}`),
			problems: []problem{{globalPath + ".entries[0]", `unknown field "name": known fields are key, value`}}},
		{name: "entry value empty", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "entries": [{"key": "env", "value": ""}]}`),
			problems: []problem{{globalPath + ".entries[0].value", `"" is not allowed: an entry is {"key": "<key>", "value": "<value>"}`}}},
		{name: "too many entries", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "entries": [` + entriesJSON(9) + `]}`),
			problems: []problem{{globalPath + ".entries", "9 entries are too many: at most 8 are allowed"}}},
		{name: "constant entry uses the rule entry's key", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "entries": [{"key": "rule", "value": "x"}]}`),
			problems: []problem{{globalPath + ".rule_entry", `"rule" is already the key of rules[0].global.entries[0].key: every entry of a descriptor needs its own key`}}},
		{name: "two constant entries with one key", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "entries": [{"key": "env", "value": "a"}, {"key": "env", "value": "b"}]}`),
			problems: []problem{{globalPath + ".entries[1].key", `"env" is already the key of rules[0].global.entries[0].key`}}},
		{name: "rule and key entries alike", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "key_entry": "rule"}`),
			problems: []problem{{globalPath + ".key_entry", `"rule" is already the key of rules[0].global.rule_entry`}}},
		{name: "empty key entry", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "key_entry": ""}`),
			problems: []problem{{globalPath + ".key_entry", `"" is not allowed: rule_entry and key_entry are descriptor entry keys`}}},

		// Invalid: timeout and failure mode.
		{name: "timeout without unit", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "timeout": 20}`),
			problems: []problem{{globalPath + ".timeout", `got the number 20, want a string: quote the timeout and give it a unit, e.g. "20ms" or "1s"`}}},
		{name: "timeout below a millisecond", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "timeout": "0.5ms"}`),
			problems: []problem{{globalPath + ".timeout", `"0.5ms" is shorter than 1ms: timeout is how long to wait for the service, whole milliseconds from "1ms" to "60s"`}}},
		{name: "timeout in microseconds", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "timeout": "20000us"}`),
			problems: []problem{{globalPath + ".timeout", `"20000us" is not a valid duration (the units are ms, s, m and h): timeout is how long`}}},
		{name: "timeout with a fraction of a millisecond", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "timeout": "1.5ms"}`),
			problems: []problem{{globalPath + ".timeout", `"1.5ms" is not a whole number of milliseconds, which is what Envoy takes`}}},
		{name: "timeout too long", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "timeout": "2m"}`),
			problems: []problem{{globalPath + ".timeout", `"2m" is longer than 60s`}}},
		{name: "timeout not a duration", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "timeout": "soon"}`),
			problems: []problem{{globalPath + ".timeout", `"soon" is not a valid duration`}}},
		{name: "failure mode misspelt", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "failure_mode": "alow"}`),
			problems: []problem{{globalPath + ".failure_mode", `"alow" is not a failure mode: failure_mode is "allow" (let the request through when the service fails or times out, the default) or "deny" (answer 503) (did you mean "allow"?)`}}},

		// Lease.
		{name: "lease with the default ttl",
			input: withGlobal(`{"cluster": "ratelimit", "domain": "tollgate", "lease": {"max_tokens": 16}}`),
			want:  defaultGlobal(func(g *config.Global) { g.Lease = &config.GlobalLease{MaxTokens: 16, TTL: time.Second} })},
		{name: "lease at its bounds",
			input: withGlobal(`{"cluster": "ratelimit", "domain": "tollgate", "lease": {"max_tokens": 1e4, "ttl": "1h"}}`),
			want:  defaultGlobal(func(g *config.Global) { g.Lease = &config.GlobalLease{MaxTokens: 10000, TTL: time.Hour} })},
		{name: "lease at its lower bounds",
			input: withGlobal(`{"cluster": "ratelimit", "domain": "tollgate", "lease": {"max_tokens": 1, "ttl": "10ms"}}`),
			want:  defaultGlobal(func(g *config.Global) { g.Lease = &config.GlobalLease{MaxTokens: 1, TTL: 10 * time.Millisecond} })},
		{name: "lease not an object", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": 16}`),
			problems: []problem{{globalPath + ".lease", `got the number 16, want an object: lease is an object such as {"max_tokens": 16, "ttl": "1s"}`}}},
		{name: "lease without max_tokens", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": {"ttl": "1s"}}`),
			problems: []problem{{globalPath + ".lease.max_tokens", `required field is missing: add "max_tokens": 16`}}},
		{name: "lease field misspelt", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": {"max_tokens": 4, "tll": "1s"}}`),
			problems: []problem{{globalPath + ".lease", `unknown field "tll": known fields are max_tokens, ttl (did you mean "ttl"?)`}}},
		{name: "no tokens", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": {"max_tokens": 0}}`),
			problems: []problem{{globalPath + ".lease.max_tokens", `0 is not allowed: max_tokens is the most tokens one lease request asks the service for, a whole number from 1 to 10000`}}},
		{name: "too many tokens", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": {"max_tokens": 10001}}`),
			problems: []problem{{globalPath + ".lease.max_tokens", `10001 is too large: max_tokens`}}},
		{name: "fractional tokens", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": {"max_tokens": 1.5}}`),
			problems: []problem{{globalPath + ".lease.max_tokens", `1.5 is not a whole number: max_tokens`}}},
		{name: "tokens quoted", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": {"max_tokens": "16"}}`),
			problems: []problem{{globalPath + ".lease.max_tokens", `want a number`}}},
		{name: "ttl without unit", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": {"max_tokens": 4, "ttl": 1}}`),
			problems: []problem{{globalPath + ".lease.ttl", `got the number 1, want a string: quote the ttl and give it a unit, e.g. "1s" or "500ms"`}}},
		{name: "ttl too short", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": {"max_tokens": 4, "ttl": "5ms"}}`),
			problems: []problem{{globalPath + ".lease.ttl", `"5ms" is shorter than 10ms: ttl is how long leased tokens may be spent before they are dropped, a duration from "10ms" to "1h" (default "1s")`}}},
		{name: "ttl too long", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": {"max_tokens": 4, "ttl": "2h"}}`),
			problems: []problem{{globalPath + ".lease.ttl", `"2h" is longer than 1h`}}},
		{name: "ttl not a duration", input: withGlobal(`{"cluster": "ratelimit", "domain": "d", "lease": {"max_tokens": 4, "ttl": "a while"}}`),
			problems: []problem{{globalPath + ".lease.ttl", `"a while" is not a valid duration: ttl is`}}},

		// Invalid: with shadow mode.
		{name: "shadow rule", input: withRuleMembers(`"shadow": true, "global": {"cluster": "ratelimit", "domain": "d"}`),
			problems: []problem{{globalPath, `a shadow rule cannot have a global limit`}}},
		{name: "top-level shadow with a global rule", input: `{"shadow": true, "rules": [{` + baseRuleJSON + `, "global": {"cluster": "ratelimit", "domain": "d"}}]}`,
			problems: []problem{{globalPath, `the top-level "shadow": true makes this rule a shadow rule, which cannot have a global limit`}}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) { checkParse(t, test.input, test.want, test.problems) })
	}
}

// entriesJSON returns n distinct constant entries.
func entriesJSON(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = `{"key": "k` + string(rune('a'+i)) + `", "value": "v"}`
	}
	return strings.Join(items, ", ")
}

// Names real deployments use are not mistaken for a serialized GrpcService.
func TestUsualClusterNamesAreAccepted(t *testing.T) {
	for _, name := range []string{"ratelimit", "rate_limit_service", "rls", "limitador", "ratelimit-grpc",
		"outbound|8081||ratelimit.default.svc.cluster.local", "outbound|8081||limitador.kuadrant-system.svc.cluster.local",
		"envoy-ratelimit", "global-ratelimit", "redis-ratelimit"} {
		if _, err := config.Parse([]byte(withGlobal(`{"cluster": "` + name + `", "domain": "d"}`))); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
}
