package config_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/netaddr"
)

const exampleJSON = `{
  "rules": [
    {
      "name": "per-api-key",
      "key": [{"header": "x-api-key"}],
      "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]
    }
  ],
  "failure_mode": "allow"
}`

// problem is an expected Problem: the exact field and a substring of the message.
type problem struct {
	field    string
	contains string
}

// withLimit returns a one-rule document whose only limit is limitJSON.
func withLimit(limitJSON string) string {
	return `{"rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [` + limitJSON + `]}]}`
}

// withKeyPart returns a one-rule document whose only key part is partJSON.
func withKeyPart(partJSON string) string {
	return `{"rules": [{"name": "r", "key": [` + partJSON + `], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`
}

// withRule returns a document whose only rule is ruleJSON.
func withRule(ruleJSON string) string {
	return `{"rules": [` + ruleJSON + `]}`
}

// withFailureMode returns a valid one-rule document with the given failure_mode value.
func withFailureMode(modeJSON string) string {
	return `{"rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}], "failure_mode": ` + modeJSON + `}`
}

// repeatJoined returns n copies of item separated by commas.
func repeatJoined(item string, n int) string {
	return strings.TrimSuffix(strings.Repeat(item+",", n), ",")
}

// defaultBody is the documented default body of a rejected request.
const defaultBody = "Too Many Requests: retry after {retry_after} s\n"

// defaultClientIP is the documented default client address setting: source.address, whole.
var defaultClientIP = config.ClientIP{IPv4Prefix: 32, IPv6Prefix: 128}

// defaultKeyTable is the documented default key table.
var defaultKeyTable = config.KeyTable{MaxKeys: 100000, WhenFull: config.WhenFullOverflow, MaxKeyBytes: 1024}

// defaultResponse is the documented default response to a rejected request.
func defaultResponse() config.Response {
	return config.Response{Status: 429, Body: defaultBody, ContentType: "text/plain; charset=utf-8"}
}

// ruleWith returns a Rule with the documented defaults (cost 1, missing key
// rejected with 401) and the given name, key and limits.
func ruleWith(name string, key []config.KeyPart, limits ...config.Limit) config.Rule {
	return config.Rule{
		Name:       name,
		Key:        key,
		MissingKey: config.MissingKey{Action: config.MissingKeyReject, Status: 401},
		Limits:     limits,
		Cost:       config.Cost{Units: 1},
	}
}

// configWith returns a Config with the documented defaults and the given rules.
func configWith(rules ...config.Rule) *config.Config {
	return &config.Config{Rules: rules, FailureMode: config.FailureAllow, Response: defaultResponse(), KeyTable: defaultKeyTable,
		ClientIP: defaultClientIP}
}

// configEdit applies edit to cfg and returns it.
func configEdit(cfg *config.Config, edit func(*config.Config)) *config.Config {
	edit(cfg)
	return cfg
}

// clientIPKey is the key of a rule keyed on the client address only.
var clientIPKey = []config.KeyPart{{Kind: config.KeyClientIP}}

// oneRule is the Config of a single rule named "r" keyed on the client IP.
func oneRule(limit config.Limit) *config.Config {
	return configWith(ruleWith("r", clientIPKey, limit))
}

// oneHeaderRule is the Config of a single rule named "r" keyed on a header.
func oneHeaderRule(header string) *config.Config {
	return configWith(ruleWith("r", []config.KeyPart{{Kind: config.KeyHeader, Header: header}},
		config.Limit{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second}))
}

// baseRuleJSON is the members of a valid rule named "r", keyed on the client
// address, with one token bucket of capacity 10.
const baseRuleJSON = `"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}]`

// withTop returns a valid one-rule document with extra top-level members.
func withTop(members string) string {
	return `{"rules": [{` + baseRuleJSON + `}], ` + members + `}`
}

// withRuleMembers returns a one-rule document whose rule has extra members.
func withRuleMembers(members string) string {
	return `{"rules": [{` + baseRuleJSON + `, ` + members + `}]}`
}

// withMatch returns a one-rule document whose rule has the given match.
func withMatch(matchJSON string) string {
	return withRuleMembers(`"match": ` + matchJSON)
}

// withHeaderMatch returns a one-rule document matching on one header.
func withHeaderMatch(headerMatchJSON string) string {
	return withMatch(`{"headers": [` + headerMatchJSON + `]}`)
}

// withExempt returns a valid one-rule document with the given exempt object.
func withExempt(exemptJSON string) string {
	return withTop(`"exempt": ` + exemptJSON)
}

// withResponse returns a valid one-rule document with the given response object.
func withResponse(responseJSON string) string {
	return withTop(`"response": ` + responseJSON)
}

// withMissingKey returns a one-rule document keyed on x-user with the given missing_key.
func withMissingKey(missingKeyJSON string) string {
	return `{"rules": [{"name": "r", "key": [{"header": "x-user"}], "missing_key": ` + missingKeyJSON +
		`, "limits": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}]}]}`
}

// baseRule is the Rule of baseRuleJSON.
func baseRule() config.Rule {
	return ruleWith("r", clientIPKey, config.Limit{Capacity: 10, RefillTokens: 1, RefillInterval: time.Second})
}

// baseConfig returns the Config of withTop, withRuleMembers and the like,
// after edit.
func baseConfig(edit func(*config.Config)) *config.Config {
	return configEdit(configWith(baseRule()), edit)
}

// baseRuleConfig returns the Config of a one-rule document whose rule is
// baseRule after edit.
func baseRuleConfig(edit func(*config.Rule)) *config.Config {
	rule := baseRule()
	edit(&rule)
	return configWith(rule)
}

// userKeyRuleConfig is the Config of withMissingKey with the given MissingKey.
func userKeyRuleConfig(missing config.MissingKey) *config.Config {
	return baseRuleConfig(func(r *config.Rule) {
		r.Key = []config.KeyPart{{Kind: config.KeyHeader, Header: "x-user"}}
		r.MissingKey = missing
	})
}

// withKeyPartConfig is the Config of withKeyPart with the given part.
func withKeyPartConfig(part config.KeyPart) *config.Config {
	return configWith(ruleWith("r", []config.KeyPart{part}, config.Limit{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second}))
}

// jsonStrings returns n JSON strings made by format with %d replaced by 0..n-1, comma-separated.
func jsonStrings(n int, format string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = `"` + strings.ReplaceAll(format, "%d", strconv.Itoa(i)) + `"`
	}
	return strings.Join(items, ", ")
}

const (
	matchPath       = "rules[0].match"
	missingKeyPath  = "rules[0].missing_key"
	costPath        = "rules[0].cost"
	limitPath       = "rules[0].limits[0]"
	windowPath      = "rules[0].limits[0].window"
	responseHeaders = "response.headers"
)

const (
	capacityPath       = "rules[0].limits[0].capacity"
	refillTokensPath   = "rules[0].limits[0].refill_tokens"
	refillIntervalPath = "rules[0].limits[0].refill_interval"
	keyPartPath        = "rules[0].key[0]"
	headerPath         = "rules[0].key[0].header"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		want     *config.Config
		problems []problem
	}{
		// Valid documents.
		{
			name:  "example",
			input: exampleJSON,
			want: configWith(ruleWith("per-api-key", []config.KeyPart{{Kind: config.KeyHeader, Header: "x-api-key"}},
				config.Limit{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})),
		},
		{
			name: "full document with every kind of part and two limits",
			input: `{"failure_mode": "deny", "rules": [
				{"name": "a.B_c-9", "key": [{"header": "X-API-Key"}, {"client_ip": {}}, {"header": ":Authority"}],
				 "limits": [{"capacity": 10, "refill_tokens": 10, "refill_interval": "1m"},
				            {"refill_interval": "500ms", "refill_tokens": 2, "capacity": 5}]},
				{"name": "second", "key": [{"header": "!#$%&'*+-.^_` + "`" + `|~09az"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1ms"}]}
			]}`,
			want: &config.Config{FailureMode: config.FailureDeny, Response: defaultResponse(), KeyTable: defaultKeyTable, ClientIP: defaultClientIP, Rules: []config.Rule{
				ruleWith("a.B_c-9",
					[]config.KeyPart{
						{Kind: config.KeyHeader, Header: "x-api-key"},
						{Kind: config.KeyClientIP},
						{Kind: config.KeyHeader, Header: ":authority"},
					},
					config.Limit{Capacity: 10, RefillTokens: 10, RefillInterval: time.Minute},
					config.Limit{Capacity: 5, RefillTokens: 2, RefillInterval: 500 * time.Millisecond},
				),
				ruleWith("second", []config.KeyPart{{Kind: config.KeyHeader, Header: "!#$%&'*+-.^_`|~09az"}},
					config.Limit{Capacity: 1, RefillTokens: 1, RefillInterval: time.Millisecond}),
			}},
		},
		{
			name:  "failure_mode defaults to allow",
			input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}`),
			want:  oneRule(config.Limit{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second}),
		},
		{
			name:  "header lower-cased",
			input: withKeyPart(`{"header": "X-Forwarded-FOR"}`),
			want:  oneHeaderRule("x-forwarded-for"),
		},
		{
			name:  "pseudo-header lower-cased",
			input: withKeyPart(`{"header": ":PATH"}`),
			want:  oneHeaderRule(":path"),
		},
		{
			name:  "header of 256 characters",
			input: withKeyPart(`{"header": "` + strings.Repeat("h", 256) + `"}`),
			want:  oneHeaderRule(strings.Repeat("h", 256)),
		},
		{
			name:  "integral doubles 3.0 and 3e0",
			input: withLimit(`{"capacity": 3.0, "refill_tokens": 3e0, "refill_interval": "1s"}`),
			want:  oneRule(config.Limit{Capacity: 3, RefillTokens: 3, RefillInterval: time.Second}),
		},
		{
			name:  "integral doubles 0.3e1, 30E-1 and 1e9",
			input: withLimit(`{"capacity": 1e9, "refill_tokens": 30E-1, "refill_interval": "1s"}`),
			want:  oneRule(config.Limit{Capacity: 1_000_000_000, RefillTokens: 3, RefillInterval: time.Second}),
		},
		{
			name:  "1000000 per 24h",
			input: withLimit(`{"capacity": 1000000, "refill_tokens": 1000000, "refill_interval": "24h"}`),
			want:  oneRule(config.Limit{Capacity: 1_000_000, RefillTokens: 1_000_000, RefillInterval: 24 * time.Hour}),
		},
		{
			name:  "largest capacity refilled 1 per second stays below 2^62",
			input: withLimit(`{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "1s"}`),
			want:  oneRule(config.Limit{Capacity: 1_000_000_000, RefillTokens: 1, RefillInterval: time.Second}),
		},
		{
			name:  "64-character rule name",
			input: strings.Replace(withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}`), `"r"`, `"`+strings.Repeat("n", 64)+`"`, 1),
			want:  configWith(ruleWith(strings.Repeat("n", 64), clientIPKey, config.Limit{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second})),
		},

		// The document itself.
		{name: "empty input", input: "", problems: []problem{{"", "the configuration is empty"}}},
		{name: "whitespace only", input: " \n\t\r ", problems: []problem{{"", `such as {"rules": [`}}},
		{name: "empty object", input: "{}", problems: []problem{{"rules", `required field is missing: add "rules": [`}}},
		{name: "array document", input: `[{"rules": []}]`, problems: []problem{{"", "got an array, want a JSON object"}}},
		{name: "null document", input: `null`, problems: []problem{{"", "got null, want a JSON object"}}},
		{name: "string document", input: `"rules"`, problems: []problem{{"", `got the string "rules", want a JSON object`}}},
		{name: "invalid JSON", input: "{\n  \"rules\": [}\n}", problems: []problem{{"", "invalid JSON at line 2, column 13 (byte offset 14): invalid character '}'"}}},
		{name: "invalid JSON inside an array", input: `{"rules": [1, x]}`, problems: []problem{{"", "invalid JSON at line 1, column 15 (byte offset 14): invalid character 'x'"}}},
		{name: "truncated JSON", input: `{"rules": [{"name": "a"`, problems: []problem{{"", "the JSON ends early at line 1, column 24 (byte offset 23)"}}},
		{name: "truncated string", input: `{"rules": [{"na`, problems: []problem{{"", "the JSON ends early"}}},
		{name: "trailing data", input: `{"rules": []} {}`, problems: []problem{{"", "unexpected data after the end of the JSON document at line 1, column 15 (byte offset 14)"}}},
		{name: "trailing garbage", input: "{}\n x", problems: []problem{{"", "unexpected data after the end of the JSON document at line 2, column 2 (byte offset 4)"}}},
		{name: "deep nesting", input: `{"rules": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, problems: []problem{{"", "the JSON nests deeper than 32 levels"}}},

		// Unknown and repeated fields at every level.
		{
			name:     "unknown document field",
			input:    `{"rule": [], "rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`,
			problems: []problem{{"", `unknown field "rule": known fields are rules, failure_mode, client_ip, exempt, shadow, response, rate_limit_headers, key_table, escaped_slashes, operator (did you mean "rules"?)`}},
		},
		{
			name:     "unknown rule field",
			input:    withRule(`{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}], "priority": 1}`),
			problems: []problem{{"rules[0]", `unknown field "priority": known fields are name, match, key, missing_key, limits, limits_by, cost, shadow`}},
		},
		{
			name:     "unknown key part field",
			input:    withKeyPart(`{"header": "x", "cookie": "session"}`),
			problems: []problem{{keyPartPath, `unknown field "cookie": known fields are header, client_ip, path, method, authority, query, attribute`}},
		},
		{
			name:     "misspelt key part field only",
			input:    withKeyPart(`{"headers": "x"}`),
			problems: []problem{{keyPartPath, `unknown field "headers": known fields are header, client_ip, path, method, authority, query, attribute (did you mean "header"?)`}},
		},
		{
			name:  "client_ip with its own prefixes",
			input: withKeyPart(`{"client_ip": {"ipv6_prefix": 64, "ipv4_prefix": 24}}`),
			want:  withKeyPartConfig(config.KeyPart{Kind: config.KeyClientIP, IPv4Prefix: 24, IPv6Prefix: 64}),
		},
		{
			name:     "client_ip with an unknown field",
			input:    withKeyPart(`{"client_ip": {"ipv6_prefx": 64}}`),
			problems: []problem{{"rules[0].key[0].client_ip", `unknown field "ipv6_prefx": known fields are ipv4_prefix, ipv6_prefix (did you mean "ipv6_prefix"?)`}},
		},
		{
			name:  "client_ip prefixes out of range",
			input: withKeyPart(`{"client_ip": {"ipv6_prefix": 129, "ipv4_prefix": 0}}`),
			problems: []problem{
				{"rules[0].key[0].client_ip.ipv4_prefix", "0 is not allowed: ipv4_prefix is how many leading bits"},
				{"rules[0].key[0].client_ip.ipv6_prefix", "129 is too large: ipv6_prefix is how many leading bits"},
			},
		},
		{
			name:  "top-level client_ip prefixes",
			input: withTop(`"client_ip": {"ipv6_prefix": 56}`),
			want:  baseConfig(func(c *config.Config) { c.ClientIP.IPv6Prefix = 56 }),
		},
		{
			name:  "unknown limit field",
			input: withLimit(`{"capcity": 3, "refill_tokens": 1, "refill_interval": "1s"}`),
			problems: []problem{
				{"rules[0].limits[0]", `unknown field "capcity": known fields are algorithm, capacity, refill_tokens, refill_interval, window, calendar, max_in_flight, slot_timeout (did you mean "capacity"?)`},
				{capacityPath, `required field is missing: add "capacity": 10`},
			},
		},
		{
			name:  "camelCase limit fields",
			input: withLimit(`{"capacity": 3, "refillTokens": 1, "refill_interval": "1s"}`),
			problems: []problem{
				{"rules[0].limits[0]", `unknown field "refillTokens": known fields are algorithm, capacity, refill_tokens, refill_interval, window, calendar, max_in_flight, slot_timeout (did you mean "refill_tokens"?)`},
				{refillTokensPath, "required field is missing"},
			},
		},
		{
			name:     "repeated document field",
			input:    `{"rules": [], "rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`,
			problems: []problem{{"rules", "given more than once"}, {"rules", "an empty list is not allowed"}},
		},
		{
			name:     "repeated limit field",
			input:    withLimit(`{"capacity": 1, "refill_tokens": 1, "capacity": 2, "refill_interval": "1s", "capacity": 3}`),
			problems: []problem{{capacityPath, "the field is given more than once in the same object: keep exactly one"}},
		},

		// rules
		{name: "rules null", input: `{"rules": null}`, problems: []problem{{"rules", "got null, want an array: rules is a list of rule objects"}}},
		{name: "rules object", input: `{"rules": {"name": "r"}}`, problems: []problem{{"rules", "got an object, want an array"}}},
		{name: "rules empty", input: `{"rules": []}`, problems: []problem{{"rules", `an empty list is not allowed: add a rule such as {"name": "per-api-key"`}}},
		{
			name:     "65 rules",
			input:    `{"rules": [` + repeatJoined(`{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`, 65) + `]}`,
			problems: append([]problem{{"rules", "65 rules are too many: at most 64 are allowed"}}, duplicateNameProblems(65)...),
		},
		{name: "rule not an object", input: `{"rules": ["per-api-key"]}`, problems: []problem{{"rules[0]", `got the string "per-api-key", want an object: a rule is an object with "name", "key" and "limits"`}}},
		{
			name:  "rule empty object",
			input: `{"rules": [{}]}`,
			problems: []problem{
				{"rules[0].name", `required field is missing: add "name": "per-api-key"`},
				{"rules[0].key", `required field is missing: add "key": [{"header": "x-api-key"}]`},
				{"rules[0].limits", `required field is missing: add "limits": [{"capacity": 10`},
			},
		},

		// name
		{name: "name number", input: withRule(`{"name": 7, "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`), problems: []problem{{"rules[0].name", "got the number 7, want a string: a rule name is 1 to 64 characters"}}},
		{name: "name null", input: withRule(`{"name": null, "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`), problems: []problem{{"rules[0].name", "got null, want a string"}}},
		{name: "name empty", input: withRule(`{"name": "", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`), problems: []problem{{"rules[0].name", `"" is not allowed: a rule name is 1 to 64 characters`}}},
		{name: "name too long", input: withRule(`{"name": "` + strings.Repeat("n", 65) + `", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`), problems: []problem{{"rules[0].name", `"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn..." is 65 bytes long`}}},
		{name: "name with space", input: withRule(`{"name": "per api key", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`), problems: []problem{{"rules[0].name", `"per api key" contains ' ', which is not allowed`}}},
		{name: "name with unicode", input: withRule(`{"name": "per-clé", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`), problems: []problem{{"rules[0].name", `contains 'é', which is not allowed`}}},
		{
			name: "duplicate rule names",
			input: `{"rules": [
				{"name": "per-api-key", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]},
				{"name": "other", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]},
				{"name": "per-api-key", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}
			]}`,
			problems: []problem{{"rules[2].name", `"per-api-key" is already used by rules[0]: rule names must be unique`}},
		},

		// key
		{name: "key missing", input: withRule(`{"name": "r", "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`), problems: []problem{{"rules[0].key", "required field is missing"}}},
		{name: "key null", input: withRule(`{"name": "r", "key": null, "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`), problems: []problem{{"rules[0].key", "got null, want an array: key is a list of 1 to 8 parts"}}},
		{name: "key object", input: withRule(`{"name": "r", "key": {"header": "x"}, "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`), problems: []problem{{"rules[0].key", "got an object, want an array"}}},
		{name: "key empty", input: withRule(`{"name": "r", "key": [], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`), problems: []problem{{"rules[0].key", "an empty list is not allowed: add a part such as"}}},
		{name: "9 key parts", input: withKeyPart(`{"header": "a"}, {"header": "b"}, {"header": "c"}, {"header": "d"}, {"header": "e"}, {"header": "f"}, {"header": "g"}, {"header": "h"}, {"header": "i"}`), problems: []problem{{"rules[0].key", "9 parts are too many: at most 8 are allowed"}}},
		{name: "key part string", input: withKeyPart(`"x-api-key"`), problems: []problem{{keyPartPath, `got the string "x-api-key", want an object: a key part is an object with exactly one field`}}},
		{name: "key part empty", input: withKeyPart(`{}`), problems: []problem{{keyPartPath, `the key part is empty: a key part is an object with exactly one field: {"header": "<name>"}, {"client_ip": {}}, {"path": {}}, {"method": {}}, {"authority": {}}, {"query": "<parameter>"} or {"attribute": ["<segment>", ...]}`}}},
		{name: "key part with header and client_ip", input: withKeyPart(`{"header": "x-api-key", "client_ip": {}}`), problems: []problem{{keyPartPath, `has both "header" and "client_ip": a key part takes exactly one`}}},
		{
			name:  "key part with both, each also invalid",
			input: withKeyPart(`{"header": 1, "client_ip": null}`),
			problems: []problem{
				{keyPartPath, `has both "header" and "client_ip"`},
				{headerPath, "got the number 1, want a string"},
				{"rules[0].key[0].client_ip", `got null, want an object: client_ip is an object such as {} (the whole address) or {"ipv6_prefix": 64}`},
			},
		},
		{name: "header null", input: withKeyPart(`{"header": null}`), problems: []problem{{headerPath, "got null, want a string: a header name is 1 to 256 characters"}}},
		{name: "header empty", input: withKeyPart(`{"header": ""}`), problems: []problem{{headerPath, `"" is not allowed: a header name`}}},
		{name: "header too long", input: withKeyPart(`{"header": "` + strings.Repeat("h", 257) + `"}`), problems: []problem{{headerPath, "is 257 bytes long: a header name is 1 to 256 characters"}}},
		{name: "header with space", input: withKeyPart(`{"header": "x api key"}`), problems: []problem{{headerPath, `"x api key" contains ' ', which is not allowed: a header name`}}},
		{name: "header with colon", input: withKeyPart(`{"header": "x-api:key"}`), problems: []problem{{headerPath, `contains ':'`}}},
		{name: "header with unicode", input: withKeyPart(`{"header": "x-ключ"}`), problems: []problem{{headerPath, `contains 'к'`}}},
		{name: "unknown pseudo-header", input: withKeyPart(`{"header": ":authorty"}`), problems: []problem{{headerPath, `":authorty" is not a request pseudo-header: use one of :authority, :method, :path, :scheme, :protocol`}}},
		{name: "response pseudo-header", input: withKeyPart(`{"header": ":status"}`), problems: []problem{{headerPath, "is not a request pseudo-header"}}},
		{name: "client_ip null", input: withKeyPart(`{"client_ip": null}`), problems: []problem{{"rules[0].key[0].client_ip", "got null, want an object"}}},
		{name: "client_ip true", input: withKeyPart(`{"client_ip": true}`), problems: []problem{{"rules[0].key[0].client_ip", `got true, want an object: client_ip is an object such as {} (the whole address)`}}},

		// limits
		{name: "limits missing", input: withRule(`{"name": "r", "key": [{"client_ip": {}}]}`), problems: []problem{{"rules[0].limits", "required field is missing"}}},
		{name: "limits string", input: withRule(`{"name": "r", "key": [{"client_ip": {}}], "limits": "3/s"}`), problems: []problem{{"rules[0].limits", `got the string "3/s", want an array: limits is a list of 1 to 8 limit objects such as [{"capacity": 10`}}},
		{name: "limits empty", input: withRule(`{"name": "r", "key": [{"client_ip": {}}], "limits": []}`), problems: []problem{{"rules[0].limits", "an empty list is not allowed: add a limit such as"}}},
		{name: "9 limits", input: withLimit(repeatJoined(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}`, 9)), problems: []problem{{"rules[0].limits", "9 limits are too many: at most 8 are allowed"}}},
		{name: "limit not an object", input: withLimit(`[3, 1, "1s"]`), problems: []problem{{"rules[0].limits[0]", "got an array, want an object: a limit is an object such as"}}},
		{
			name:  "limit empty object",
			input: withLimit(`{}`),
			problems: []problem{
				{capacityPath, `required field is missing: add "capacity": 10`},
				{refillTokensPath, `required field is missing: add "refill_tokens": 1`},
				{refillIntervalPath, `required field is missing: add "refill_interval": "1s"`},
			},
		},

		// capacity and refill_tokens
		{name: "capacity 0", input: withLimit(`{"capacity": 0, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "0 is not allowed: capacity is the burst size, a whole number from 1 to 1000000000"}}},
		{name: "capacity -0", input: withLimit(`{"capacity": -0, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "-0 is not allowed"}}},
		{name: "capacity negative", input: withLimit(`{"capacity": -5, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "-5 is not allowed"}}},
		{name: "capacity 2.5", input: withLimit(`{"capacity": 2.5, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "2.5 is not a whole number: capacity is the burst size"}}},
		{name: "capacity fraction hidden by float rounding", input: withLimit(`{"capacity": 3.0000000000000001, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "3.0000000000000001 is not a whole number"}}},
		{name: "capacity 25e-1", input: withLimit(`{"capacity": 25e-1, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "25e-1 is not a whole number"}}},
		{name: "capacity 1000000001", input: withLimit(`{"capacity": 1000000001, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "1000000001 is too large: capacity is the burst size, a whole number from 1 to 1000000000"}}},
		{name: "capacity 1e10", input: withLimit(`{"capacity": 1e10, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "1e10 is too large"}}},
		{name: "capacity 1e400", input: withLimit(`{"capacity": 1e400, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "1e400 is too large"}}},
		{name: "capacity 1e-400", input: withLimit(`{"capacity": 1e-400, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "1e-400 is not a whole number"}}},
		{name: "capacity 99999999999999999999999", input: withLimit(`{"capacity": 99999999999999999999999, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "99999999999999999999999 is too large"}}},
		{name: "capacity string", input: withLimit(`{"capacity": "3", "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, `got the string "3", want a number: capacity is the burst size, a whole number from 1 to 1000000000, written without quotes`}}},
		{name: "capacity null", input: withLimit(`{"capacity": null, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "got null, want a number"}}},
		{name: "capacity boolean", input: withLimit(`{"capacity": true, "refill_tokens": 1, "refill_interval": "1s"}`), problems: []problem{{capacityPath, "got true, want a number"}}},
		{name: "refill_tokens 0", input: withLimit(`{"capacity": 1, "refill_tokens": 0, "refill_interval": "1s"}`), problems: []problem{{refillTokensPath, "0 is not allowed: refill_tokens is how many tokens are added every refill_interval"}}},
		{name: "refill_tokens 1.5", input: withLimit(`{"capacity": 1, "refill_tokens": 1.5, "refill_interval": "1s"}`), problems: []problem{{refillTokensPath, "1.5 is not a whole number"}}},
		{name: "refill_tokens 2e9", input: withLimit(`{"capacity": 1, "refill_tokens": 2e9, "refill_interval": "1s"}`), problems: []problem{{refillTokensPath, "2e9 is too large"}}},
		{name: "refill_tokens object", input: withLimit(`{"capacity": 1, "refill_tokens": {}, "refill_interval": "1s"}`), problems: []problem{{refillTokensPath, "got an object, want a number"}}},
		{name: "refill_tokens missing", input: withLimit(`{"capacity": 1, "refill_interval": "1s"}`), problems: []problem{{refillTokensPath, `required field is missing: add "refill_tokens": 1`}}},

		// refill_interval
		{name: "refill_interval bare number", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": 1}`), problems: []problem{{refillIntervalPath, `got the number 1, want a string: quote the duration and give it a unit, e.g. "1s"`}}},
		{name: "refill_interval null", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": null}`), problems: []problem{{refillIntervalPath, `got null, want a string: refill_interval is a duration from "1ms" to "366d"`}}},
		{name: "refill_interval without unit", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "1"}`), problems: []problem{{refillIntervalPath, `"1" is not a valid duration: refill_interval is a duration`}}},
		{name: "refill_interval gibberish", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "one second"}`), problems: []problem{{refillIntervalPath, `"one second" is not a valid duration`}}},
		{name: "refill_interval overflowing duration", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "99999999999h"}`), problems: []problem{{refillIntervalPath, `"99999999999h" is not a valid duration`}}},
		{name: "refill_interval 0s", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "0s"}`), problems: []problem{{refillIntervalPath, `"0s" is shorter than 1ms`}}},
		{name: "refill_interval negative", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "-1s"}`), problems: []problem{{refillIntervalPath, `"-1s" is shorter than 1ms`}}},
		{name: "refill_interval 0.999ms", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "0.999ms"}`), problems: []problem{{refillIntervalPath, `"0.999ms" is shorter than 1ms: refill_interval is a duration from "1ms" to "366d" inclusive`}}},
		// The units are those the documentation lists: 1000us is 1ms, but us is not one of them.
		{name: "refill_interval in microseconds", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "1000us"}`), problems: []problem{{refillIntervalPath, `"1000us" is not a valid duration (the units are ms, s, m, h, d and w): refill_interval is a duration`}}},
		{name: "refill_interval in nanoseconds after days", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "1d5ns"}`), problems: []problem{{refillIntervalPath, `"1d5ns" is not a valid duration (want whole days (d) and weeks (w) followed by the units ms, s, m and h)`}}},
		{name: "refill_interval 366d1ns", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "366d0.000000001s"}`), problems: []problem{{refillIntervalPath, `"366d0.000000001s" is longer than "366d"`}}},
		{name: "refill_interval 367 days", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "8808h"}`), problems: []problem{{refillIntervalPath, `"8808h" is longer than "366d"`}}},

		// No token arithmetic overflow any more: the level is whole tokens and credits.
		{
			name:  "a billion tokens refilled one a day",
			input: withLimit(`{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "24h"}`),
			want:  oneRule(config.Limit{Capacity: 1_000_000_000, RefillTokens: 1, RefillInterval: 24 * time.Hour}),
		},
		{
			name:  "just above the former 2^62 bound",
			input: withLimit(`{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "4.611686019s"}`),
			want:  oneRule(config.Limit{Capacity: 1_000_000_000, RefillTokens: 1, RefillInterval: 4611686019 * time.Nanosecond}),
		},
		{
			name:  "no overflow once reduced by the gcd",
			input: withLimit(`{"capacity": 1000000000, "refill_tokens": 1000000000, "refill_interval": "24h"}`),
			want:  oneRule(config.Limit{Capacity: 1_000_000_000, RefillTokens: 1_000_000_000, RefillInterval: 24 * time.Hour}),
		},
		{
			name:  "just below 2^62",
			input: withLimit(`{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "4.611686018s"}`),
			want:  oneRule(config.Limit{Capacity: 1_000_000_000, RefillTokens: 1, RefillInterval: 4611686018 * time.Nanosecond}),
		},

		// failure_mode
		{name: "failure_mode deny", input: withFailureMode(`"deny"`), want: configEdit(oneRule(config.Limit{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second}), func(c *config.Config) { c.FailureMode = config.FailureDeny })},
		{name: "failure_mode allow", input: withFailureMode(`"allow"`), want: oneRule(config.Limit{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second})},
		{name: "failure_mode unknown", input: withFailureMode(`"block"`), problems: []problem{{"failure_mode", `"block" is not a failure mode: failure_mode is "allow"`}}},
		{name: "failure_mode capitalised", input: withFailureMode(`"Deny"`), problems: []problem{{"failure_mode", `"Deny" is not a failure mode`}}},
		{name: "failure_mode null", input: withFailureMode(`null`), problems: []problem{{"failure_mode", `got null, want a string: failure_mode is "allow"`}}},
		{name: "failure_mode boolean", input: withFailureMode(`false`), problems: []problem{{"failure_mode", "got false, want a string"}}},

		// client_ip
		{name: "client_ip hops", input: withTop(`"client_ip": {"xff_num_trusted_hops": 2}`), want: baseConfig(func(c *config.Config) { c.ClientIP.XFFNumTrustedHops = 2 })},
		{name: "client_ip hops 10 as 1e1", input: withTop(`"client_ip": {"xff_num_trusted_hops": 1e1}`), want: baseConfig(func(c *config.Config) { c.ClientIP.XFFNumTrustedHops = 10 })},
		{name: "client_ip hops 0", input: withTop(`"client_ip": {"xff_num_trusted_hops": 0}`), want: baseConfig(func(*config.Config) {})},
		{name: "client_ip empty object", input: withTop(`"client_ip": {}`), want: baseConfig(func(*config.Config) {})},
		{name: "client_ip hops 11", input: withTop(`"client_ip": {"xff_num_trusted_hops": 11}`), problems: []problem{{"client_ip.xff_num_trusted_hops", "11 is too large: xff_num_trusted_hops is how many trusted proxies in front of Envoy append to x-forwarded-for, a whole number from 0 to 10"}}},
		{name: "client_ip hops negative", input: withTop(`"client_ip": {"xff_num_trusted_hops": -1}`), problems: []problem{{"client_ip.xff_num_trusted_hops", "-1 is not allowed"}}},
		{name: "client_ip hops fraction", input: withTop(`"client_ip": {"xff_num_trusted_hops": 1.5}`), problems: []problem{{"client_ip.xff_num_trusted_hops", "1.5 is not a whole number"}}},
		{name: "client_ip hops string", input: withTop(`"client_ip": {"xff_num_trusted_hops": "1"}`), problems: []problem{{"client_ip.xff_num_trusted_hops", `got the string "1", want a number`}}},
		{name: "client_ip not an object", input: withTop(`"client_ip": 1`), problems: []problem{{"client_ip", `got the number 1, want an object: client_ip is an object such as {"xff_num_trusted_hops": 1}`}}},
		{name: "client_ip unknown field", input: withTop(`"client_ip": {"xff_num_trusted_hop": 1}`), problems: []problem{{"client_ip", `unknown field "xff_num_trusted_hop": known fields are xff_num_trusted_hops, ipv4_prefix, ipv6_prefix (did you mean "xff_num_trusted_hops"?)`}}},
		{
			name:     "trusted hops in the client_ip key part",
			input:    withKeyPart(`{"client_ip": {"xff_num_trusted_hops": 1}}`),
			problems: []problem{{"rules[0].key[0].client_ip", `unknown field "xff_num_trusted_hops": it belongs in the top-level "client_ip": {"xff_num_trusted_hops": 1}`}},
		},

		// exempt
		{name: "exempt empty object", input: withExempt(`{}`), want: baseConfig(func(*config.Config) {})},
		{
			name:  "exempt paths",
			input: withExempt(`{"paths": [{"exact": "/healthz"}, {"prefix": "/internal/"}, {"prefix": "/v1/health"}]}`),
			want: baseConfig(func(c *config.Config) {
				c.Exempt.Paths = []config.PathMatch{{Exact: "/healthz"}, {Prefix: "/internal/"}, {Prefix: "/v1/health"}}
			}),
		},
		{
			name:  "exempt CIDRs, single addresses and IPv4-mapped prefixes",
			input: withExempt(`{"client_cidrs": ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7", "2001:DB8::1", "10.1.0.0/16", "0.0.0.0/0", "::ffff:192.0.2.0/120"]}`),
			want: baseConfig(func(c *config.Config) {
				c.Exempt.ClientCIDRs = []netaddr.Prefix{
					mustPrefix("10.0.0.0/8"),
					mustPrefix("2001:db8::/32"),
					mustPrefix("192.0.2.7/32"),
					mustPrefix("2001:db8::1/128"),
					mustPrefix("10.1.0.0/16"),
					mustPrefix("0.0.0.0/0"),
					mustPrefix("192.0.2.0/24"), // IPv4-mapped: stored unmapped
				}
			}),
		},
		{
			name:  "exempt headers",
			input: withExempt(`{"headers": [{"name": "X-Internal", "exact": "1"}, {"name": "x-probe", "present": true}]}`),
			want: baseConfig(func(c *config.Config) {
				c.Exempt.Headers = []config.HeaderMatch{
					{Name: "x-internal", Kind: config.HeaderExact, Value: "1"},
					{Name: "x-probe", Kind: config.HeaderPresent},
				}
			}),
		},
		{name: "exempt not an object", input: withExempt(`["/healthz"]`), problems: []problem{{"exempt", `got an array, want an object: exempt is an object with any of "paths", "client_cidrs" and "headers"`}}},
		{name: "exempt unknown field", input: withExempt(`{"path": [{"exact": "/healthz"}]}`), problems: []problem{{"exempt", `unknown field "path": known fields are paths, client_cidrs, headers (did you mean "paths"?)`}}},
		{name: "exempt paths empty", input: withExempt(`{"paths": []}`), problems: []problem{{"exempt.paths", `an empty list is not allowed: add a path match such as {"exact": "/healthz"}, or remove "paths"`}}},
		{name: "exempt 65 paths", input: withExempt(`{"paths": [` + repeatJoined(`{"prefix": "/a"}`, 65) + `]}`), problems: []problem{{"exempt.paths", "65 paths are too many: at most 64 are allowed"}}},
		{name: "exempt 64 CIDRs", input: withExempt(`{"client_cidrs": [` + jsonStrings(64, "10.0.%d.0/24") + `]}`), want: baseConfig(func(c *config.Config) {
			for i := range 64 {
				c.Exempt.ClientCIDRs = append(c.Exempt.ClientCIDRs, netaddr.PrefixFrom(netaddr.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24))
			}
		})},
		{name: "exempt 65 CIDRs", input: withExempt(`{"client_cidrs": [` + jsonStrings(65, "10.0.%d.0/24") + `]}`), problems: []problem{{"exempt.client_cidrs", "65 CIDRs are too many: at most 64 are allowed"}}},
		{name: "exempt CIDRs empty", input: withExempt(`{"client_cidrs": []}`), problems: []problem{{"exempt.client_cidrs", `an empty list is not allowed: add a CIDR such as "10.0.0.0/8", or remove "client_cidrs"`}}},
		{name: "exempt CIDRs string", input: withExempt(`{"client_cidrs": "10.0.0.0/8"}`), problems: []problem{{"exempt.client_cidrs", `got the string "10.0.0.0/8", want an array: client_cidrs is a list of 1 to 64 CIDRs`}}},
		{name: "exempt headers empty", input: withExempt(`{"headers": []}`), problems: []problem{{"exempt.headers", "an empty list is not allowed"}}},
		{name: "exempt 65 headers", input: withExempt(`{"headers": [` + repeatJoined(`{"name": "x", "present": true}`, 65) + `]}`), problems: []problem{{"exempt.headers", "65 header matches are too many: at most 64 are allowed"}}},
		{
			name:  "invalid CIDRs",
			input: withExempt(`{"client_cidrs": ["10.0.0.0/33", "10.0.0.0/08", "2001:db8::/129", "x/8", "garbage", "fe80::1%eth0", "10.0.0.0/", 10]}`),
			problems: []problem{
				{"exempt.client_cidrs[0]", `"10.0.0.0/33" is not a valid CIDR: the prefix length after '/' must be a whole number from 0 to 32 for an IPv4 address`},
				{"exempt.client_cidrs[1]", `"10.0.0.0/08" is not a valid CIDR: the prefix length after '/' must be a whole number from 0 to 32 for an IPv4 address, written without leading zeros`},
				{"exempt.client_cidrs[2]", "from 0 to 128 for an IPv6 address"},
				{"exempt.client_cidrs[3]", `"x/8" is not a valid CIDR: "x" is not an IP address: a client CIDR is an address range such as "10.0.0.0/8"`},
				{"exempt.client_cidrs[4]", `"garbage" is not an IP address or CIDR: a client CIDR is an address range such as "10.0.0.0/8" or "2001:db8::/32", or a single address such as "192.0.2.7"`},
				{"exempt.client_cidrs[5]", `"fe80::1%eth0" has an IPv6 zone (%eth0), which a client address never carries`},
				{"exempt.client_cidrs[6]", `"10.0.0.0/" is not a valid CIDR`},
				{"exempt.client_cidrs[7]", "got the number 10, want a string"},
			},
		},

		// Path matches, in exempt and in a rule's match.
		{name: "path match string", input: withExempt(`{"paths": ["/healthz"]}`), problems: []problem{{"exempt.paths[0]", `got the string "/healthz", want an object: write {"exact": "/healthz"} to match that path only, or {"prefix": "/healthz"} to match every path starting with it`}}},
		{name: "path match empty", input: withExempt(`{"paths": [{}]}`), problems: []problem{{"exempt.paths[0]", `the path match is empty: a path match is an object with exactly one field, {"exact": "/healthz"} or {"prefix": "/internal/"}`}}},
		{
			name:  "path match with both",
			input: withExempt(`{"paths": [{"exact": "/a", "prefix": "b"}]}`),
			problems: []problem{
				{"exempt.paths[0]", `has both "exact" and "prefix": a path match takes exactly one`},
				{"exempt.paths[0].prefix", `"b" does not start with "/"`},
			},
		},
		{name: "path match unknown field", input: withExempt(`{"paths": [{"regex": "/a.*"}]}`), problems: []problem{{"exempt.paths[0]", `unknown field "regex": known fields are exact, prefix`}}},
		{name: "path match misspelt", input: withExempt(`{"paths": [{"prefx": "/a"}]}`), problems: []problem{{"exempt.paths[0]", `(did you mean "prefix"?)`}}},
		{name: "path without slash", input: withMatch(`{"path": {"prefix": "api/"}}`), problems: []problem{{"rules[0].match.path.prefix", `"api/" does not start with "/": a path starts with "/" and has no query string or fragment`}}},
		{name: "path empty", input: withMatch(`{"path": {"exact": ""}}`), problems: []problem{{"rules[0].match.path.exact", `"" is not allowed: a path starts with "/"`}}},
		{name: "path with query", input: withMatch(`{"path": {"exact": "/search?q=1"}}`), problems: []problem{{"rules[0].match.path.exact", `"/search?q=1" contains '?': paths are compared without the query string, so it could never match`}}},
		{name: "path with fragment", input: withMatch(`{"path": {"exact": "/a#b"}}`), problems: []problem{{"rules[0].match.path.exact", `contains '#': a fragment is never sent to the server`}}},
		{name: "path with space", input: withMatch(`{"path": {"prefix": "/a b"}}`), problems: []problem{{"rules[0].match.path.prefix", `"/a b" contains ' ', which a request path cannot contain`}}},
		{name: "path number", input: withMatch(`{"path": {"exact": 1}}`), problems: []problem{{"rules[0].match.path.exact", "got the number 1, want a string"}}},

		// shadow
		{name: "shadow everywhere", input: withTop(`"shadow": true`), want: baseConfig(func(c *config.Config) { c.Shadow = true })},
		{name: "shadow false", input: withTop(`"shadow": false`), want: baseConfig(func(*config.Config) {})},
		{name: "shadow string", input: withTop(`"shadow": "true"`), problems: []problem{{"shadow", `got the string "true", want true or false: shadow is true (decide and count, but never reject) or false (the default); at the top level it applies to every rule`}}},
		{name: "shadow null", input: withTop(`"shadow": null`), problems: []problem{{"shadow", "got null, want true or false"}}},
		{name: "rule shadow", input: withRuleMembers(`"shadow": true`), want: baseRuleConfig(func(r *config.Rule) { r.Shadow = true })},
		{name: "rule shadow number", input: withRuleMembers(`"shadow": 1`), problems: []problem{{"rules[0].shadow", "got the number 1, want true or false"}}},

		// response
		{name: "response empty object keeps the defaults", input: withResponse(`{}`), want: baseConfig(func(*config.Config) {})},
		{
			name:  "response every field",
			input: withResponse(`{"status": 503, "body": "{\"error\": \"slow down\", \"retry_after\": {retry_after}}", "content_type": "application/json", "headers": {"X-Served-By": "tollgate", "cache-control": "no-store", "x-empty": ""}}`),
			want: baseConfig(func(c *config.Config) {
				c.Response = config.Response{
					Status:      503,
					Body:        `{"error": "slow down", "retry_after": {retry_after}}`,
					ContentType: "application/json",
					Headers:     [][2]string{{"x-served-by", "tollgate"}, {"cache-control", "no-store"}, {"x-empty", ""}},
				}
			}),
		},
		{name: "response status 400", input: withResponse(`{"status": 400}`), want: baseConfig(func(c *config.Config) { c.Response.Status = 400 })},
		{name: "response status 599", input: withResponse(`{"status": 5.99e2}`), want: baseConfig(func(c *config.Config) { c.Response.Status = 599 })},
		{name: "response empty body", input: withResponse(`{"body": ""}`), want: baseConfig(func(c *config.Config) { c.Response.Body = "" })},
		{name: "response body of 4096 bytes", input: withResponse(`{"body": "` + strings.Repeat("b", 4096) + `"}`), want: baseConfig(func(c *config.Config) { c.Response.Body = strings.Repeat("b", 4096) })},
		{name: "response headers empty object", input: withResponse(`{"headers": {}}`), want: baseConfig(func(*config.Config) {})},
		{name: "response grpc_status 1", input: withResponse(`{"grpc_status": 1}`), want: baseConfig(func(c *config.Config) { c.Response.GrpcStatus = 1 })},
		{name: "response grpc_status 16", input: withResponse(`{"grpc_status": 16}`), want: baseConfig(func(c *config.Config) { c.Response.GrpcStatus = 16 })},
		{name: "response grpc_status 0", input: withResponse(`{"grpc_status": 0}`), problems: []problem{{"response.grpc_status", "grpc_status is the gRPC status a rejected gRPC request gets, a whole number from 1 to 16"}}},
		{name: "response grpc_status 17", input: withResponse(`{"grpc_status": 17}`), problems: []problem{{"response.grpc_status", "from 1 to 16 (default 8, RESOURCE_EXHAUSTED"}}},
		{name: "response grpc_status string", input: withResponse(`{"grpc_status": "8"}`), problems: []problem{{"response.grpc_status", "written without quotes"}}},
		{name: "response not an object", input: withResponse(`429`), problems: []problem{{"response", `got the number 429, want an object: response is an object with any of "status", "body", "content_type", "headers" and "grpc_status"`}}},
		{name: "response unknown field", input: withResponse(`{"code": 503}`), problems: []problem{{"response", `unknown field "code": known fields are status, body, content_type, headers`}}},
		{name: "response camelCase field", input: withResponse(`{"contentType": "text/html"}`), problems: []problem{{"response", `(did you mean "content_type"?)`}}},
		{name: "response status 399", input: withResponse(`{"status": 399}`), problems: []problem{{"response.status", "399 is not allowed: status is the HTTP status of a rejected request, a whole number from 400 to 599 (default 429)"}}},
		{name: "response status 600", input: withResponse(`{"status": 600}`), problems: []problem{{"response.status", "600 is too large"}}},
		{name: "response status fraction", input: withResponse(`{"status": 429.5}`), problems: []problem{{"response.status", "429.5 is not a whole number"}}},
		{name: "response status string", input: withResponse(`{"status": "503"}`), problems: []problem{{"response.status", `got the string "503", want a number`}}},
		{name: "response body too long", input: withResponse(`{"body": "` + strings.Repeat("b", 4097) + `"}`), problems: []problem{{"response.body", "is 4097 bytes long: body is the text sent to a rejected request, at most 4096 bytes"}}},
		{name: "response body object", input: withResponse(`{"body": {"error": "x"}}`), problems: []problem{{"response.body", "got an object, want a string"}}},
		{name: "response content_type empty", input: withResponse(`{"content_type": ""}`), problems: []problem{{"response.content_type", `"" is not allowed: content_type is 1 to 256 characters of visible ASCII and spaces`}}},
		{name: "response content_type unicode", input: withResponse(`{"content_type": "text/plain; charset=ütf-8"}`), problems: []problem{{"response.content_type", `contains 'ü', which is not allowed`}}},
		{name: "response content_type line break", input: withResponse(`{"content_type": "text/plain\r\nx-a: b"}`), problems: []problem{{"response.content_type", `contains '\r', which is not allowed`}}},
		{name: "response content_type too long", input: withResponse(`{"content_type": "` + strings.Repeat("t", 257) + `"}`), problems: []problem{{"response.content_type", "is 257 bytes long"}}},
		{name: "response headers array", input: withResponse(`{"headers": [["x-a", "b"]]}`), problems: []problem{{responseHeaders, `got an array, want an object: headers is an object of up to 16 header names and values, e.g. {"x-served-by": "tollgate"}`}}},
		{
			name:  "response headers the filter sets",
			input: withResponse(`{"headers": {"Retry-After": "1", "content-type": "a", "content-length": "0", "ratelimit": "x", "RateLimit-Policy": "x", "x-ratelimit-limit": "1", "x-ratelimit-remaining": "1", "x-ratelimit-reset": "1"}}`),
			problems: []problem{
				{"response.headers.Retry-After", `"Retry-After" is a header the filter sets itself: remove it (the filter sets it to the seconds until a retry can succeed)`},
				{"response.headers.content-type", `"content-type" is a header the filter sets itself: remove it and set "content_type" instead`},
				{"response.headers.content-length", "remove it (the filter computes it from body)"},
				{"response.headers.ratelimit", `set "rate_limit_headers": "draft"`},
				{"response.headers.RateLimit-Policy", `set "rate_limit_headers": "draft"`},
				{"response.headers.x-ratelimit-limit", `set "rate_limit_headers": "x-ratelimit"`},
				{"response.headers.x-ratelimit-remaining", `set "rate_limit_headers": "x-ratelimit"`},
				{"response.headers.x-ratelimit-reset", `set "rate_limit_headers": "x-ratelimit"`},
			},
		},
		{
			name:  "response header injection",
			input: withResponse(`{"headers": {"x-a": "1\r\nset-cookie: admin=1", "x-b": "1\n", "x-c": "a\u0000b"}}`),
			problems: []problem{
				{"response.headers.x-a", `"1\r\nset-cookie: admin=1" contains '\r', which would end the header early and let the rest of the value inject other headers or a body (response header injection)`},
				{"response.headers.x-b", `contains '\n'`},
				{"response.headers.x-c", `contains '\x00'`},
			},
		},
		{name: "response pseudo-header", input: withResponse(`{"headers": {":status": "200"}}`), problems: []problem{{"response.headers.:status", `":status" is a pseudo-header, which the response headers cannot set: use "status" for the status code`}}},
		{name: "response header name with space", input: withResponse(`{"headers": {"x a": "1"}}`), problems: []problem{{"response.headers.x a", `the header name "x a" contains ' ', which is not allowed: a response header name is 1 to 256 characters`}}},
		{name: "response header name empty", input: withResponse(`{"headers": {"": "1"}}`), problems: []problem{{"response.headers.", `the header name "" is not allowed`}}},
		{name: "response header name too long", input: withResponse(`{"headers": {"` + strings.Repeat("h", 257) + `": "1"}}`), problems: []problem{{"response.headers." + strings.Repeat("h", 40) + "...", "is 257 bytes long"}}},
		{name: "response header value of 1024 bytes", input: withResponse(`{"headers": {"x-a": "` + strings.Repeat("v", 1024) + `"}}`), want: baseConfig(func(c *config.Config) { c.Response.Headers = [][2]string{{"x-a", strings.Repeat("v", 1024)}} })},
		{name: "response header value too long", input: withResponse(`{"headers": {"x-a": "` + strings.Repeat("v", 1025) + `"}}`), problems: []problem{{"response.headers.x-a", "is 1025 bytes long: a response header value is a string of at most 1024 bytes without CR, LF or NUL"}}},
		{name: "response header value number", input: withResponse(`{"headers": {"x-version": 2}}`), problems: []problem{{"response.headers.x-version", `got the number 2, want a string: a response header value`}}},
		{name: "response header names differing in case", input: withResponse(`{"headers": {"X-A": "1", "x-a": "2"}}`), problems: []problem{{"response.headers.x-a", `"x-a" is the same header as "X-A" (header names are case-insensitive): keep exactly one`}}},
		{name: "response header repeated", input: withResponse(`{"headers": {"x-a": "1", "x-a": "2"}}`), problems: []problem{{"response.headers.x-a", "the header is given more than once in the same object"}}},
		{name: "response 16 headers", input: withResponse(`{"headers": {` + repeatHeaders(16) + `}}`), want: baseConfig(func(c *config.Config) { c.Response.Headers = headerPairs(16) })},
		{name: "response 17 headers", input: withResponse(`{"headers": {` + repeatHeaders(17) + `}}`), problems: []problem{{responseHeaders, "17 headers are too many: at most 16 are allowed"}}},

		// rate_limit_headers
		{name: "rate_limit_headers off", input: withTop(`"rate_limit_headers": "off"`), want: baseConfig(func(*config.Config) {})},
		{name: "rate_limit_headers draft", input: withTop(`"rate_limit_headers": "draft"`), want: baseConfig(func(c *config.Config) { c.RateLimitHeaders = config.HeadersDraft })},
		{name: "rate_limit_headers x-ratelimit", input: withTop(`"rate_limit_headers": "x-ratelimit"`), want: baseConfig(func(c *config.Config) { c.RateLimitHeaders = config.HeadersXRateLimit })},
		{name: "rate_limit_headers capitalised", input: withTop(`"rate_limit_headers": "X-RateLimit"`), problems: []problem{{"rate_limit_headers", `"X-RateLimit" is not a rate-limit header style: rate_limit_headers is "off" (the default), "draft" (RateLimit and RateLimit-Policy) or "x-ratelimit" (X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset) (did you mean "x-ratelimit"?)`}}},
		{name: "rate_limit_headers boolean", input: withTop(`"rate_limit_headers": true`), problems: []problem{{"rate_limit_headers", `got true, want a string: rate_limit_headers is "off"`}}},

		// match
		{name: "match empty object", input: withMatch(`{}`), want: baseConfig(func(*config.Config) {})},
		{
			name:  "match every condition",
			input: withMatch(`{"path": {"prefix": "/api/"}, "methods": ["get", "Post", "PURGE"], "hosts": ["API.example.com", "localhost", "192.0.2.1"], "headers": [{"name": "x-tier", "exact": "free"}, {"name": "authorization", "present": true}, {"name": "x-debug", "present": false}, {"name": ":method", "exact": "GET"}]}`),
			want: baseRuleConfig(func(r *config.Rule) {
				r.Match = config.Match{
					Path:    &config.PathMatch{Prefix: "/api/"},
					Methods: []string{"GET", "POST", "PURGE"},
					Hosts:   []string{"api.example.com", "localhost", "192.0.2.1"},
					Headers: []config.HeaderMatch{
						{Name: "x-tier", Kind: config.HeaderExact, Value: "free"},
						{Name: "authorization", Kind: config.HeaderPresent},
						{Name: "x-debug", Kind: config.HeaderAbsent},
						{Name: ":method", Kind: config.HeaderExact, Value: "GET"},
					},
				}
			}),
		},
		{name: "match exact path", input: withMatch(`{"path": {"exact": "/login"}}`), want: baseRuleConfig(func(r *config.Rule) { r.Match.Path = &config.PathMatch{Exact: "/login"} })},
		{name: "match string", input: withMatch(`"/api"`), problems: []problem{{matchPath, `got the string "/api", want an object: match is an object with any of "path", "methods", "hosts" and "headers"`}}},
		{name: "match unknown field", input: withMatch(`{"paths": {"prefix": "/"}}`), problems: []problem{{matchPath, `unknown field "paths": known fields are path, methods, hosts, headers (did you mean "path"?)`}}},
		{name: "match methods empty", input: withMatch(`{"methods": []}`), problems: []problem{{"rules[0].match.methods", `an empty list is not allowed: add a method such as "GET", or remove "methods" to match every method`}}},
		{name: "match 17 methods", input: withMatch(`{"methods": [` + jsonStrings(17, "M%d") + `]}`), problems: []problem{{"rules[0].match.methods", "17 methods are too many: at most 16 are allowed"}}},
		{name: "match methods string", input: withMatch(`{"methods": "GET"}`), problems: []problem{{"rules[0].match.methods", `got the string "GET", want an array: methods is a list of 1 to 16 methods such as ["GET", "HEAD"]`}}},
		{
			name:  "duplicate methods",
			input: withMatch(`{"methods": ["GET", "POST", "get"]}`),
			problems: []problem{
				{"rules[0].match.methods[2]", `"get" is already listed at rules[0].match.methods[0] (methods are compared upper-cased): list each method once`},
			},
		},
		{
			name:  "invalid methods",
			input: withMatch(`{"methods": ["", "GET POST", 1, "` + strings.Repeat("M", 257) + `"]}`),
			problems: []problem{
				{"rules[0].match.methods[0]", `"" is not allowed: a method is 1 to 256 characters`},
				{"rules[0].match.methods[1]", `"GET POST" contains ' ', which is not allowed: a method is 1 to 256 characters of letters, digits and !#$%&'*+-.^_` + "`" + `|~ (an RFC 9110 token), e.g. "GET" or "POST"`},
				{"rules[0].match.methods[2]", "got the number 1, want a string"},
				{"rules[0].match.methods[3]", "is 257 bytes long"},
			},
		},
		{name: "host with port", input: withMatch(`{"hosts": ["api.example.com:8443"]}`), problems: []problem{{"rules[0].match.hosts[0]", `"api.example.com:8443" includes a port, but hosts are compared with the request's host without its port: write "api.example.com"`}}},
		{name: "host wildcard alone", input: withMatch(`{"hosts": ["*"]}`), problems: []problem{{"rules[0].match.hosts[0]", `"*" would match every host, but wildcards are not supported: remove "hosts" to match any host`}}},
		{name: "host wildcard", input: withMatch(`{"hosts": ["*.example.com"]}`), problems: []problem{{"rules[0].match.hosts[0]", `"*.example.com" contains '*', but wildcards are not supported: list each host name instead`}}},
		{name: "host URL", input: withMatch(`{"hosts": ["https://api.example.com/"]}`), problems: []problem{{"rules[0].match.hosts[0]", `"https://api.example.com/" is a URL: write only its host name`}}},
		{name: "host with underscore", input: withMatch(`{"hosts": ["api_v1.example.com"]}`), problems: []problem{{"rules[0].match.hosts[0]", `"api_v1.example.com" contains '_', which is not allowed: a host is a name of 1 to 253 letters, digits, '.' and '-', without a port`}}},
		{name: "host IPv6 literal", input: withMatch(`{"hosts": ["[::1]"]}`), problems: []problem{{"rules[0].match.hosts[0]", `"[::1]" contains '['`}}},
		{name: "host empty", input: withMatch(`{"hosts": [""]}`), problems: []problem{{"rules[0].match.hosts[0]", `"" is not allowed: a host is`}}},
		{name: "host too long", input: withMatch(`{"hosts": ["` + strings.Repeat("h", 254) + `"]}`), problems: []problem{{"rules[0].match.hosts[0]", "is 254 bytes long"}}},
		{name: "host of 253 characters", input: withMatch(`{"hosts": ["` + strings.Repeat("h", 253) + `"]}`), want: baseRuleConfig(func(r *config.Rule) { r.Match.Hosts = []string{strings.Repeat("h", 253)} })},
		{name: "duplicate hosts", input: withMatch(`{"hosts": ["a.example", "A.example"]}`), problems: []problem{{"rules[0].match.hosts[1]", `"A.example" is already listed at rules[0].match.hosts[0] (hosts are compared lower-cased): list each host once`}}},
		{name: "match 17 hosts", input: withMatch(`{"hosts": [` + jsonStrings(17, "h%d") + `]}`), problems: []problem{{"rules[0].match.hosts", "17 hosts are too many: at most 16 are allowed"}}},
		{name: "match 17 headers", input: withMatch(`{"headers": [` + repeatJoined(`{"name": "x", "present": true}`, 17) + `]}`), problems: []problem{{"rules[0].match.headers", "17 header matches are too many: at most 16 are allowed"}}},
		{name: "match headers empty", input: withMatch(`{"headers": []}`), problems: []problem{{"rules[0].match.headers", `an empty list is not allowed: add a header match such as {"name": "x-tier", "exact": "free"}, or remove "headers"`}}},

		// Header matches.
		{name: "header match exact empty value", input: withHeaderMatch(`{"name": "x-tier", "exact": ""}`), want: baseRuleConfig(func(r *config.Rule) {
			r.Match.Headers = []config.HeaderMatch{{Name: "x-tier", Kind: config.HeaderExact}}
		})},
		{name: "header match pseudo-header lower-cased", input: withHeaderMatch(`{"name": ":Scheme", "exact": "http"}`), want: baseRuleConfig(func(r *config.Rule) {
			r.Match.Headers = []config.HeaderMatch{{Name: ":scheme", Kind: config.HeaderExact, Value: "http"}}
		})},
		{name: "header match not an object", input: withHeaderMatch(`"x-tier"`), problems: []problem{{"rules[0].match.headers[0]", `got the string "x-tier", want an object: a header match is an object with "name" and exactly one of "exact" and "present"`}}},
		{name: "header match empty", input: withHeaderMatch(`{}`), problems: []problem{{"rules[0].match.headers[0]", `the header match is empty: a header match is an object with "name" and exactly one of "exact" and "present", e.g. {"name": "x-tier", "exact": "free"}, {"name": "authorization", "present": true} or {"name": "x-debug", "present": false}`}}},
		{name: "header match without name", input: withHeaderMatch(`{"exact": "free"}`), problems: []problem{{"rules[0].match.headers[0].name", `required field is missing: add "name": "x-tier"`}}},
		{name: "header match with neither", input: withHeaderMatch(`{"name": "x-tier"}`), problems: []problem{{"rules[0].match.headers[0]", `has neither "exact" nor "present": add "exact": "<value>" to compare the header's value, or "present": true or false to test whether it is there`}}},
		{
			name:  "header match with both",
			input: withHeaderMatch(`{"name": "x-tier", "exact": "free", "present": "yes"}`),
			problems: []problem{
				{"rules[0].match.headers[0]", `has both "exact" and "present": a header match takes exactly one`},
				{"rules[0].match.headers[0].present", `got the string "yes", want true or false: present is true (the header must be there, with any value) or false (it must be absent)`},
			},
		},
		{name: "header match misspelt field", input: withHeaderMatch(`{"name": "x-tier", "presnet": true}`), problems: []problem{{"rules[0].match.headers[0]", `unknown field "presnet": known fields are name, exact, present (did you mean "present"?)`}}},
		{name: "header match bad name", input: withHeaderMatch(`{"name": "x tier", "present": true}`), problems: []problem{{"rules[0].match.headers[0].name", `"x tier" contains ' ', which is not allowed: a header name is 1 to 256 characters`}}},
		{name: "header match unknown pseudo-header", input: withHeaderMatch(`{"name": ":status", "exact": "200"}`), problems: []problem{{"rules[0].match.headers[0].name", "is not a request pseudo-header"}}},
		{name: "header match value with CRLF", input: withHeaderMatch(`{"name": "x-a", "exact": "a\r\nb"}`), problems: []problem{{"rules[0].match.headers[0].exact", `"a\r\nb" contains '\r', which a request header value never contains, so it could never match`}}},
		{name: "header match value with spaces around", input: withHeaderMatch(`{"name": "x-a", "exact": "free "}`), problems: []problem{{"rules[0].match.headers[0].exact", `"free " starts or ends with a space or tab, which Envoy strips from header values`}}},
		{name: "header match value number", input: withHeaderMatch(`{"name": "x-a", "exact": 1}`), problems: []problem{{"rules[0].match.headers[0].exact", "got the number 1, want a string"}}},

		// New key parts.
		{name: "key part path", input: withKeyPart(`{"path": {}}`), want: withKeyPartConfig(config.KeyPart{Kind: config.KeyPath})},
		{name: "key part method", input: withKeyPart(`{"method": {}}`), want: withKeyPartConfig(config.KeyPart{Kind: config.KeyMethod})},
		{name: "key part authority", input: withKeyPart(`{"authority": {}}`), want: withKeyPartConfig(config.KeyPart{Kind: config.KeyAuthority})},
		{name: "key part query", input: withKeyPart(`{"query": "tenant_ID"}`), want: withKeyPartConfig(config.KeyPart{Kind: config.KeyQuery, Query: "tenant_ID"})},
		{name: "key part query of 256 bytes", input: withKeyPart(`{"query": "` + strings.Repeat("q", 256) + `"}`), want: withKeyPartConfig(config.KeyPart{Kind: config.KeyQuery, Query: strings.Repeat("q", 256)})},
		{name: "key part attribute", input: withKeyPart(`{"attribute": ["xds", "route_name"]}`), want: withKeyPartConfig(config.KeyPart{Kind: config.KeyAttribute, Attribute: []string{"xds", "route_name"}})},
		{
			name:  "key part attribute with 8 segments, dots and unicode",
			input: withKeyPart(`{"attribute": ["metadata", "filter_metadata", "envoy.filters.http.jwt_authn", "payload", "sub", "é", "7", "x"]}`),
			want:  withKeyPartConfig(config.KeyPart{Kind: config.KeyAttribute, Attribute: []string{"metadata", "filter_metadata", "envoy.filters.http.jwt_authn", "payload", "sub", "é", "7", "x"}}),
		},
		{name: "key part path with a value", input: withKeyPart(`{"path": "/api"}`), problems: []problem{{"rules[0].key[0].path", `got the string "/api", want an object: path takes no options yet, write "path": {}; to select requests by path, use the rule's "match": {"path": {"prefix": "/api/"}}`}}},
		{name: "key part method with a field", input: withKeyPart(`{"method": {"upper": true}}`), problems: []problem{{"rules[0].key[0].method", `unknown field "upper": method takes no fields yet, write "method": {}`}}},
		{name: "key part authority null", input: withKeyPart(`{"authority": null}`), problems: []problem{{"rules[0].key[0].authority", `got null, want an object: authority is an object such as {} (the host and its port) or {"strip_port": true} (the host alone); to select requests by host, use the rule's "match"`}}},
		{name: "key part authority strip_port not a bool", input: withKeyPart(`{"authority": {"strip_port": "yes"}}`), problems: []problem{{"rules[0].key[0].authority.strip_port", `got the string "yes", want true or false: strip_port is true (key on the host alone) or false (the default: the host and its port)`}}},
		{name: "key part authority unknown field", input: withKeyPart(`{"authority": {"port": false}}`), problems: []problem{{"rules[0].key[0].authority", `unknown field "port"`}}},
		{name: "key part with header and query", input: withKeyPart(`{"query": "tenant", "header": "x-api-key"}`), problems: []problem{{keyPartPath, `has both "query" and "header": a key part takes exactly one, so split them into two parts, e.g. [{"query": "tenant"}, {"header": "x-api-key"}]`}}},
		{
			name:  "key part with three fields",
			input: withKeyPart(`{"method": {}, "path": {}, "attribute": ["xds", ""]}`),
			problems: []problem{
				{keyPartPath, `has "method", "path" and "attribute": a key part takes exactly one, so split them into three parts, e.g. [{"method": {}}, {"path": {}}, {"attribute": ["xds", "route_name"]}]`},
				{"rules[0].key[0].attribute[1]", `"" is not allowed`},
			},
		},
		{name: "query empty", input: withKeyPart(`{"query": ""}`), problems: []problem{{"rules[0].key[0].query", `"" is not allowed: a query parameter name is 1 to 256 bytes without '&', '=', '#', '?', spaces or control characters, such as "tenant" for ?tenant=acme`}}},
		{name: "query too long", input: withKeyPart(`{"query": "` + strings.Repeat("q", 257) + `"}`), problems: []problem{{"rules[0].key[0].query", "is 257 bytes long"}}},
		{name: "query with =", input: withKeyPart(`{"query": "tenant=acme"}`), problems: []problem{{"rules[0].key[0].query", `"tenant=acme" contains '=', which is not allowed`}}},
		{name: "query with ?", input: withKeyPart(`{"query": "?tenant"}`), problems: []problem{{"rules[0].key[0].query", `contains '?'`}}},
		{name: "query with &", input: withKeyPart(`{"query": "a&b"}`), problems: []problem{{"rules[0].key[0].query", `contains '&'`}}},
		{name: "query with #", input: withKeyPart(`{"query": "a#b"}`), problems: []problem{{"rules[0].key[0].query", `contains '#'`}}},
		{name: "query with space", input: withKeyPart(`{"query": "a b"}`), problems: []problem{{"rules[0].key[0].query", `contains ' '`}}},
		{name: "query with tab", input: withKeyPart(`{"query": "a\tb"}`), problems: []problem{{"rules[0].key[0].query", `contains '\t'`}}},
		{name: "query number", input: withKeyPart(`{"query": 1}`), problems: []problem{{"rules[0].key[0].query", "got the number 1, want a string"}}},
		{name: "attribute dotted string", input: withKeyPart(`{"attribute": "xds.route_name"}`), problems: []problem{{"rules[0].key[0].attribute", `got the string "xds.route_name", want an array: attribute is a list of path segments, so write ["xds", "route_name"]`}}},
		{name: "attribute object", input: withKeyPart(`{"attribute": {}}`), problems: []problem{{"rules[0].key[0].attribute", `got an object, want an array: attribute is an Envoy attribute path, a list of 1 to 8 segments`}}},
		{name: "attribute empty", input: withKeyPart(`{"attribute": []}`), problems: []problem{{"rules[0].key[0].attribute", "an empty list is not allowed: add a segment"}}},
		{name: "attribute 9 segments", input: withKeyPart(`{"attribute": [` + jsonStrings(9, "s%d") + `]}`), problems: []problem{{"rules[0].key[0].attribute", "9 segments are too many: at most 8 are allowed"}}},
		{name: "attribute with empty segment", input: withKeyPart(`{"attribute": ["xds", ""]}`), problems: []problem{{"rules[0].key[0].attribute[1]", `"" is not allowed: every segment names one step of the path`}}},
		{name: "attribute with NUL", input: withKeyPart(`{"attribute": ["xds", "route\u0000name"]}`), problems: []problem{{"rules[0].key[0].attribute[1]", `"route\x00name" contains '\x00', which separates the segments when the path is passed to Envoy`}}},
		{name: "attribute segment too long", input: withKeyPart(`{"attribute": ["` + strings.Repeat("s", 257) + `"]}`), problems: []problem{{"rules[0].key[0].attribute[0]", "is 257 bytes long"}}},
		{name: "attribute segment number", input: withKeyPart(`{"attribute": ["source", 1]}`), problems: []problem{{"rules[0].key[0].attribute[1]", "got the number 1, want a string"}}},

		// missing_key
		{name: "missing_key empty object keeps the defaults", input: withMissingKey(`{}`), want: userKeyRuleConfig(config.MissingKey{Action: config.MissingKeyReject, Status: 401})},
		{name: "missing_key reject with status", input: withMissingKey(`{"action": "reject", "status": 403}`), want: userKeyRuleConfig(config.MissingKey{Action: config.MissingKeyReject, Status: 403})},
		{name: "missing_key status alone", input: withMissingKey(`{"status": 400}`), want: userKeyRuleConfig(config.MissingKey{Action: config.MissingKeyReject, Status: 400})},
		{name: "missing_key allow", input: withMissingKey(`{"action": "allow"}`), want: userKeyRuleConfig(config.MissingKey{Action: config.MissingKeyAllow, Status: 401})},
		{
			name:  "missing_key fallback",
			input: withMissingKey(`{"action": "fallback", "status": 429, "key": [{"client_ip": {}}, {"header": "X-Tenant"}]}`),
			want: userKeyRuleConfig(config.MissingKey{
				Action:   config.MissingKeyFallback,
				Status:   429,
				Fallback: []config.KeyPart{{Kind: config.KeyClientIP}, {Kind: config.KeyHeader, Header: "x-tenant"}},
			}),
		},
		{name: "missing_key not an object", input: withMissingKey(`"allow"`), problems: []problem{{missingKeyPath, `got the string "allow", want an object: missing_key is an object such as {"action": "allow"}`}}},
		{name: "missing_key unknown field", input: withMissingKey(`{"actoin": "allow"}`), problems: []problem{{missingKeyPath, `unknown field "actoin": known fields are action, status, key (did you mean "action"?)`}}},
		{name: "missing_key unknown action", input: withMissingKey(`{"action": "deny"}`), problems: []problem{{"rules[0].missing_key.action", `"deny" is not a missing-key action: action is "reject" (answer with status, the default), "allow" (let the request through unlimited by this rule) or "fallback" (use the fallback key instead)`}}},
		{name: "missing_key action misspelt", input: withMissingKey(`{"action": "fallbak"}`), problems: []problem{{"rules[0].missing_key.action", `(did you mean "fallback"?)`}}},
		{name: "missing_key fallback without key", input: withMissingKey(`{"action": "fallback"}`), problems: []problem{{"rules[0].missing_key.key", `required field is missing with "action": "fallback": add "key": [{"client_ip": {}}], the key used for requests without the rule's key`}}},
		{name: "missing_key key without fallback", input: withMissingKey(`{"key": [{"client_ip": {}}]}`), problems: []problem{{"rules[0].missing_key.key", `key is used only with "action": "fallback" (the default action is "reject"): remove it, or add "action": "fallback" so that requests without the rule's key are limited on this key instead`}}},
		{name: "missing_key key with reject", input: withMissingKey(`{"action": "reject", "key": [{"client_ip": {}}]}`), problems: []problem{{"rules[0].missing_key.key", `key is used only with "action": "fallback": remove it`}}},
		{
			name:  "missing_key key with allow, itself invalid",
			input: withMissingKey(`{"action": "allow", "key": [{}]}`),
			problems: []problem{
				{"rules[0].missing_key.key", `key is used only with "action": "fallback"`},
				{"rules[0].missing_key.key[0]", "the key part is empty"},
			},
		},
		{name: "missing_key status with allow", input: withMissingKey(`{"action": "allow", "status": 403}`), problems: []problem{{"rules[0].missing_key.status", `status is not used with "action": "allow", which lets the request through: remove status, or use "action": "reject" or "fallback"`}}},
		{name: "missing_key status 600", input: withMissingKey(`{"status": 600}`), problems: []problem{{"rules[0].missing_key.status", "600 is too large: status is the HTTP status sent to a request without the rule's key, a whole number from 400 to 599 (default 401)"}}},
		{name: "missing_key status 302", input: withMissingKey(`{"status": 302}`), problems: []problem{{"rules[0].missing_key.status", "302 is not allowed"}}},
		{name: "missing_key fallback key invalid", input: withMissingKey(`{"action": "fallback", "key": []}`), problems: []problem{{"rules[0].missing_key.key", "an empty list is not allowed: add a part such as"}}},
		{name: "missing_key fallback key same as the rule's", input: withMissingKey(`{"action": "fallback", "key": [{"header": "X-User"}]}`), problems: []problem{{"rules[0].missing_key.key", "the fallback key includes every part of the rule's key, so it is missing whenever the rule's key is"}}},
		{name: "missing_key fallback key including the rule's", input: withMissingKey(`{"action": "fallback", "key": [{"client_ip": {}}, {"header": "x-user"}]}`), problems: []problem{{"rules[0].missing_key.key", "the fallback key includes every part of the rule's key"}}},
		{
			name:     "missing_key with an invalid action still checks the key's shape",
			input:    withMissingKey(`{"action": 1, "key": "client_ip"}`),
			problems: []problem{{"rules[0].missing_key.action", "got the number 1, want a string"}, {"rules[0].missing_key.key", `got the string "client_ip", want an array`}},
		},

		// cost
		{name: "cost 0", input: withRuleMembers(`"cost": 0`), want: baseRuleConfig(func(r *config.Rule) { r.Cost.Units = 0 })},
		{name: "cost equal to the capacity", input: withRuleMembers(`"cost": 10`), want: baseRuleConfig(func(r *config.Rule) { r.Cost.Units = 10 })},
		{name: "cost from a header", input: withRuleMembers(`"cost": {"header": "X-Cost", "max": 10, "default": 2}`), want: baseRuleConfig(func(r *config.Rule) { r.Cost = config.Cost{Units: 2, Header: "x-cost", Max: 10} })},
		{name: "cost default 0 would make requests without the header free", input: withRuleMembers(`"cost": {"header": "x-cost", "max": 10, "default": 0}`), problems: []problem{{"rules[0].cost.default", "0 is not allowed: default is the cost of a request without the header, a whole number from 1 to max (default 1): with 0 every request that leaves the header out would be free"}}},
		{name: "cost from a header with default 1", input: withRuleMembers(`"cost": {"header": "x-cost", "max": 5}`), want: baseRuleConfig(func(r *config.Rule) { r.Cost = config.Cost{Units: 1, Header: "x-cost", Max: 5} })},
		{name: "cost default equal to max", input: withRuleMembers(`"cost": {"header": "x-cost", "max": 5, "default": 5}`), want: baseRuleConfig(func(r *config.Rule) { r.Cost = config.Cost{Units: 5, Header: "x-cost", Max: 5} })},
		{name: "cost negative", input: withRuleMembers(`"cost": -1`), problems: []problem{{costPath, "-1 is not allowed: cost is how many units a request takes from each limit: a whole number from 0 to 1000000000 (default 1)"}}},
		{name: "cost fraction", input: withRuleMembers(`"cost": 0.5`), problems: []problem{{costPath, "0.5 is not a whole number"}}},
		{name: "cost too large", input: withRuleMembers(`"cost": 1000000001`), problems: []problem{{costPath, "1000000001 is too large"}}},
		{name: "cost string", input: withRuleMembers(`"cost": "2"`), problems: []problem{{costPath, `got the string "2", want a number or an object: cost is how many units`}}},
		{name: "cost null", input: withRuleMembers(`"cost": null`), problems: []problem{{costPath, "got null, want a number or an object"}}},
		{name: "cost object empty", input: withRuleMembers(`"cost": {}`), problems: []problem{{"rules[0].cost.header", `required field is missing: add "header": "x-cost"`}, {"rules[0].cost.max", `required field is missing: add "max": 100`}}},
		{name: "cost object unknown field", input: withRuleMembers(`"cost": {"header": "x-cost", "max": 5, "min": 1}`), problems: []problem{{costPath, `unknown field "min": known fields are header, max, default`}}},
		{name: "cost max 0", input: withRuleMembers(`"cost": {"header": "x-cost", "max": 0}`), problems: []problem{{"rules[0].cost.max", "0 is not allowed: max is the largest cost a request can declare"}}},
		{name: "cost default above max", input: withRuleMembers(`"cost": {"header": "x-cost", "max": 3, "default": 4}`), problems: []problem{{"rules[0].cost.default", "4 is above max 3: default is the cost of a request without the header, a whole number from 1 to max (default 1)"}}},
		{name: "cost default negative", input: withRuleMembers(`"cost": {"header": "x-cost", "max": 3, "default": -1}`), problems: []problem{{"rules[0].cost.default", "-1 is not allowed"}}},
		{name: "cost header invalid", input: withRuleMembers(`"cost": {"header": "x cost", "max": 3}`), problems: []problem{{"rules[0].cost.header", `"x cost" contains ' '`}}},
		{
			name:     "cost above the smallest capacity",
			input:    withRule(`{"name": "r", "key": [{"client_ip": {}}], "cost": 6, "limits": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}, {"algorithm": "fixed_window", "capacity": 5, "window": "1m"}, {"capacity": 8, "refill_tokens": 1, "refill_interval": "1s"}]}`),
			problems: []problem{{costPath, "6 is above the capacity 5 of rules[0].limits[1], so no request could ever be admitted: use a cost of at most 5 or raise that limit's capacity"}},
		},
		{
			name:     "cost max above the smallest capacity",
			input:    withRuleMembers(`"cost": {"header": "x-cost", "max": 11}`),
			problems: []problem{{costPath, "max 11 is above the capacity 10 of rules[0].limits[0], so a request declaring that cost could never be admitted: use a max of at most 10 or raise that limit's capacity"}},
		},
		{
			name:  "cost max compared even with an invalid header",
			input: withRuleMembers(`"cost": {"header": "x cost", "max": 11, "default": 2}`),
			problems: []problem{
				{"rules[0].cost.header", `"x cost" contains ' '`},
				{costPath, "max 11 is above the capacity 10 of rules[0].limits[0]"},
			},
		},
		{
			name:     "cost compared only with valid capacities",
			input:    withRule(`{"name": "r", "key": [{"client_ip": {}}], "cost": 6, "limits": [{"capacity": 0, "refill_tokens": 1, "refill_interval": "1s"}, {"capacity": 7, "refill_tokens": 1, "refill_interval": "1s"}]}`),
			problems: []problem{{"rules[0].limits[0].capacity", "0 is not allowed"}},
		},

		// Limit algorithms.
		{name: "token_bucket explicit", input: withLimit(`{"algorithm": "token_bucket", "capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}`), want: oneRule(config.Limit{Algorithm: config.TokenBucket, Capacity: 3, RefillTokens: 1, RefillInterval: time.Second})},
		{name: "fixed_window", input: withLimit(`{"algorithm": "fixed_window", "capacity": 100, "window": "1m"}`), want: oneRule(config.Limit{Algorithm: config.FixedWindow, Capacity: 100, Window: time.Minute})},
		{name: "sliding_window", input: withLimit(`{"window": "24h", "capacity": 1e9, "algorithm": "sliding_window"}`), want: oneRule(config.Limit{Algorithm: config.SlidingWindow, Capacity: 1_000_000_000, Window: 24 * time.Hour})},
		{name: "window of 1ms", input: withLimit(`{"algorithm": "fixed_window", "capacity": 1, "window": "1ms"}`), want: oneRule(config.Limit{Algorithm: config.FixedWindow, Capacity: 1, Window: time.Millisecond})},
		{
			name:     "window on a token bucket by default",
			input:    withLimit(`{"capacity": 100, "window": "1m"}`),
			problems: []problem{{windowPath, `window belongs to the window algorithms, "fixed_window" and "sliding_window", but this limit is a token bucket (the default algorithm): add "algorithm": "fixed_window" or "sliding_window"`}},
		},
		{
			name:     "window on a token bucket with refill fields",
			input:    withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s", "window": "1m"}`),
			problems: []problem{{windowPath, `but this limit is a token bucket (the default algorithm): remove window, or set "algorithm": "fixed_window" or "sliding_window" and remove refill_tokens and refill_interval`}},
		},
		{
			name:  "window on an explicit token bucket",
			input: withLimit(`{"algorithm": "token_bucket", "capacity": 1, "window": "1m"}`),
			problems: []problem{
				{refillTokensPath, "required field is missing"},
				{refillIntervalPath, "required field is missing"},
				{windowPath, `window belongs to the window algorithms, "fixed_window" and "sliding_window", but this limit is a token bucket: remove window`},
			},
		},
		{
			name:  "refill fields on a window",
			input: withLimit(`{"algorithm": "fixed_window", "capacity": 10, "refill_tokens": 1, "refill_interval": "1s", "window": "1s"}`),
			problems: []problem{
				{refillTokensPath, `refill_tokens belongs to the "token_bucket" algorithm, but this limit is a "fixed_window", which admits capacity units per window: remove it, or remove "algorithm" to use a token bucket`},
				{refillIntervalPath, `refill_interval belongs to the "token_bucket" algorithm, but this limit is a "fixed_window"`},
			},
		},
		{
			name:  "window limit empty",
			input: withLimit(`{"algorithm": "sliding_window"}`),
			problems: []problem{
				{capacityPath, `required field is missing: add "capacity": 100`},
				{windowPath, `required field is missing: add "window": "1m"`},
			},
		},
		{name: "window capacity 0", input: withLimit(`{"algorithm": "fixed_window", "capacity": 0, "window": "1s"}`), problems: []problem{{capacityPath, "0 is not allowed: capacity is how many units each window admits, a whole number from 1 to 1000000000"}}},
		{name: "window bare number", input: withLimit(`{"algorithm": "fixed_window", "capacity": 1, "window": 60}`), problems: []problem{{windowPath, `got the number 60, want a string: quote the duration and give it a unit`}}},
		{name: "window too short", input: withLimit(`{"algorithm": "fixed_window", "capacity": 1, "window": "0.1ms"}`), problems: []problem{{windowPath, `"0.1ms" is shorter than 1ms: window is a duration from "1ms" to "366d" inclusive`}}},
		{name: "window in microseconds", input: withLimit(`{"algorithm": "fixed_window", "capacity": 1, "window": "1500µs"}`), problems: []problem{{windowPath, `"1500µs" is not a valid duration (the units are ms, s, m, h, d and w): window is a duration`}}},
		{name: "window too long", input: withLimit(`{"algorithm": "sliding_window", "capacity": 1, "window": "53w"}`), problems: []problem{{windowPath, `"53w" is longer than "366d"`}}},
		{name: "window invalid", input: withLimit(`{"algorithm": "sliding_window", "capacity": 1, "window": "a minute"}`), problems: []problem{{windowPath, `"a minute" is not a valid duration: window is a duration`}}},
		{name: "window no overflow check", input: withLimit(`{"algorithm": "fixed_window", "capacity": 1000000000, "window": "24h"}`), want: oneRule(config.Limit{Algorithm: config.FixedWindow, Capacity: 1_000_000_000, Window: 24 * time.Hour})},
		{
			name:  "unknown algorithm",
			input: withLimit(`{"algorithm": "leaky_bucket", "capacity": 0, "window": "1m", "burst": 1}`),
			problems: []problem{
				{limitPath, `unknown field "burst"`},
				{"rules[0].limits[0].algorithm", `"leaky_bucket" is not an algorithm: algorithm is "token_bucket" (the default; uses capacity, refill_tokens and refill_interval), "fixed_window" or "sliding_window" (both use capacity and window)`},
				{capacityPath, "0 is not allowed: capacity is a whole number from 1 to 1000000000"},
			},
		},
		{name: "algorithm misspelt", input: withLimit(`{"algorithm": "fixed-window", "capacity": 1, "window": "1s"}`), problems: []problem{{"rules[0].limits[0].algorithm", `(did you mean "fixed_window"?)`}}},
		{name: "algorithm number", input: withLimit(`{"algorithm": 1, "capacity": 1}`), problems: []problem{{"rules[0].limits[0].algorithm", `got the number 1, want a string: algorithm is "token_bucket"`}}},

		// Everything at once.
		{name: "kitchen sink", input: kitchenSinkJSON, want: kitchenSinkConfig()},

		// Several problems reported together, in document order.
		{
			name: "multiple problems at once",
			input: `{
				"rules": [
					{"name": "a b", "key": [{"header": "x api"}, {}], "limits": [{"capacity": 0, "refill_tokens": 2.5, "refill_interval": 1}]},
					{"name": "ok", "key": [{"client_ip": {"x": 1}}], "limits": [{"capacity": "10", "refill_tokens": 1, "refill_interval": "1s", "burst": 3}]}
				],
				"failure_mode": "sometimes",
				"extra": true
			}`,
			problems: []problem{
				{"", `unknown field "extra"`},
				{"rules[0].name", `"a b" contains ' '`},
				{headerPath, `"x api" contains ' '`},
				{"rules[0].key[1]", "the key part is empty"},
				{capacityPath, "0 is not allowed"},
				{refillTokensPath, "2.5 is not a whole number"},
				{refillIntervalPath, "got the number 1, want a string"},
				{"rules[1].key[0].client_ip", `unknown field "x"`},
				{"rules[1].limits[0]", `unknown field "burst"`},
				{"rules[1].limits[0].capacity", `got the string "10", want a number`},
				{"failure_mode", `"sometimes" is not a failure mode`},
			},
		},
	}

	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) { checkParse(t, test.input, test.want, test.problems) })
	}
}

// checkParse parses input and holds the result to want, or, when problems is not nil, the error
// to those problems in order (each its field and a part of its message).
func checkParse(t *testing.T, input string, want *config.Config, problems []problem) {
	t.Helper()
	got, err := config.Parse([]byte(input))
	if problems == nil {
		if err != nil {
			t.Fatalf("Parse: unexpected error: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Parse:\n got %+v\nwant %+v", got, want)
		}
		return
	}
	if got != nil {
		t.Errorf("Parse returned a Config along with an error: %+v", got)
	}
	var parseErr *config.Error
	if !errors.As(err, &parseErr) {
		t.Fatalf("Parse: got error %v (%T), want *config.Error", err, err)
	}
	if len(parseErr.Problems) != len(problems) {
		t.Fatalf("Parse: got %d problems, want %d:\n%s", len(parseErr.Problems), len(problems), formatProblems(parseErr.Problems))
	}
	for i, want := range problems {
		gotProblem := parseErr.Problems[i]
		if gotProblem.Field != want.field || !strings.Contains(gotProblem.Message, want.contains) {
			t.Errorf("problem %d:\n got field %q message %q\nwant field %q message containing %q",
				i, gotProblem.Field, gotProblem.Message, want.field, want.contains)
		}
	}
}

// duplicateNameProblems lists the problems of n identical rules named "r"
// beyond the first.
func duplicateNameProblems(n int) []problem {
	var problems []problem
	for i := 1; i < n; i++ {
		problems = append(problems, problem{"rules[" + strconv.Itoa(i) + "].name", `"r" is already used by rules[0]`})
	}
	return problems
}

func formatProblems(problems []config.Problem) string {
	var lines []string
	for _, p := range problems {
		lines = append(lines, "  "+p.String())
	}
	return strings.Join(lines, "\n")
}

func TestErrorMessageReadsWell(t *testing.T) {
	input := `{
		"rules": [
			{"name": "per-api-key", "key": [{"header": "x-api-key"}], "limits": [{"capcity": 3, "refill_tokens": 1, "refill_interval": "1s"}]},
			{"name": "per-api-key", "key": [{"header": "x-api-key", "client_ip": {}}], "limits": [{"capacity": 0, "refill_tokens": 1, "refill_interval": 5}]}
		]
	}`
	_, err := config.Parse([]byte(input))
	if err == nil {
		t.Fatal("Parse: want an error")
	}
	want := `rules[0].limits[0]: unknown field "capcity": known fields are algorithm, capacity, refill_tokens, refill_interval, window, calendar, max_in_flight, slot_timeout (did you mean "capacity"?); ` +
		`rules[0].limits[0].capacity: required field is missing: add "capacity": 10; ` +
		`rules[1].name: "per-api-key" is already used by rules[0]: rule names must be unique; ` +
		`rules[1].key[0]: has both "header" and "client_ip": a key part takes exactly one, so split them into two parts, e.g. [{"header": "x-api-key"}, {"client_ip": {}}]; ` +
		`rules[1].limits[0].capacity: 0 is not allowed: capacity is the burst size, a whole number from 1 to 1000000000; ` +
		`rules[1].limits[0].refill_interval: got the number 5, want a string: quote the duration and give it a unit, e.g. "1s" or "500ms"`
	if got := err.Error(); got != want {
		t.Errorf("Error():\n got %s\nwant %s", got, want)
	}
}

func TestTooManyProblemsAreCounted(t *testing.T) {
	// 150 rules named "r": one problem for the count, 149 for the repeated names.
	input := `{"rules": [` + repeatJoined(`{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`, 150) + `]}`
	_, err := config.Parse([]byte(input))
	var parseErr *config.Error
	if !errors.As(err, &parseErr) {
		t.Fatalf("Parse: got %v, want *config.Error", err)
	}
	if len(parseErr.Problems) != 101 {
		t.Fatalf("got %d problems, want 100 listed and 1 summary", len(parseErr.Problems))
	}
	last := parseErr.Problems[100]
	if last.Field != "" || last.Message != "and 50 more problems not listed: fix the ones above and check again" {
		t.Errorf("summary problem: got %q", last.String())
	}
}

func TestProblemString(t *testing.T) {
	if got := (config.Problem{Message: "the configuration is empty"}).String(); got != "the configuration is empty" {
		t.Errorf("document problem: got %q", got)
	}
	if got := (config.Problem{Field: "rules", Message: "m"}).String(); got != "rules: m" {
		t.Errorf("field problem: got %q", got)
	}
}

func TestFailureModeString(t *testing.T) {
	for mode, want := range map[config.FailureMode]string{
		config.FailureAllow:    "allow",
		config.FailureDeny:     "deny",
		config.FailureMode(7):  "FailureMode(7)",
		config.FailureMode(42): "FailureMode(42)",
	} {
		if got := mode.String(); got != want {
			t.Errorf("FailureMode(%d).String() = %q, want %q", uint8(mode), got, want)
		}
	}
}

func TestParseErrorIsNilInterfaceOnSuccess(t *testing.T) {
	cfg, err := config.Parse([]byte(exampleJSON))
	if err != nil || cfg == nil {
		t.Fatalf("Parse(example) = %v, %v; want a Config and a nil error", cfg, err)
	}
}

// repeatHeaders returns n response header members "x-h0": "v0", "x-h1": "v1", ...
func repeatHeaders(n int) string {
	members := make([]string, n)
	for i := range members {
		members[i] = `"X-H` + strconv.Itoa(i) + `": "v` + strconv.Itoa(i) + `"`
	}
	return strings.Join(members, ", ")
}

// headerPairs is the Response.Headers of repeatHeaders(n).
func headerPairs(n int) [][2]string {
	pairs := make([][2]string, n)
	for i := range pairs {
		pairs[i] = [2]string{"x-h" + strconv.Itoa(i), "v" + strconv.Itoa(i)}
	}
	return pairs
}

// kitchenSinkJSON uses every field of the schema.
const kitchenSinkJSON = `{
  "failure_mode": "deny",
  "client_ip": {"xff_num_trusted_hops": 1},
  "exempt": {
    "paths": [{"exact": "/healthz"}, {"prefix": "/internal/"}],
    "client_cidrs": ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7", "10.20.0.0/16"],
    "headers": [{"name": "X-Internal-Token", "present": true}, {"name": "x-probe", "exact": "k8s"}]
  },
  "shadow": false,
  "response": {
    "status": 503,
    "body": "slow down, retry in {retry_after} s\n",
    "content_type": "text/plain",
    "headers": {"x-served-by": "tollgate", "Cache-Control": "no-store"}
  },
  "rate_limit_headers": "draft",
  "rules": [
    {
      "name": "api-writes",
      "match": {
        "path": {"prefix": "/api/"},
        "methods": ["POST", "put", "DELETE"],
        "hosts": ["API.example.com", "api.example.org"],
        "headers": [{"name": "x-tier", "exact": "free"}, {"name": "x-debug", "present": false}]
      },
      "key": [{"header": "x-user"}, {"query": "tenant"}],
      "missing_key": {"action": "fallback", "status": 429, "key": [{"client_ip": {}}]},
      "limits": [
        {"capacity": 20, "refill_tokens": 10, "refill_interval": "1s"},
        {"algorithm": "fixed_window", "capacity": 1000, "window": "1h"},
        {"algorithm": "sliding_window", "capacity": 100, "window": "1m"}
      ],
      "cost": {"header": "x-cost", "max": 20, "default": 2},
      "shadow": true
    },
    {
      "name": "per-route",
      "match": {"path": {"exact": "/login"}},
      "key": [{"path": {}}, {"method": {}}, {"authority": {}}, {"attribute": ["xds", "route_name"]}],
      "missing_key": {"action": "allow"},
      "limits": [{"algorithm": "token_bucket", "capacity": 5, "refill_tokens": 1, "refill_interval": "12s"}],
      "cost": 5
    },
    {
      "name": "anonymous",
      "key": [{"header": "authorization"}],
      "missing_key": {"action": "reject", "status": 401},
      "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1ms"}],
      "cost": 0
    }
  ]
}`

// kitchenSinkConfig is the Config of kitchenSinkJSON.
func kitchenSinkConfig() *config.Config {
	return &config.Config{
		FailureMode: config.FailureDeny,
		KeyTable:    defaultKeyTable,
		ClientIP:    config.ClientIP{XFFNumTrustedHops: 1, IPv4Prefix: 32, IPv6Prefix: 128},
		Exempt: config.Exemptions{
			Paths: []config.PathMatch{{Exact: "/healthz"}, {Prefix: "/internal/"}},
			ClientCIDRs: []netaddr.Prefix{
				mustPrefix("10.0.0.0/8"),
				mustPrefix("2001:db8::/32"),
				mustPrefix("192.0.2.7/32"),
				mustPrefix("10.20.0.0/16"),
			},
			Headers: []config.HeaderMatch{
				{Name: "x-internal-token", Kind: config.HeaderPresent},
				{Name: "x-probe", Kind: config.HeaderExact, Value: "k8s"},
			},
		},
		Response: config.Response{
			Status:      503,
			Body:        "slow down, retry in {retry_after} s\n",
			ContentType: "text/plain",
			Headers:     [][2]string{{"x-served-by", "tollgate"}, {"cache-control", "no-store"}},
		},
		RateLimitHeaders: config.HeadersDraft,
		Rules: []config.Rule{
			{
				Name: "api-writes",
				Match: config.Match{
					Path:    &config.PathMatch{Prefix: "/api/"},
					Methods: []string{"POST", "PUT", "DELETE"},
					Hosts:   []string{"api.example.com", "api.example.org"},
					Headers: []config.HeaderMatch{
						{Name: "x-tier", Kind: config.HeaderExact, Value: "free"},
						{Name: "x-debug", Kind: config.HeaderAbsent},
					},
				},
				Key: []config.KeyPart{{Kind: config.KeyHeader, Header: "x-user"}, {Kind: config.KeyQuery, Query: "tenant"}},
				MissingKey: config.MissingKey{
					Action:   config.MissingKeyFallback,
					Status:   429,
					Fallback: []config.KeyPart{{Kind: config.KeyClientIP}},
				},
				Limits: []config.Limit{
					{Algorithm: config.TokenBucket, Capacity: 20, RefillTokens: 10, RefillInterval: time.Second},
					{Algorithm: config.FixedWindow, Capacity: 1000, Window: time.Hour},
					{Algorithm: config.SlidingWindow, Capacity: 100, Window: time.Minute},
				},
				Cost:   config.Cost{Units: 2, Header: "x-cost", Max: 20},
				Shadow: true,
			},
			{
				Name:  "per-route",
				Match: config.Match{Path: &config.PathMatch{Exact: "/login"}},
				Key: []config.KeyPart{
					{Kind: config.KeyPath},
					{Kind: config.KeyMethod},
					{Kind: config.KeyAuthority},
					{Kind: config.KeyAttribute, Attribute: []string{"xds", "route_name"}},
				},
				MissingKey: config.MissingKey{Action: config.MissingKeyAllow, Status: 401},
				Limits:     []config.Limit{{Capacity: 5, RefillTokens: 1, RefillInterval: 12 * time.Second}},
				Cost:       config.Cost{Units: 5},
			},
			{
				Name:       "anonymous",
				Key:        []config.KeyPart{{Kind: config.KeyHeader, Header: "authorization"}},
				MissingKey: config.MissingKey{Action: config.MissingKeyReject, Status: 401},
				Limits:     []config.Limit{{Capacity: 1, RefillTokens: 1, RefillInterval: time.Millisecond}},
				Cost:       config.Cost{Units: 0},
			},
		},
	}
}

func TestDefaultsAreFilledIn(t *testing.T) {
	cfg, err := config.Parse([]byte(exampleJSON))
	if err != nil {
		t.Fatal(err)
	}
	rule := cfg.Rules[0]
	if rule.Cost.Units != 1 || rule.Cost.Header != "" || rule.Cost.Max != 0 {
		t.Errorf("default cost: got %+v, want 1 unit", rule.Cost)
	}
	if rule.MissingKey.Action != config.MissingKeyReject || rule.MissingKey.Status != 401 || rule.MissingKey.Fallback != nil {
		t.Errorf("default missing_key: got %+v, want reject with 401", rule.MissingKey)
	}
	if rule.Limits[0].Algorithm != config.TokenBucket {
		t.Errorf("default algorithm: got %v, want token_bucket", rule.Limits[0].Algorithm)
	}
	if rule.Shadow || cfg.Shadow {
		t.Error("shadow is on by default")
	}
	if rule.Match.Path != nil || rule.Match.Methods != nil || rule.Match.Hosts != nil || rule.Match.Headers != nil {
		t.Errorf("default match: got %+v, want every request", rule.Match)
	}
	want := config.Response{Status: 429, Body: "Too Many Requests: retry after {retry_after} s\n", ContentType: "text/plain; charset=utf-8"}
	if !reflect.DeepEqual(cfg.Response, want) {
		t.Errorf("default response: got %+v, want %+v", cfg.Response, want)
	}
	if cfg.RateLimitHeaders != config.HeadersOff || cfg.ClientIP.XFFNumTrustedHops != 0 {
		t.Errorf("default rate_limit_headers %v, client_ip %+v", cfg.RateLimitHeaders, cfg.ClientIP)
	}
	if cfg.Exempt.Paths != nil || cfg.Exempt.ClientCIDRs != nil || cfg.Exempt.Headers != nil {
		t.Errorf("default exempt: got %+v, want none", cfg.Exempt)
	}

	// Given missing_key and response objects keep the defaults of the fields they leave out.
	cfg, err = config.Parse([]byte(`{"rules": [{"name": "r", "key": [{"header": "x"}], "missing_key": {"action": "fallback", "key": [{"client_ip": {}}]},
		"limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}], "cost": {"header": "x-cost", "max": 1}}],
		"response": {"headers": {"x-a": "b"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Rules[0].MissingKey.Status; got != 401 {
		t.Errorf("fallback status: got %d, want 401", got)
	}
	if got := cfg.Rules[0].Cost.Units; got != 1 {
		t.Errorf("header cost default: got %d, want 1", got)
	}
	if cfg.Response.Status != 429 || cfg.Response.Body != want.Body || cfg.Response.ContentType != want.ContentType {
		t.Errorf("response with headers only: got %+v", cfg.Response)
	}
}

func TestErrorMessageReadsWellForNewFields(t *testing.T) {
	input := `{
		"rules": [
			{"name": "r", "key": [{"header": "x-user", "query": "tenant"}], "missing_key": {"action": "fallback"},
			 "limits": [{"algorithm": "fixed_window", "capacity": 5, "refill_interval": "1s", "window": "1m"}], "cost": 6}
		],
		"exempt": {"client_cidrs": ["10.0.0.0/33", "192.0.2.7"]},
		"response": {"headers": {"Retry-After": "5", "x-a": "1\r\nx-b: 2"}},
		"rate_limit_headers": "ietf"
	}`
	_, err := config.Parse([]byte(input))
	if err == nil {
		t.Fatal("Parse: want an error")
	}
	want := `rules[0].key[0]: has both "header" and "query": a key part takes exactly one, so split them into two parts, e.g. [{"header": "x-api-key"}, {"query": "tenant"}]; ` +
		`rules[0].missing_key.key: required field is missing with "action": "fallback": add "key": [{"client_ip": {}}], the key used for requests without the rule's key; ` +
		`rules[0].limits[0].refill_interval: refill_interval belongs to the "token_bucket" algorithm, but this limit is a "fixed_window", which admits capacity units per window: remove it, or remove "algorithm" to use a token bucket; ` +
		`rules[0].cost: 6 is above the capacity 5 of rules[0].limits[0], so no request could ever be admitted: use a cost of at most 5 or raise that limit's capacity; ` +
		`exempt.client_cidrs[0]: "10.0.0.0/33" is not a valid CIDR: the prefix length after '/' must be a whole number from 0 to 32 for an IPv4 address, written without leading zeros: a client CIDR is an address range such as "10.0.0.0/8" or "2001:db8::/32", or a single address such as "192.0.2.7"; ` +
		`response.headers.Retry-After: "Retry-After" is a header the filter sets itself: remove it (the filter sets it to the seconds until a retry can succeed); ` +
		`response.headers.x-a: "1\r\nx-b: 2" contains '\r', which would end the header early and let the rest of the value inject other headers or a body (response header injection): a response header value is a string of at most 1024 bytes without CR, LF or NUL, e.g. "tollgate"; ` +
		`rate_limit_headers: "ietf" is not a rate-limit header style: rate_limit_headers is "off" (the default), "draft" (RateLimit and RateLimit-Policy) or "x-ratelimit" (X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset)`
	if got := err.Error(); got != want {
		t.Errorf("Error():\n got %s\nwant %s", got, want)
	}
}

func TestEnumStrings(t *testing.T) {
	tests := []struct {
		value fmtStringer
		want  string
	}{
		{config.TokenBucket, "token_bucket"},
		{config.FixedWindow, "fixed_window"},
		{config.SlidingWindow, "sliding_window"},
		{config.Algorithm(9), "Algorithm(9)"},
		{config.MissingKeyReject, "reject"},
		{config.MissingKeyAllow, "allow"},
		{config.MissingKeyFallback, "fallback"},
		{config.MissingKeyAction(9), "MissingKeyAction(9)"},
		{config.HeadersOff, "off"},
		{config.HeadersDraft, "draft"},
		{config.HeadersXRateLimit, "x-ratelimit"},
		{config.HeaderStyle(9), "HeaderStyle(9)"},
		{config.HeaderPresent, "present"},
		{config.HeaderAbsent, "absent"},
		{config.HeaderExact, "exact"},
		{config.HeaderMatchKind(0), "HeaderMatchKind(0)"},
		{config.HeaderMatchKind(9), "HeaderMatchKind(9)"},
		{config.KeyHeader, "header"},
		{config.KeyClientIP, "client_ip"},
		{config.KeyPath, "path"},
		{config.KeyMethod, "method"},
		{config.KeyAuthority, "authority"},
		{config.KeyQuery, "query"},
		{config.KeyAttribute, "attribute"},
		{config.KeyKind(0), "KeyKind(0)"},
		{config.KeyKind(99), "KeyKind(99)"},
	}
	for _, test := range tests {
		if got := test.value.String(); got != test.want {
			t.Errorf("String() = %q, want %q", got, test.want)
		}
	}
}

type fmtStringer interface{ String() string }

func TestKeyTable(t *testing.T) {
	const rule = `"rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]`
	cfg, err := config.Parse([]byte(`{` + rule + `, "key_table": {"max_keys": 16, "when_full": "reject", "max_key_bytes": 64}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (config.KeyTable{MaxKeys: 16, WhenFull: config.WhenFullReject, MaxKeyBytes: 64}); cfg.KeyTable != want {
		t.Fatalf("key_table %+v, want %+v", cfg.KeyTable, want)
	}
	for doc, want := range map[string]string{
		`{"max_keys": 15}`:          "key_table.max_keys: 15 is not allowed",
		`{"max_keys": 20000000}`:    "key_table.max_keys: 20000000 is too large",
		`{"when_full": "drop"}`:     `key_table.when_full: "drop" is not a when_full policy`,
		`{"when_full": "share"}`:    `key_table.when_full: "share" was removed (it charged another key's bucket): use "overflow"`,
		`{"max_key_bytes": 100000}`: "key_table.max_key_bytes: 100000 is too large",
		`{"max_kyes": 5}`:           `key_table: unknown field "max_kyes": known fields are max_keys, when_full, max_key_bytes (did you mean "max_keys"?)`,
		`[]`:                        "key_table: got an array, want an object",
	} {
		_, err := config.Parse([]byte(`{` + rule + `, "key_table": ` + doc + `}`))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("key_table %s: got %v, want %q", doc, err, want)
		}
	}
}

func TestMoreMisconfigurations(t *testing.T) {
	const limits = `"limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]`
	for doc, want := range map[string]string{
		`{"rules": [{"name": "r", "key": [{"header": "a"}, {"header": "A"}], ` + limits + `}]}`:                                             "rules[0].key[1]: repeats rules[0].key[0]",
		`{"exempt": {"paths": [{"prefix": "/"}]}, "rules": [{"name": "r", "key": [{"client_ip": {}}], ` + limits + `}]}`:                    `exempt.paths[0]: {"prefix": "/"} exempts every request`,
		`{"response": {"headers": {"transfer-encoding": "chunked"}}, "rules": [{"name": "r", "key": [{"client_ip": {}}], ` + limits + `}]}`: "is a hop-by-hop header",
		`{"response": {"headers": {"x-a": "caf\u00e9"}}, "rules": [{"name": "r", "key": [{"client_ip": {}}], ` + limits + `}]}`:             "header values are visible ASCII",
		`{"exempt": {"client_cidrs": ["::ffff:0.0.0.0/64"]}, "rules": [{"name": "r", "key": [{"client_ip": {}}], ` + limits + `}]}`:         "IPv4-mapped prefix shorter than /96",
	} {
		_, err := config.Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
	}
}

func TestRejectionGrpcStatus(t *testing.T) {
	for _, c := range []struct{ set, want int }{{0, config.DefaultGrpcStatus}, {14, 14}, {3, 3}} {
		r := config.Response{GrpcStatus: c.set}
		if got := r.RejectionGrpcStatus(); got != c.want {
			t.Errorf("GrpcStatus %d: RejectionGrpcStatus %d, want %d", c.set, got, c.want)
		}
	}
	if config.DefaultGrpcStatus != 8 {
		t.Errorf("DefaultGrpcStatus = %d, want 8 (RESOURCE_EXHAUSTED)", config.DefaultGrpcStatus)
	}
}

// mustPrefix parses a prefix the test writes.
func mustPrefix(s string) netaddr.Prefix {
	p, ok := netaddr.ParsePrefix(s)
	if !ok {
		panic("not a prefix: " + s)
	}
	return p
}
