package simulate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A limits_by rule replays like any rule: keys are the rule's key (the tier is read besides it),
// each request is decided by its tier's limits, and the summary lists every tier's limits.
func TestSimulateTiers(t *testing.T) {
	const config = `{"rules": [{"name": "plans", "key": [{"header": "x-user"}],
	  "limits_by": {"part": {"header": "x-plan"}, "default": "free", "tiers": {
	    "free": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"}],
	    "pro":  [{"capacity": 5, "refill_tokens": 5, "refill_interval": "1h"},
	             {"algorithm": "fixed_window", "capacity": 1000, "window": "24h"}]}}}]}`
	var lines []string
	add := func(n int, user, plan string) {
		for range n {
			line := fmt.Sprintf(`{"start_time":"2026-11-30T10:00:%02d.%03dZ","method":"GET","path":"/","req.x-user":%q`,
				len(lines)/1000, len(lines)%1000, user)
			if plan != "" {
				line += fmt.Sprintf(`,"req.x-plan":%q`, plan)
			}
			lines = append(lines, line+"}")
		}
	}
	add(4, "free-user", "")     // 2 admitted
	add(7, "pro-user", "pro")   // 5 admitted
	add(3, "gold-user", "gold") // unknown: free, 2 admitted
	add(2, "free-user", "pro")  // the same bucket, empty: none
	path := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := simulateFile(t, path, EnvoyJSON, true, config)
	r := s.Rules["plans"]
	if r == nil || r.Admitted != 9 || r.Limited != 7 || r.Keys != 3 {
		t.Fatalf("plans: %+v, want 9 admitted, 7 limited, 3 keys", r)
	}
	limited := map[string]int64{}
	for _, k := range r.TopLimitedKeys {
		limited[k.Key] = k.Limited
	}
	if limited["free-user"] != 4 || limited["pro-user"] != 2 || limited["gold-user"] != 1 {
		t.Errorf("limited per key %v, want free-user 4, pro-user 2, gold-user 1", limited)
	}
	var tiers []string
	for _, l := range r.Limits {
		tiers = append(tiers, fmt.Sprintf("%s/%s/%d", l.Tier, l.Algorithm, l.Capacity))
	}
	if got := strings.Join(tiers, " "); got != "free/token_bucket/2 pro/token_bucket/5 pro/fixed_window/1000" {
		t.Errorf("limits %q", got)
	}
}
