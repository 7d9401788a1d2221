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
