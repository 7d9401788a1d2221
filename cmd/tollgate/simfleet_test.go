package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fleetTestConfig = `{"rules": [{"name": "api", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 100, "refill_tokens": 100, "refill_interval": "1s"}],
  "global": {"cluster": "ratelimit", "domain": "d", "lease": {"max_tokens": 4, "ttl": "10s"}}}]}`

// fleetTestLog is 40 requests of one key, 10 ms apart, from one client.
func fleetTestLog(t *testing.T) string {
	var lines []string
	for i := 0; i < 40; i++ {
		lines = append(lines, fmt.Sprintf(`{"start_time":"2026-11-30T10:00:00.%03dZ","method":"GET","path":"/","downstream_remote_address":"192.0.2.1:4000","req.x-api-key":"k"}`, 10*i))
	}
	return writeFile(t, "fleet.log", strings.Join(lines, "\n")+"\n")
}

func TestSimulateFleetRejectsBadFlags(t *testing.T) {
	global := writeFile(t, "global.json", fleetTestConfig)
	local := writeFile(t, "local.json", simulateConfig)
	log := fleetTestLog(t)
	otherDomain := writeFile(t, "other.yaml", "domain: other\ndescriptors:\n- key: rule\n  value: api\n  descriptors:\n  - key: key\n    rate_limit: {unit: minute, requests_per_unit: 30}\n")
	noLimit := writeFile(t, "nolimit.yaml", "domain: d\ndescriptors:\n- key: rule\n  value: other\n  rate_limit: {unit: minute, requests_per_unit: 30}\n")
	badUnit := writeFile(t, "badunit.yaml", "domain: d\ndescriptors:\n- key: rule\n  rate_limit: {unit: fortnight, requests_per_unit: 30}\n")
	out := t.TempDir()
	base := []string{"simulate", "--log", log, "--out", out}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--config", global, "--replicas", "0", "--global-limit", "api=10/second"}, 2, "--replicas 0 is out of range: use 1 to 10000"},
		{[]string{"--config", global, "--replicas", "-3"}, 2, "--replicas -3 is out of range"},
		{[]string{"--config", global, "--replicas", "x"}, 2, `invalid value "x" for flag -replicas`},
		{[]string{"--config", global, "--replicas", "3", "--workers", "0", "--global-limit", "api=10/second"}, 2, "--workers 0 is out of range: use 1 to 256"},
		{[]string{"--config", global, "--replicas", "3", "--balance", "random", "--global-limit", "api=10/second"}, 2, `--balance: unknown balance "random": use round-robin or hash`},
		{[]string{"--config", global, "--workers", "4"}, 2, "--workers shapes the fleet model: add --replicas N"},
		{[]string{"--config", global, "--replicas", "3", "--global-limit", "api=10"}, 2, `--global-limit "api=10": the limit must be N/UNIT`},
		{[]string{"--config", global, "--replicas", "3", "--global-limit", "api=10/fortnight"}, 2, `unknown unit "fortnight": use second, minute, hour, day, week, month or year`},
		{[]string{"--config", global, "--replicas", "3", "--global-limit", "api=10/second", "--global-limit", "api=5/second"}, 2, "--global-limit api is given twice"},
		{[]string{"--config", local, "--replicas", "3"}, 2, `--replicas: the configuration has no rule with a global limit: the fleet model reports what global limits cost; add "global" to a rule or drop --replicas`},
		{[]string{"--config", global, "--replicas", "3"}, 2, "rule api has a global limit but no limit in the service for the fleet model: give --ratelimit-config with the service's descriptor file, or --global-limit api=N/UNIT"},
		{[]string{"--config", global, "--replicas", "3", "--global-limit", "api=10/second", "--global-limit", "other=1/day"}, 2, "--global-limit other: the configuration has no rule other with a global limit"},
		{[]string{"--config", global, "--ratelimit-config", otherDomain}, 2, "--ratelimit-config shapes the fleet model: add --replicas N"},
		{[]string{"--config", global, "--replicas", "3", "--ratelimit-config", otherDomain}, 2, `rule api: its global domain is "d", the file's "other": give the service's file for that domain, or --global-limit api=N/UNIT`},
		{[]string{"--config", global, "--replicas", "3", "--ratelimit-config", noLimit}, 2, "rule api: the file has no limit for the descriptor Tollgate sends, (rule, api) (key, <hash of the key>): add one, or give --global-limit api=N/UNIT"},
		{[]string{"--config", global, "--replicas", "3", "--ratelimit-config", badUnit}, 2, `--ratelimit-config: ` + badUnit + `: descriptors[0].rate_limit.unit: "fortnight"`},
		{[]string{"--config", global, "--replicas", "3", "--ratelimit-config", filepath.Join(out, "none.yaml")}, 2, "--ratelimit-config: "},
		// --global-limit wins over the file, which then need not know the rule: the fleet's flags
		// pass, and the run stops at the missing module.
		{[]string{"--config", global, "--replicas", "3", "--ratelimit-config", noLimit, "--global-limit", "api=10/second", "--wasm", filepath.Join(out, "none.wasm")}, 1, "cannot read the module"},
	}
	for _, tt := range tests {
		args := append(append([]string(nil), base...), tt.args...)
		code, _, stderr := runCLI("", args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d stderr %q; want exit %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
}

// The fleet model's figures reach summary.json, the report and the table; the limit comes from
// the service's descriptor file.
func TestSimulateFleetWritesItsFigures(t *testing.T) {
	wasm := builtModule(t)
	cfg := writeFile(t, "global.json", fleetTestConfig)
	descriptors := writeFile(t, "ratelimit.yaml", "domain: d\ndescriptors:\n- key: rule\n  value: api\n  descriptors:\n  - key: key\n    rate_limit: {unit: minute, requests_per_unit: 30}\n")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI("", "simulate", "--config", cfg, "--log", fleetTestLog(t), "--out", out, "--wasm", wasm,
		"--replicas", "2", "--workers", "1", "--ratelimit-config", descriptors)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "fleet model: 2 replicas of 1 worker VMs, round-robin balance") {
		t.Errorf("stdout lacks the fleet table:\n%s", stdout)
	}
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Fleet struct {
			Replicas int
			Rules    []struct {
				Rule          string
				GlobalLimit   string                                   `json:"global_limit"`
				WithLeases    struct{ Checked, Admitted, Calls int64 } `json:"with_leases"`
				WithoutLeases struct{ Checked, Admitted, Calls int64 } `json:"without_leases"`
			}
		}
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Fleet.Rules) != 1 {
		t.Fatalf("summary.json's fleet: %s", data)
	}
	r := s.Fleet.Rules[0]
	// 40 requests, 30 a minute: without leases 30 admitted, a call each; with them never more,
	// at most a lease per replica less (2 × max_tokens), and fewer calls.
	if r.Rule != "api" || r.GlobalLimit != "30/minute" || r.WithoutLeases.Admitted != 30 || r.WithoutLeases.Calls != 40 ||
		r.WithLeases.Admitted > 30 || r.WithLeases.Admitted < 30-2*4 || r.WithLeases.Calls >= 40 {
		t.Errorf("summary.json's fleet: %+v", r)
	}
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil || !strings.Contains(string(page), "<h2>Fleet model</h2>") {
		t.Errorf("report.html: %v, no fleet section", err)
	}
}
