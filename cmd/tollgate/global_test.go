package main

import (
	"strings"
	"testing"
)

const globalConfig = `{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 100, "refill_tokens": 10, "refill_interval": "1s"}],
  "global": {"cluster": "ratelimit", "domain": "tollgate", "timeout": "25ms", "failure_mode": "deny"}}]}`

func TestCheckShowsGlobalLimits(t *testing.T) {
	file := writeFile(t, "global.json", globalConfig)
	code, stdout, stderr := runCLI("", "check", file)
	want := file + ": rule per-key: global limit from cluster ratelimit, domain tollgate, timeout 25ms, failure_mode deny"
	if code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("exit %d stdout %q stderr %q; want %q", code, stdout, stderr, want)
	}
}

func TestCheckShowsLeasesAndNamesTheirProblems(t *testing.T) {
	leased := strings.Replace(globalConfig, `"failure_mode": "deny"`, `"failure_mode": "deny", "lease": {"max_tokens": 16}`, 1)
	file := writeFile(t, "lease.json", leased)
	code, stdout, stderr := runCLI("", "check", file)
	want := file + ": rule per-key: global limit from cluster ratelimit, domain tollgate, timeout 25ms, failure_mode deny, leases of up to 16 tokens for 1s"
	if code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("exit %d stdout %q stderr %q; want %q", code, stdout, stderr, want)
	}
	bad := strings.Replace(globalConfig, `"failure_mode": "deny"`, `"lease": {"max_tokens": 0, "ttl": "5ms"}`, 1)
	file = writeFile(t, "bad-lease.json", bad)
	code, _, stderr = runCLI("", "check", file)
	for _, want := range []string{
		`rules[0].global.lease.max_tokens: 0 is not allowed: max_tokens is the most tokens one lease request asks the service for, a whole number from 1 to 10000`,
		`rules[0].global.lease.ttl: "5ms" is shorter than 10ms: ttl is how long leased tokens may be spent`,
	} {
		if code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d stderr %q; want %q", code, stderr, want)
		}
	}
}

func TestServeNeedsAnAddressForEveryGlobalCluster(t *testing.T) {
	file := writeFile(t, "global.json", globalConfig)
	tests := []struct {
		args []string
		want string
	}{
		{nil, `rules[0].global.cluster "ratelimit" has no address: add --grpc-cluster ratelimit=HOST:PORT`},
		{[]string{"--grpc-cluster", "other=127.0.0.1:1"}, `rules[0].global.cluster "ratelimit" has no address`},
		{[]string{"--grpc-cluster", "ratelimit"}, "want NAME=HOST:PORT"},
		{[]string{"--grpc-cluster", "=127.0.0.1:1"}, "want NAME=HOST:PORT"},
		{[]string{"--grpc-cluster", "ratelimit=localhost"}, `"localhost" is not HOST:PORT`},
		{[]string{"--grpc-cluster", "ratelimit=127.0.0.1:1", "--grpc-cluster", "ratelimit=127.0.0.1:2"}, `cluster "ratelimit" is given twice`},
	}
	for _, tt := range tests {
		args := append([]string{"serve", "--config", file, "--upstream", "http://127.0.0.1:1"}, tt.args...)
		code, _, stderr := runCLI("", args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d stderr %q; want exit 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}
