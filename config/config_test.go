package config_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
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

// oneRule is the Config of a single rule named "r" keyed on the client IP.
func oneRule(limit config.Limit) *config.Config {
	return &config.Config{Rules: []config.Rule{{
		Name:   "r",
		Key:    []config.KeyPart{{Kind: config.KeyClientIP}},
		Limits: []config.Limit{limit},
	}}}
}

// oneHeaderRule is the Config of a single rule named "r" keyed on a header.
func oneHeaderRule(header string) *config.Config {
	return &config.Config{Rules: []config.Rule{{
		Name:   "r",
		Key:    []config.KeyPart{{Kind: config.KeyHeader, Header: header}},
		Limits: []config.Limit{{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second}},
	}}}
}

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
			want: &config.Config{Rules: []config.Rule{{
				Name:   "per-api-key",
				Key:    []config.KeyPart{{Kind: config.KeyHeader, Header: "x-api-key"}},
				Limits: []config.Limit{{Capacity: 3, RefillTokens: 1, RefillInterval: time.Second}},
			}}, FailureMode: config.FailureAllow},
		},
		{
			name: "full document with every kind of part and two limits",
			input: `{"failure_mode": "deny", "rules": [
				{"name": "a.B_c-9", "key": [{"header": "X-API-Key"}, {"client_ip": {}}, {"header": ":Authority"}],
				 "limits": [{"capacity": 10, "refill_tokens": 10, "refill_interval": "1m"},
				            {"refill_interval": "500ms", "refill_tokens": 2, "capacity": 5}]},
				{"name": "second", "key": [{"header": "!#$%&'*+-.^_` + "`" + `|~09az"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1ms"}]}
			]}`,
			want: &config.Config{FailureMode: config.FailureDeny, Rules: []config.Rule{
				{
					Name: "a.B_c-9",
					Key: []config.KeyPart{
						{Kind: config.KeyHeader, Header: "x-api-key"},
						{Kind: config.KeyClientIP},
						{Kind: config.KeyHeader, Header: ":authority"},
					},
					Limits: []config.Limit{
						{Capacity: 10, RefillTokens: 10, RefillInterval: time.Minute},
						{Capacity: 5, RefillTokens: 2, RefillInterval: 500 * time.Millisecond},
					},
				},
				{
					Name:   "second",
					Key:    []config.KeyPart{{Kind: config.KeyHeader, Header: "!#$%&'*+-.^_`|~09az"}},
					Limits: []config.Limit{{Capacity: 1, RefillTokens: 1, RefillInterval: time.Millisecond}},
				},
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
			want: &config.Config{Rules: []config.Rule{{
				Name:   strings.Repeat("n", 64),
				Key:    []config.KeyPart{{Kind: config.KeyClientIP}},
				Limits: []config.Limit{{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second}},
			}}},
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
			problems: []problem{{"", `unknown field "rule": known fields are rules, failure_mode (did you mean "rules"?)`}},
		},
		{
			name:     "unknown rule field",
			input:    withRule(`{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}], "priority": 1}`),
			problems: []problem{{"rules[0]", `unknown field "priority": known fields are name, key, limits`}},
		},
		{
			name:     "unknown key part field",
			input:    withKeyPart(`{"header": "x", "cookie": "session"}`),
			problems: []problem{{keyPartPath, `unknown field "cookie": known fields are header, client_ip`}},
		},
		{
			name:     "misspelt key part field only",
			input:    withKeyPart(`{"headers": "x"}`),
			problems: []problem{{keyPartPath, `unknown field "headers": known fields are header, client_ip (did you mean "header"?)`}},
		},
		{
			name:     "client_ip with a field inside",
			input:    withKeyPart(`{"client_ip": {"ipv6_prefix": 64}}`),
			problems: []problem{{"rules[0].key[0].client_ip", `unknown field "ipv6_prefix": client_ip takes no fields yet, write "client_ip": {}`}},
		},
		{
			name:  "unknown limit field",
			input: withLimit(`{"capcity": 3, "refill_tokens": 1, "refill_interval": "1s"}`),
			problems: []problem{
				{"rules[0].limits[0]", `unknown field "capcity": known fields are capacity, refill_tokens, refill_interval (did you mean "capacity"?)`},
				{capacityPath, `required field is missing: add "capacity": 10`},
			},
		},
		{
			name:  "camelCase limit fields",
			input: withLimit(`{"capacity": 3, "refillTokens": 1, "refill_interval": "1s"}`),
			problems: []problem{
				{"rules[0].limits[0]", `unknown field "refillTokens": known fields are capacity, refill_tokens, refill_interval (did you mean "refill_tokens"?)`},
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
		{name: "9 key parts", input: withKeyPart(repeatJoined(`{"client_ip": {}}`, 9)), problems: []problem{{"rules[0].key", "9 parts are too many: at most 8 are allowed"}}},
		{name: "key part string", input: withKeyPart(`"x-api-key"`), problems: []problem{{keyPartPath, `got the string "x-api-key", want an object: a key part is an object with exactly one field`}}},
		{name: "key part empty", input: withKeyPart(`{}`), problems: []problem{{keyPartPath, `the key part is empty: a key part is an object with exactly one field, {"header": "<name>"} or {"client_ip": {}}`}}},
		{name: "key part with header and client_ip", input: withKeyPart(`{"header": "x-api-key", "client_ip": {}}`), problems: []problem{{keyPartPath, `has both "header" and "client_ip": a key part takes exactly one`}}},
		{
			name:  "key part with both, each also invalid",
			input: withKeyPart(`{"header": 1, "client_ip": null}`),
			problems: []problem{
				{keyPartPath, `has both "header" and "client_ip"`},
				{headerPath, "got the number 1, want a string"},
				{"rules[0].key[0].client_ip", `got null, want an object: client_ip takes no options yet, write "client_ip": {}`},
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
		{name: "client_ip true", input: withKeyPart(`{"client_ip": true}`), problems: []problem{{"rules[0].key[0].client_ip", `got true, want an object: client_ip takes no options yet, write "client_ip": {}`}}},

		// limits
		{name: "limits missing", input: withRule(`{"name": "r", "key": [{"client_ip": {}}]}`), problems: []problem{{"rules[0].limits", "required field is missing"}}},
		{name: "limits string", input: withRule(`{"name": "r", "key": [{"client_ip": {}}], "limits": "3/s"}`), problems: []problem{{"rules[0].limits", `got the string "3/s", want an array: limits is a list of 1 to 8 token buckets`}}},
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
		{name: "refill_interval null", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": null}`), problems: []problem{{refillIntervalPath, `got null, want a string: refill_interval is a duration from "1ms" to "24h"`}}},
		{name: "refill_interval without unit", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "1"}`), problems: []problem{{refillIntervalPath, `"1" is not a valid duration: refill_interval is a duration`}}},
		{name: "refill_interval gibberish", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "one second"}`), problems: []problem{{refillIntervalPath, `"one second" is not a valid duration`}}},
		{name: "refill_interval overflowing duration", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "99999999999h"}`), problems: []problem{{refillIntervalPath, `"99999999999h" is not a valid duration`}}},
		{name: "refill_interval 0s", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "0s"}`), problems: []problem{{refillIntervalPath, `"0s" is shorter than 1ms`}}},
		{name: "refill_interval negative", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "-1s"}`), problems: []problem{{refillIntervalPath, `"-1s" is shorter than 1ms`}}},
		{name: "refill_interval 999us", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "999us"}`), problems: []problem{{refillIntervalPath, `"999us" is shorter than 1ms: refill_interval is a duration from "1ms" to "24h" inclusive`}}},
		{name: "refill_interval 24h1ns", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "24h0m0.000000001s"}`), problems: []problem{{refillIntervalPath, `"24h0m0.000000001s" is longer than 24h`}}},
		{name: "refill_interval 2 days", input: withLimit(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "48h"}`), problems: []problem{{refillIntervalPath, `"48h" is longer than 24h`}}},

		// Token arithmetic overflow.
		{
			name:     "overflow combination",
			input:    withLimit(`{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "24h"}`),
			problems: []problem{{"rules[0].limits[0]", `capacity 1000000000 with refill_tokens 1 every "24h" would overflow the token arithmetic`}},
		},
		{
			name:     "overflow just above 2^62",
			input:    withLimit(`{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "4.611686019s"}`),
			problems: []problem{{"rules[0].limits[0]", "use a shorter refill_interval or a smaller capacity"}},
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
		{name: "failure_mode deny", input: withFailureMode(`"deny"`), want: &config.Config{Rules: oneRule(config.Limit{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second}).Rules, FailureMode: config.FailureDeny}},
		{name: "failure_mode allow", input: withFailureMode(`"allow"`), want: oneRule(config.Limit{Capacity: 1, RefillTokens: 1, RefillInterval: time.Second})},
		{name: "failure_mode unknown", input: withFailureMode(`"block"`), problems: []problem{{"failure_mode", `"block" is not a failure mode: failure_mode is "allow"`}}},
		{name: "failure_mode capitalised", input: withFailureMode(`"Deny"`), problems: []problem{{"failure_mode", `"Deny" is not a failure mode`}}},
		{name: "failure_mode null", input: withFailureMode(`null`), problems: []problem{{"failure_mode", `got null, want a string: failure_mode is "allow"`}}},
		{name: "failure_mode boolean", input: withFailureMode(`false`), problems: []problem{{"failure_mode", "got false, want a string"}}},

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
		t.Run(test.name, func(t *testing.T) {
			got, err := config.Parse([]byte(test.input))
			if test.problems == nil {
				if err != nil {
					t.Fatalf("Parse: unexpected error: %v", err)
				}
				if !reflect.DeepEqual(got, test.want) {
					t.Fatalf("Parse:\n got %+v\nwant %+v", got, test.want)
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
			if len(parseErr.Problems) != len(test.problems) {
				t.Fatalf("Parse: got %d problems, want %d:\n%s", len(parseErr.Problems), len(test.problems), formatProblems(parseErr.Problems))
			}
			for i, want := range test.problems {
				gotProblem := parseErr.Problems[i]
				if gotProblem.Field != want.field || !strings.Contains(gotProblem.Message, want.contains) {
					t.Errorf("problem %d:\n got field %q message %q\nwant field %q message containing %q",
						i, gotProblem.Field, gotProblem.Message, want.field, want.contains)
				}
			}
		})
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
	want := `rules[0].limits[0]: unknown field "capcity": known fields are capacity, refill_tokens, refill_interval (did you mean "capacity"?); ` +
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
