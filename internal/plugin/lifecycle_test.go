package plugin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
)

// lifecycleConfig: two tokens per key, one more every 10 s; a cost header; an exempt health
// check; escaped slashes refused; a shaped rejection.
const lifecycleConfig = `{"rules": [{"name": "api", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "10s"}],
  "cost": {"header": "x-cost", "max": 2}}],
 "exempt": {"paths": [{"exact": "/healthz"}]},
 "escaped_slashes": "reject",
 "rate_limit_headers": "x-ratelimit",
 "response": {"body": "wait {retry_after}s", "headers": {"x-why": "quota"}}}`

// A stream's whole life for each verdict, at fixed instants: what the client gets, what the
// upstream gets, and the response's rate-limit headers.
func TestLifecycleOfEachVerdict(t *testing.T) {
	host := rig(t, lifecycleConfig)
	const s = int64(1e9)
	spoofed := [2]string{ShadowHeader, "api"}
	steps := []struct {
		at      int64 // since the start
		req     abitest.Request
		outcome string
		// headers: of the reply, or of the response after a 200 from the upstream.
		headers string
		body    string
	}{
		{0, keyed("alice", "/", spoofed), "continued", "limit=2 remaining=1 reset=10 why=", ""},
		{0, keyed("alice", "/"), "continued", "limit=2 remaining=0 reset=20 why=", ""},
		// Empty bucket: the next token in 10 s, the bucket whole in 20 s.
		{0, keyed("alice", "/"), "429 ra=10", "limit=2 remaining=0 reset=20 why=quota", "wait 10s"},
		{4 * s, keyed("alice", "/"), "429 ra=6", "limit=2 remaining=0 reset=16 why=quota", "wait 6s"},
		{4 * s, keyed("bob", "/", [2]string{"x-cost", "2"}), "continued", "limit=2 remaining=0 reset=20 why=", ""},
		{10 * s, keyed("alice", "/", [2]string{"x-cost", "many"}), "400 ra=", "limit= remaining= reset= why=",
			"Bad Request: header x-cost must be a whole number (rate limit rule api)\n"},
		{10 * s, keyed("alice", "/"), "continued", "limit=2 remaining=0 reset=20 why=", ""},
		{10 * s, keyed("", "/"), "401 ra=", "limit= remaining= reset= why=",
			"Unauthorized: the request has no header x-api-key (rate limit rule api)\n"},
		{10 * s, keyed("alice", "/a%2Fb"), "400 ra=", "limit= remaining= reset= why=",
			"Bad Request: the path spells a slash as %2F or %5C, which this gateway refuses (escaped_slashes \"reject\")\n"},
		{10 * s, keyed("", "/healthz", spoofed), "continued", "limit= remaining= reset= why=", ""},
	}
	for i, step := range steps {
		host.SetMonotonic(abitest.DefaultMonotonic + step.at)
		stream, _ := host.Request(step.req)
		got := outcome(stream)
		header, body := stream.ResponseHeader, ""
		if r := stream.Reply(); r != nil {
			header, body = r.Header, string(r.Body)
		} else if stream.Continued() {
			if fwd := fmt.Sprint(stream.Forwarded()); strings.Contains(fwd, ShadowHeader) {
				t.Errorf("step %d: the client's %s reached the upstream: %s", i, ShadowHeader, fwd)
			}
			stream.ResponseHeaders(200, nil)
		}
		headers := fmt.Sprintf("limit=%s remaining=%s reset=%s why=%s", header("x-ratelimit-limit"),
			header("x-ratelimit-remaining"), header("x-ratelimit-reset"), header("x-why"))
		if got != step.outcome || headers != step.headers || body != step.body {
			t.Errorf("step %d: %s, %s, body %q\nwant %s, %s, body %q", i, got, headers, body, step.outcome, step.headers, step.body)
		}
		if got == "401 ra=" && stream.Reply().Header("www-authenticate") != `Tollgate realm="api"` {
			t.Errorf("step %d: www-authenticate %q", i, stream.Reply().Header("www-authenticate"))
		}
		stream.End()
	}
	checkCounters(t, host, map[string]uint64{
		"tollgate.rule.api.admitted": 4, "tollgate.rule.api.limited": 2, "tollgate.rule.api.invalid_cost": 1,
		"tollgate.rule.api.missing_key": 1, "tollgate.exempt": 1, "tollgate.escaped_slashes_rejected": 1,
		"tollgate.rule.api.shadow_limited": 0, "tollgate.internal_errors": 0,
	})
	if logs := logsAt(host, abi.LogLevelDebug); logs != "[]" {
		t.Errorf("debug lines at info level: %s", logs)
	}
}

// A rejection of a gRPC request carries the configured gRPC status, its body without the
// trailing newline.
func TestRejectionOfAGrpcRequest(t *testing.T) {
	host := rig(t, `{"rules": [{"name": "api", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1m"}]}], "response": {"grpc_status": 8}}`)
	grpc := [2]string{"content-type", "application/grpc+proto"}
	host.Request(keyed("k", "/svc/M", grpc))
	steps := []struct {
		req  abitest.Request
		code int32
	}{
		{keyed("k", "/svc/M", grpc), 8},
		{keyed("", "/svc/M", grpc), grpcUnauthenticated},
		{keyed("k", "/svc/M"), grpcNone},
	}
	for i, step := range steps {
		stream, _ := host.Request(step.req)
		r := stream.Reply()
		if r == nil || r.GrpcStatus != step.code {
			t.Fatalf("step %d: reply %+v, want gRPC status %d", i, r, step.code)
		}
	}
}

// A key from the client's address: two addresses, two buckets.
func TestClientAddressKey(t *testing.T) {
	host := rig(t, `{"rules": [{"name": "ip", "key": [{"client_ip": {}}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1m"}]}]}`)
	steps := []struct{ address, outcome string }{
		{"192.0.2.1:5000", "continued"}, {"192.0.2.1:5001", "429 ra=60"}, {"198.51.100.7:5000", "continued"},
	}
	for i, step := range steps {
		req := keyed("", "/")
		req.SourceAddress = step.address
		if s, _ := host.Request(req); outcome(s) != step.outcome {
			t.Errorf("request %d from %s: %s, want %s", i, step.address, outcome(s), step.outcome)
		}
	}
}
