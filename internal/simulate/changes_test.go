package simulate

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// logRequest is one request of a hand-written envoy-json log.
type logRequest struct {
	path    string
	headers map[string]string // without the "req." prefix
}

// writeEnvoyLog writes requests 10 ms apart, all from one client, and returns the file's path.
func writeEnvoyLog(t *testing.T, requests []logRequest) string {
	t.Helper()
	var lines []string
	for i, r := range requests {
		line := fmt.Sprintf(`{"start_time":"2026-11-30T10:00:%02d.%03dZ","method":"GET","path":%q,"downstream_remote_address":"192.0.2.7:41000"`,
			i/100, i%100*10, r.path)
		for _, name := range slices.Sorted(maps.Keys(r.headers)) {
			line += fmt.Sprintf(`,"req.%s":%q`, name, r.headers[name])
		}
		lines = append(lines, line+"}")
	}
	path := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// repeat is n requests to path with the API key key ("" for none).
func repeat(n int, path, key string) []logRequest {
	out := make([]logRequest, n)
	for i := range out {
		out[i] = logRequest{path: path}
		if key != "" {
			out[i].headers = map[string]string{"x-api-key": key}
		}
	}
	return out
}

// A shadow rule behind a tighter enforced rule sees only what that rule admits; enforced alone
// it would limit what its own limit says, as a replay of it alone as the only rule shows.
func TestShadowRuleEnforcedAlone(t *testing.T) {
	t.Parallel()
	const perClient = `{"name": "per-client", "key": [{"client_ip": {}}], "limits": [{"capacity": 3, "refill_tokens": 3, "refill_interval": "1h"}]}`
	path := writeEnvoyLog(t, repeat(6, "/api", "a"))
	s, _ := simulateFile(t, path, EnvoyJSON, true, `{"rules": [
	  {"name": "per-key", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"}]},
	  `+strings.Replace(perClient, `"key"`, `"shadow": true, "key"`, 1)+`]}`)
	shadow := s.Rules["per-client"]
	if shadow.Requests != 6 || shadow.Admitted != 2 || shadow.ShadowLimited != 0 {
		t.Fatalf("per-client: %+v; want 6 requests, 2 admitted (the enforced rule limited 4), 0 shadow-limited", shadow.RuleTotals)
	}
	alone, _ := simulateFile(t, path, EnvoyJSON, true, `{"rules": [`+perClient+`]}`)
	want := alone.Rules["per-client"]
	got := shadow.EnforcedAlone
	if got == nil || got.Admitted != want.Admitted || got.Limited != want.Limited || got.KeysLimited != want.KeysLimited {
		t.Fatalf("enforced_alone %+v, want the figures of the rule replayed alone: %+v", got, want.RuleTotals)
	}
	if got.Admitted != 3 || got.Limited != 3 || got.KeysLimited != 1 || len(got.TopKeys) != 1 || got.TopKeys[0].Key != "192.0.2.7" {
		t.Errorf("enforced_alone %+v, want 3 admitted, 3 limited, 1 key (192.0.2.7)", got)
	}
	if s.Rules["per-key"].EnforcedAlone != nil {
		t.Error("an enforced rule has enforced_alone figures")
	}
}

// --compare counts, request by request, what the second configuration limits that the first
// did not and the reverse, per rule and in total, and the keys that move.
func TestCompareSaysWhatChanges(t *testing.T) {
	t.Parallel()
	perKey := func(capacity int) string {
		return fmt.Sprintf(`{"name": "per-key", "match": {"path": {"prefix": "/api"}}, "key": [{"header": "x-api-key"}],
		  "limits": [{"capacity": %d, "refill_tokens": 1, "refill_interval": "1h"}]}`, capacity)
	}
	other := `{"name": "other", "match": {"path": {"exact": "/other"}}, "key": [{"client_ip": {}}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}`
	requests := append(append(repeat(4, "/api", "a"), repeat(3, "/api", "b")...), repeat(2, "/other", "")...)
	// Before: a 2 admitted then 2 limited, b 2 then 1, /other unlimited. After: a 3 then 1, b 3,
	// /other 1 then 1.
	s, _ := simulateFile(t, writeEnvoyLog(t, requests), EnvoyJSON, true,
		`{"rules": [`+perKey(2)+`]}`, `{"rules": [`+perKey(3)+`, `+other+`]}`)
	c := s.Changes
	if c == nil || c.From != "config-0.json" || c.To != "config-1.json" || c.NewlyLimited != 1 || c.NewlyAdmitted != 2 {
		t.Fatalf("changes %+v: want from config-0.json to config-1.json, 1 newly limited (/other), 2 newly admitted", c)
	}
	tests := []struct {
		rule string
		want RuleChanges
	}{
		{"per-key", RuleChanges{In: "both", NewlyAdmitted: 2, KeysNewlyAdmitted: 1, MovedMost: []KeyChange{
			{Key: "a", Requests: 4, LimitedFrom: 2, LimitedTo: 1}, {Key: "b", Requests: 3, LimitedFrom: 1}}}},
		{"other", RuleChanges{In: "to", NewlyLimited: 1, KeysNewlyLimited: 1, MovedMost: []KeyChange{
			{Key: "192.0.2.7", Requests: 2, LimitedTo: 1}}}},
	}
	for _, tt := range tests {
		if got := asJSON(c.Rules[tt.rule]); got != asJSON(tt.want) {
			t.Errorf("rule %s: changes %s\nwant %s", tt.rule, got, asJSON(tt.want))
		}
	}
	if s.Result.Changes() != nil || len(c.Rules) != 2 {
		t.Errorf("changes on the first result, or %d rules compared", len(c.Rules))
	}
}

// A fixed window's figures depend on where windows start, which Envoy does not fix: three
// requests in 59 seconds are limited once when one window holds them all (the first phase,
// whose window starts at the first request) and never when a window boundary falls between
// them (the seven other phases).
func TestWindowPhasesGiveTheRange(t *testing.T) {
	t.Parallel()
	var lines []string
	for _, second := range []int{0, 31, 59} {
		lines = append(lines, fmt.Sprintf(`{"start_time":"2026-11-30T10:00:%02dZ","method":"GET","path":"/","req.x-api-key":"a"}`, second))
	}
	path := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const config = `{"rules": [
	  {"name": "window", "key": [{"header": "x-api-key"}], "limits": [{"algorithm": "fixed_window", "capacity": 2, "window": "1m"}]},
	  {"name": "bucket", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}]}]}`
	tests := []struct {
		phases int
		want   *PhaseRange
	}{
		{1, nil},
		{8, &PhaseRange{Phases: 8, WindowSeconds: 60, LimitedMin: 0, LimitedMax: 1}},
	}
	for _, tt := range tests {
		log, err := Open(path, EnvoyJSON)
		if err != nil {
			t.Fatal(err)
		}
		results, err := Run(context.Background(), log, RunOptions{Wasm: module(t), Seed: 1, Cache: testCache, Phases: tt.phases,
			Configs: []ConfigFile{{Name: "config.json", Data: []byte(config)}}})
		log.Close()
		if err != nil {
			t.Fatal(err)
		}
		window, bucket := results[0].Rules["window"], results[0].Rules["bucket"]
		if window.Limited != 1 || asJSON(window.WindowPhases) != asJSON(tt.want) {
			t.Errorf("%d phases: limited %d, range %s; want 1 and %s", tt.phases, window.Limited, asJSON(window.WindowPhases), asJSON(tt.want))
		}
		if bucket.WindowPhases != nil {
			t.Errorf("%d phases: a rule without windows, which no phase moves, has a range: %+v", tt.phases, bucket.WindowPhases)
		}
	}
}
