package simulate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A rule that counts failed logins is replayed by the statuses the log recorded: the successes
// are given back, the two failures empty the bucket, and the next two logins are limited.
func TestReplayCountsByTheLoggedStatus(t *testing.T) {
	t.Parallel()
	var lines []string
	for i, status := range []string{"200", "200", "401", "401", "200", "200"} {
		lines = append(lines, `{"start_time":"2026-11-30T10:00:0`+string(rune('0'+i))+`Z","method":"POST","path":"/login",`+
			`"downstream_remote_address":"192.0.2.7:41000","response_code":`+status+`}`)
	}
	path := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := simulateFile(t, path, EnvoyJSON, false, `{"rules": [{"name": "failed-logins", "key": [{"client_ip": {}}],
	  "limits": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"}], "count": {"statuses": ["401"]}}]}`)
	r := s.Rules["failed-logins"]
	if r == nil || r.Admitted != 4 || r.Limited != 2 {
		t.Fatalf("rule totals %+v, want 4 admitted and 2 limited", r)
	}
	if s.Statuses["200"] != 4 || s.Statuses["429"] != 2 {
		t.Fatalf("statuses %v: want 200 for the 4 let through (whatever the upstream answered) and 429 for 2", s.Statuses)
	}
}

// A token budget replays by the usage the log recorded: each request reserves 10 and is settled
// to what it used, in each form a rule reads it. 100 tokens an hour: 30 + 50 leave 20, two more
// of 10 leave nothing, and the last two are limited; lines without usage are charged unknown.
func TestReplayChargesTheLoggedUsage(t *testing.T) {
	t.Parallel()
	usages := []string{"30", `"50"`, "10", "10", "10", "10"}
	for _, tt := range []struct {
		name, usage string
		unknown     bool // the lines record no usage: each is charged unknown (40)
	}{
		{"openai total", `{"source": "openai", "reserve": 10, "unknown": 40}`, false},
		{"openai input", `{"source": "openai", "count": "input", "reserve": 10, "unknown": 40}`, false},
		{"anthropic output", `{"source": "anthropic", "count": "output", "reserve": 10, "unknown": 40}`, false},
		{"anthropic total", `{"source": "anthropic", "reserve": 10, "unknown": 40}`, false},
		{"a header", `{"source": "header", "header": "x-usage", "reserve": 10, "unknown": 40}`, false},
		{"bytes", `{"source": "response_bytes", "reserve": 10, "unknown": 40}`, false},
		{"no usage logged", `{"source": "openai", "reserve": 10, "unknown": 40}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var lines []string
			for i, u := range usages {
				field := `,"tollgate_usage":` + u
				if tt.unknown {
					field = `,"tollgate_usage":"-"`
				}
				lines = append(lines, `{"start_time":"2026-11-30T10:00:0`+string(rune('0'+i))+`Z","method":"POST","path":"/v1/chat/completions",`+
					`"downstream_remote_address":"192.0.2.7:41000","response_code":200`+field+`}`)
			}
			path := filepath.Join(t.TempDir(), "access.log")
			if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s, _ := simulateFile(t, path, EnvoyJSON, false, `{"rules": [{"name": "llm", "key": [{"client_ip": {}}],
			  "limits": [{"capacity": 100, "refill_tokens": 100, "refill_interval": "1h"}], "usage": `+tt.usage+`}]}`)
			want := [2]int64{4, 2} // admitted, limited
			if tt.unknown {
				want = [2]int64{3, 3} // 40 + 40 leave 20, 20 - 10 at admission of the third
			}
			if r := s.Rules["llm"]; r == nil || r.Admitted != want[0] || r.Limited != want[1] {
				t.Fatalf("rule totals %+v, want %d admitted and %d limited", r, want[0], want[1])
			}
		})
	}
}

func TestUsageFieldIsReadOrRefused(t *testing.T) {
	line := func(usage string) []byte {
		return []byte(`{"start_time":"2026-11-30T10:00:00Z","method":"GET","path":"/","tollgate_usage":` + usage + `}`)
	}
	for usage, want := range map[string]int64{`42`: 42, `"42"`: 42, `"0"`: 0, `9007199254740992`: 1 << 53} {
		if e, err := EnvoyJSON.Parse(line(usage)); err != nil || !e.HasUsage || e.Usage != want {
			t.Errorf("tollgate_usage %s: %+v, %v; want %d", usage, e, err, want)
		}
	}
	for _, usage := range []string{`null`, `"-"`, `""`} {
		if e, err := EnvoyJSON.Parse(line(usage)); err != nil || e.HasUsage {
			t.Errorf("tollgate_usage %s: %+v, %v; want no usage", usage, e, err)
		}
	}
	for _, usage := range []string{`-1`, `1.5`, `"1e3"`, `"+4"`, `" 4"`, `"9007199254740993"`, `"x"`, `true`, `[1]`} {
		if _, err := EnvoyJSON.Parse(line(usage)); err == nil || !strings.Contains(err.Error(), "tollgate_usage") {
			t.Errorf("tollgate_usage %s: error %v, want one naming tollgate_usage", usage, err)
		}
	}
}
