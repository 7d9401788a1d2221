package simulate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each setup that is probably wrong gets its warning, naming the rule and what to check; a sound
// one gets none.
func TestWarningsNameAWrongSetup(t *testing.T) {
	t.Parallel()
	const perKey = `{"name": "per-key", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 5, "refill_tokens": 1, "refill_interval": "1s"}]}`
	combined := filepath.Join(t.TempDir(), "combined.log")
	line := `192.0.2.1 - - [30/Nov/2026:10:00:00 +0000] "GET /x HTTP/1.1" 200 5 "-" "curl/8.5.0"` + "\n"
	if err := os.WriteFile(combined, []byte(strings.Repeat(line, 4)), 0o644); err != nil {
		t.Fatal(err)
	}
	withKeys := writeEnvoyLog(t, repeat(10, "/api", "a"))
	costs := writeEnvoyLog(t, []logRequest{
		{path: "/api", headers: map[string]string{"x-api-key": "a", "x-cost": "2"}},
		{path: "/api", headers: map[string]string{"x-api-key": "a", "x-cost": "two"}},
	})
	tests := []struct {
		name, log string
		format    Format
		config    string
		kinds     []string
		message   string
	}{
		{"sound", withKeys, EnvoyJSON, `{"rules": [` + perKey + `]}`, nil, ""},
		{"key not logged (envoy-json)", writeEnvoyLog(t, repeat(3, "/api", "")), EnvoyJSON, `{"rules": [` + perKey + `]}`,
			[]string{WarnMissingKey}, `rule per-key: 3 of its 3 requests (100 %) have no key: does the log record x-api-key? Envoy's json_format needs "req.x-api-key": "%REQ(X-API-KEY)%"`},
		{"key not in a combined log", combined, Combined, `{"rules": [` + perKey + `]}`,
			[]string{WarnMissingKey}, "a combined log records no request header but referer and user-agent, so x-api-key is always absent"},
		{"bad cost header", costs, EnvoyJSON, `{"rules": [` + strings.Replace(perKey, `"limits"`, `"cost": {"header": "x-cost", "max": 5}, "limits"`, 1) + `]}`,
			[]string{WarnInvalidCost}, "rule per-key: 1 requests had a cost header (x-cost) that is not a whole number and were answered 400"},
		{"log shorter than a window", withKeys, EnvoyJSON,
			`{"rules": [{"name": "hourly", "key": [{"header": "x-api-key"}], "limits": [{"algorithm": "sliding_window", "capacity": 100, "window": "1h"}]}]}`,
			[]string{WarnShortLog}, "rule hourly: the log covers 90ms, less than its 1-hour window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := simulateFile(t, tt.log, tt.format, false, tt.config)
			var kinds []string
			for _, w := range s.Warnings {
				kinds = append(kinds, w.Kind)
			}
			if strings.Join(kinds, " ") != strings.Join(tt.kinds, " ") {
				t.Fatalf("warnings %+v, want kinds %q", s.Warnings, tt.kinds)
			}
			if tt.message != "" && !strings.Contains(s.Warnings[0].Message, tt.message) {
				t.Errorf("warning %q does not say %q", s.Warnings[0].Message, tt.message)
			}
		})
	}
}
