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

// plansJSON is the tiered rule of the documentation: the tier is the x-plan header, free by default.
const plansJSON = `{"rules": [
  {"name": "plans", "key": [{"header": "x-user"}],
   "limits_by": {"part": {"header": "x-plan"}, "default": "free",
     "tiers": {"free": [{"capacity": 10, "refill_tokens": 10, "refill_interval": "1m"}],
               "pro":  [{"capacity": 100, "refill_tokens": 100, "refill_interval": "1m"},
                        {"algorithm": "fixed_window", "capacity": 100000, "calendar": "month"}]}}}
]}`

// withLimitsBy is a one-rule document whose limits_by is limitsByJSON.
func withLimitsBy(limitsByJSON string) string {
	return `{"rules": [{"name": "r", "key": [{"header": "x-user"}], "limits_by": ` + limitsByJSON + `}]}`
}

const oneLimit = `[{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]`

func TestLimitsBy(t *testing.T) {
	cfg, err := config.Parse([]byte(plansJSON))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Rules[0]
	want := &config.LimitsBy{
		Part:    config.KeyPart{Kind: config.KeyHeader, Header: "x-plan"},
		Default: 0,
		Tiers: []config.Tier{
			{Name: "free", Limits: []config.Limit{{Capacity: 10, RefillTokens: 10, RefillInterval: time.Minute}}},
			{Name: "pro", Limits: []config.Limit{{Capacity: 100, RefillTokens: 100, RefillInterval: time.Minute},
				{Algorithm: config.FixedWindow, Capacity: 100000, Calendar: config.CalendarMonth}}},
		},
	}
	if !reflect.DeepEqual(r.LimitsBy, want) || r.Limits != nil {
		t.Fatalf("limits_by = %+v, limits %v; want %+v and no limits", r.LimitsBy, r.Limits, want)
	}
	if n := r.LimitPositions(); n != 2 {
		t.Fatalf("LimitPositions = %d, want 2 (pro's)", n)
	}

	accepted := []struct{ name, input string }{
		{"attribute part", withLimitsBy(`{"part": {"attribute": ["metadata", "filter_metadata", "envoy.filters.http.jwt_authn", "jwt_payload", "plan"]}, "default": "a", "tiers": {"a": ` + oneLimit + `}}`)},
		{"client_ip part", withLimitsBy(`{"part": {"client_ip": {"ipv4_prefix": 24}}, "default": "10.0.0.0/24", "tiers": {"10.0.0.0/24": ` + oneLimit + `, "x": ` + oneLimit + `}}`)},
		{"default is not the first tier", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "pro", "tiers": {"free": ` + oneLimit + `, "pro": ` + oneLimit + `}}`)},
		{"64 tiers", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "t0", "tiers": {` + tiersJSON(64, 1) + `}}`)},
		{"8 limits", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "t0", "tiers": {` + tiersJSON(2, 8) + `}}`)},
		{"cost within every tier", `{"rules": [{"name": "r", "key": [{"header": "x-user"}], "cost": 2,
		   "limits_by": {"part": {"header": "x-plan"}, "default": "a", "tiers": {"a": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}}}]}`},
	}
	for _, test := range accepted {
		if _, err := config.Parse([]byte(test.input)); err != nil {
			t.Errorf("%s: %v", test.name, err)
		}
	}
	if cfg, _ := config.Parse([]byte(accepted[2].input)); cfg.Rules[0].LimitsBy.Default != 1 {
		t.Errorf("default pro: index %d, want 1", cfg.Rules[0].LimitsBy.Default)
	}
}

// tiersJSON is n tiers t0..t(n-1) of limits limits each.
func tiersJSON(n, limits int) string {
	var tiers []string
	for i := range n {
		tiers = append(tiers, `"t`+strconv.Itoa(i)+`": [`+repeatJoined(`{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}`, limits)+`]`)
	}
	return strings.Join(tiers, ", ")
}

func TestLimitsByRefused(t *testing.T) {
	const by = "rules[0].limits_by"
	tests := []struct {
		name     string
		input    string
		problems []problem
	}{
		{"both limits and limits_by", `{"rules": [{"name": "r", "key": [{"header": "x-user"}], "limits": ` + oneLimit +
			`, "limits_by": {"part": {"header": "x-plan"}, "default": "a", "tiers": {"a": ` + oneLimit + `}}}]}`,
			[]problem{{"rules[0]", `has both "limits" and "limits_by": a rule takes exactly one`}}},
		{"neither", `{"rules": [{"name": "r", "key": [{"header": "x-user"}]}]}`,
			[]problem{{"rules[0].limits", `required field is missing: add "limits": [`}}},
		{"not an object", withLimitsBy(`[]`), []problem{{by, "got an array, want an object: limits_by is an object with"}}},
		{"unknown field", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "a", "tiers": {"a": ` + oneLimit + `}, "tier": 1}`),
			[]problem{{by, `unknown field "tier": known fields are part, default, tiers (did you mean "tiers"?)`}}},
		{"missing fields", withLimitsBy(`{}`), []problem{
			{by + ".part", `required field is missing: add "part": {"header": "x-plan"}`},
			{by + ".tiers", `required field is missing: add "tiers"`},
			{by + ".default", `required field is missing: add "default": "free"`}}},
		{"bad part", withLimitsBy(`{"part": {"header": "x plan"}, "default": "a", "tiers": {"a": ` + oneLimit + `}}`),
			[]problem{{by + ".part.header", `"x plan" contains ' ', which is not allowed`}}},
		{"part with two fields", withLimitsBy(`{"part": {"header": "x-plan", "client_ip": {}}, "default": "a", "tiers": {"a": ` + oneLimit + `}}`),
			[]problem{{by + ".part", `has both "header" and "client_ip": a key part takes exactly one`}}},
		{"unknown default", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "fre", "tiers": {"free": ` + oneLimit + `, "pro": ` + oneLimit + `}}`),
			[]problem{{by + ".default", `"fre" is not one of the tiers ("free", "pro"): default is the name of the tier whose limits apply to a request without the part's value or with a value that names no tier (did you mean "free"?)`}}},
		{"unknown default among many tiers", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "t99", "tiers": {` + tiersJSON(20, 1) + `}}`),
			[]problem{{by + ".default", `"t99" is not one of the tiers ("t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10", "t11", "t12", "t13", "t14", "t15", and 4 more): default is`}}},
		{"a long tier name", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "a", "tiers": {"a": ` + oneLimit + `, "` + strings.Repeat("x", 257) + `": ` + oneLimit + `}}`),
			[]problem{{by + ".tiers." + strings.Repeat("x", 40) + "...", "is 257 bytes long: a tier name is the part's value that selects it, 1 to 256 bytes"}}},
		{"default not a string", withLimitsBy(`{"part": {"header": "x-plan"}, "default": 1, "tiers": {"a": ` + oneLimit + `}}`),
			[]problem{{by + ".default", "got the number 1, want a string: default is the name of the tier"}}},
		{"no tiers", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "a", "tiers": {}}`),
			[]problem{{by + ".tiers", "an empty object is not allowed: tiers is an object of 1 to 64 tiers"}}},
		{"tiers not an object", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "a", "tiers": [` + oneLimit + `]}`),
			[]problem{{by + ".tiers", "got an array, want an object: tiers is an object of 1 to 64 tiers"}}},
		{"65 tiers", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "t0", "tiers": {` + tiersJSON(65, 1) + `}}`),
			[]problem{{by + ".tiers", "65 tiers are too many: at most 64 are allowed"}}},
		{"9 limits", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "t0", "tiers": {` + tiersJSON(1, 9) + `}}`),
			[]problem{{by + ".tiers.t0", "9 limits are too many: at most 8 are allowed"}}},
		{"a tier without limits", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "a", "tiers": {"a": []}}`),
			[]problem{{by + ".tiers.a", "an empty list is not allowed: add a limit such as"}}},
		{"a bad limit in a tier", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "a", "tiers": {"a": [{"capacity": 0, "refill_tokens": 1, "refill_interval": "1s"}]}}`),
			[]problem{{by + ".tiers.a[0].capacity", "0 is not allowed: capacity is the burst size"}}},
		{"empty tier name", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "a", "tiers": {"a": ` + oneLimit + `, "": ` + oneLimit + `}}`),
			[]problem{{by + ".tiers.", `the tier name "" is 0 bytes long: a tier name is the part's value that selects it, 1 to 256 bytes`}}},
		{"repeated tier", withLimitsBy(`{"part": {"header": "x-plan"}, "default": "a", "tiers": {"a": ` + oneLimit + `, "a": ` + oneLimit + `}}`),
			[]problem{{by + ".tiers.a", "the tier is given more than once: keep exactly one"}}},
		{"cost above a tier's capacity", `{"rules": [{"name": "r", "key": [{"header": "x-user"}], "cost": 5,
		   "limits_by": {"part": {"header": "x-plan"}, "default": "a", "tiers": {"a": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}], "b": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}}}]}`,
			[]problem{{"rules[0].cost", "5 is above the capacity 2 of rules[0].limits_by.tiers.b[0], so no request could ever be admitted"}}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			_, err := config.Parse([]byte(test.input))
			var parseErr *config.Error
			if !errors.As(err, &parseErr) {
				t.Fatalf("Parse: got %v, want *config.Error", err)
			}
			if len(parseErr.Problems) != len(test.problems) {
				t.Fatalf("got %d problems, want %d:\n%s", len(parseErr.Problems), len(test.problems), formatProblems(parseErr.Problems))
			}
			for i, want := range test.problems {
				got := parseErr.Problems[i]
				if got.Field != want.field || !strings.Contains(got.Message, want.contains) {
					t.Errorf("problem %d:\n got field %q message %q\nwant field %q message containing %q", i, got.Field, got.Message, want.field, want.contains)
				}
			}
		})
	}
}

// A tier read from something the client sends is flagged; one read from metadata or the client
// address is not.
func TestLimitsByWarnings(t *testing.T) {
	tests := []struct {
		part string
		want string // "" for no warning
	}{
		{`{"header": "x-plan"}`, "the tier is read from the request header x-plan, which a client can send itself"},
		{`{"query": "plan"}`, "the tier is read from the request's query, which the client chooses"},
		{`{"path": {}}`, "the tier is read from the request's path, which the client chooses"},
		{`{"attribute": ["metadata", "filter_metadata", "auth", "plan"]}`, ""},
		{`{"client_ip": {}}`, ""},
		{`{"header": "x-envoy-internal"}`, ""},
	}
	for _, test := range tests {
		cfg, err := config.Parse([]byte(withLimitsBy(`{"part": ` + test.part + `, "default": "a", "tiers": {"a": ` + oneLimit + `}}`)))
		if err != nil {
			t.Fatal(err)
		}
		warnings := config.Warnings(cfg)
		switch {
		case test.want == "" && len(warnings) != 0:
			t.Errorf("part %s: warnings %v, want none", test.part, warnings)
		case test.want != "" && (len(warnings) != 1 || warnings[0].Field != "rules[0].limits_by.part" || !strings.Contains(warnings[0].Message, test.want)):
			t.Errorf("part %s: warnings %v, want one on rules[0].limits_by.part containing %q", test.part, warnings, test.want)
		}
	}
}
