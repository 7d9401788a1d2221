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
