package scenario_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/e2e/scenario"
)

func TestConfigIsValidAndMatchesTheConstants(t *testing.T) {
	cfg, err := config.Parse([]byte(scenario.Config))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Rules) != 1 || cfg.Rules[0].Name != scenario.Rule {
		t.Fatalf("rules %+v, want one named %q", cfg.Rules, scenario.Rule)
	}
	if part := cfg.Rules[0].Key; len(part) != 1 || part[0].Header != scenario.KeyHeader {
		t.Fatalf("key %+v, want the header %q", part, scenario.KeyHeader)
	}
}

func TestCheck(t *testing.T) {
	limited := scenario.Step{Name: "limited", Key: "k", Status: 429, RetryAfter: 60, BodyContains: "Too Many Requests"}
	admitted := scenario.Step{Name: "admitted", Key: "k", Status: 200, BodyContains: scenario.UpstreamBody, ReachesUpstream: true}
	refused := scenario.Step{Name: "refused", Status: 401, BodyContains: "x-api-key"}
	tests := []struct {
		name  string
		step  scenario.Step
		got   scenario.Response
		clock scenario.Clock
		want  string // "" for no problem, else a part of the error
	}{
		{"429 exact", limited, scenario.Response{429, "60", "Too Many Requests"}, scenario.FrozenClock, ""},
		{"429 off by one on a frozen clock", limited, scenario.Response{429, "59", "Too Many Requests"}, scenario.FrozenClock, "Retry-After 59, want 60"},
		{"429 lower on a real clock", limited, scenario.Response{429, "58", "Too Many Requests"}, scenario.RealClock, ""},
		{"429 above on a real clock", limited, scenario.Response{429, "61", "Too Many Requests"}, scenario.RealClock, "want 1 to 60"},
		{"429 zero on a real clock", limited, scenario.Response{429, "0", "Too Many Requests"}, scenario.RealClock, "want 1 to 60"},
		{"429 without Retry-After", limited, scenario.Response{429, "", "Too Many Requests"}, scenario.FrozenClock, "no Retry-After"},
		{"429 with a date", limited, scenario.Response{429, "Wed, 21 Oct 2026 07:28:00 GMT", "Too Many Requests"}, scenario.FrozenClock, "not a whole number"},
		{"wrong status", limited, scenario.Response{200, "", scenario.UpstreamBody}, scenario.FrozenClock, "status 200, want 429"},
		{"limited request reached the upstream", limited, scenario.Response{429, "60", scenario.UpstreamBody}, scenario.FrozenClock, "reached the upstream"},
		{"200 from the upstream", admitted, scenario.Response{200, "", scenario.UpstreamBody}, scenario.FrozenClock, ""},
		{"200 not from the upstream", admitted, scenario.Response{200, "", "hello from elsewhere\n"}, scenario.FrozenClock, "did not reach the upstream"},
		{"Retry-After on a 200", admitted, scenario.Response{200, "1", scenario.UpstreamBody}, scenario.FrozenClock, `Retry-After "1" on a 200`},
		{"401 naming the header", refused, scenario.Response{401, "", "Unauthorized: no header x-api-key"}, scenario.FrozenClock, ""},
		{"401 body without the header", refused, scenario.Response{401, "", "Unauthorized"}, scenario.FrozenClock, `does not contain "x-api-key"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.step.Check(tt.got, tt.clock)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected problem: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want a problem containing %q", err, tt.want)
			}
		})
	}
}

// Run sends every step in order and reports each mismatch with its step.
func TestRunReportsEveryMismatchingStep(t *testing.T) {
	server := httptest.NewServer(scenario.Upstream()) // admits everything: no 429, no 401
	defer server.Close()
	err := scenario.Run(context.Background(), server.Client(), server.URL, scenario.FrozenClock)
	if err == nil {
		t.Fatal("an upstream without Tollgate passed the scenario")
	}
	for _, want := range []string{"step 4 (alice over the limit): status 200, want 429", "step 7 (no key): status 200, want 401"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the report lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "step 1 ") {
		t.Errorf("step 1 is admitted by the upstream as the scenario wants, yet reported:\n%v", err)
	}
}

func TestRunSendsTheKeyHeader(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(scenario.KeyHeader)+"@"+r.URL.RequestURI())
		mu.Unlock()
	}))
	defer server.Close()
	_ = scenario.Run(context.Background(), server.Client(), server.URL+"/", scenario.FrozenClock)
	mu.Lock()
	defer mu.Unlock()
	want := "alice@/scenario?step=1 alice@/scenario?step=1 alice@/scenario?step=1 alice@/scenario?step=1 " +
		"alice@/scenario?step=1 bob@/scenario?step=1 @/scenario?step=1"
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("requests\n got  %s\n want %s", got, want)
	}
}

func TestWantCountersFollowTheSteps(t *testing.T) {
	values := map[string]int64{}
	for _, c := range scenario.WantCounters() {
		values[c.Stat] = c.Value
	}
	admitted := scenario.RuleStat(scenario.Rule, scenario.Admitted)
	limited := scenario.RuleStat(scenario.Rule, scenario.Limited)
	missingKey := scenario.RuleStat(scenario.Rule, scenario.MissingKey)
	if values[admitted] != 4 || values[limited] != 2 || values[missingKey] != 1 {
		t.Fatalf("counters %v, want 4 admitted, 2 limited, 1 missing key", values)
	}
}

func TestParsePrometheus(t *testing.T) {
	// The shape of Envoy's /stats/prometheus: TYPE comments, series without labels printed with
	// an empty label set, several labels, escapes.
	text := `# TYPE envoy_cluster_upstream_rq_total counter
envoy_cluster_upstream_rq_total{envoy_cluster_name="upstream"} 4
# TYPE tollgate_rule_admitted counter
tollgate_rule_admitted{tollgate_rule="per-api-key"} 4
tollgate_internal_errors{} 0
envoy_http_downstream_rq_xx{envoy_response_code_class="2",envoy_http_conn_manager_prefix="ingress"} 5
odd{label="a \"quoted\" \\ value"} 1.5
`
	values, err := scenario.ParsePrometheus(text)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		series string
		want   float64
	}{
		{`envoy_cluster_upstream_rq_total{envoy_cluster_name="upstream"}`, 4},
		{`tollgate_rule_admitted{tollgate_rule="per-api-key"}`, 4},
		{`tollgate_internal_errors`, 0},
		{`tollgate_internal_errors{}`, 0},
		{`envoy_http_downstream_rq_xx{envoy_http_conn_manager_prefix="ingress",envoy_response_code_class="2"}`, 5},
		{`odd{label="a \"quoted\" \\ value"}`, 1.5},
	}
	for _, tt := range tests {
		key, err := scenario.CanonicalSeries(tt.series)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := values[key]; !ok || got != tt.want {
			t.Errorf("%s: got %v (present %v), want %v", tt.series, got, ok, tt.want)
		}
	}
	if _, err := scenario.ParsePrometheus("broken{label=\"x} 1\n"); err == nil {
		t.Error("an unterminated label value parsed")
	}
}

func TestEnvoyPrometheusSeries(t *testing.T) {
	shipped := []scenario.StatsTag{{Name: scenario.RuleTag, Regex: scenario.RuleTagRegex}}
	tests := []struct {
		name string
		stat string
		tags []scenario.StatsTag
		want string
	}{
		{"per-rule counter", scenario.RuleStat("per-api-key", scenario.Admitted), shipped, `tollgate_rule_admitted{tollgate_rule="per-api-key"}`},
		{"kind with an underscore", scenario.RuleStat("per-api-key", scenario.ShadowLimited), shipped, `tollgate_rule_shadow_limited{tollgate_rule="per-api-key"}`},
		{"rule name with dots", scenario.RuleStat("api.v1", scenario.Limited), shipped, `tollgate_rule_limited{tollgate_rule="api.v1"}`},
		{"plugin-wide counter", scenario.InternalErrorsStat, shipped, "tollgate_internal_errors"},
		{"no tags", scenario.RuleStat("per-api-key", scenario.Admitted), nil, "tollgate_rule_per_api_key_admitted"},
		// A regex anchored at the module's own name never matches: the full name starts with
		// "wasmcustom.", and Envoy only tries it on names whose first segment is "tollgate".
		{"regex without the namespace", scenario.RuleStat("per-api-key", scenario.Admitted),
			[]scenario.StatsTag{{Name: scenario.RuleTag, Regex: `^tollgate\.rule\.((.+?)\.)`}}, "tollgate_rule_per_api_key_admitted"},
		// A lazy group splits a rule name with dots.
		{"lazy group", scenario.RuleStat("api.v1", scenario.Limited),
			[]scenario.StatsTag{{Name: scenario.RuleTag, Regex: `^wasmcustom\.tollgate\.rule\.((.+?)\.)`}}, `tollgate_rule_v1_limited{tollgate_rule="api"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := scenario.EnvoyPrometheusSeries(tt.stat, tt.tags)
			if err != nil {
				t.Fatal(err)
			}
			want, err := scenario.CanonicalSeries(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
}

// Each counter's Series is what Envoy shows for its Stat under the shipped stats tag.
func TestSeriesFollowFromStatNames(t *testing.T) {
	shipped := []scenario.StatsTag{{Name: scenario.RuleTag, Regex: scenario.RuleTagRegex}}
	var pairs [][2]string
	for _, kinds := range [][]string{scenario.RuleKinds, scenario.LeaseKinds, scenario.DelayKinds} {
		for _, kind := range kinds {
			pairs = append(pairs, [2]string{scenario.RuleStat(scenario.Rule, kind), scenario.RuleSeries(scenario.Rule, kind)})
		}
	}
	for _, stat := range scenario.PluginStats {
		pairs = append(pairs, [2]string{stat, scenario.PluginSeries(stat)})
	}
	for _, c := range scenario.WantCounters() {
		pairs = append(pairs, [2]string{c.Stat, c.Series})
	}
	for _, p := range pairs {
		got, err := scenario.EnvoyPrometheusSeries(p[0], shipped)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := scenario.CanonicalSeries(p[1]); got != want {
			t.Errorf("stat %s: Envoy shows %s, the scenario expects %s", p[0], got, want)
		}
	}
}
