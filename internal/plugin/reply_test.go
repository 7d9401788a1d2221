package plugin

import (
	"fmt"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
)

// A rejection like the one before is sent from the buffers it was built in: each reply must
// still be exactly its own, whether the next differs in Retry-After, in its rate-limit headers
// or in being a gRPC request (whose body Envoy sends without the trailing newline).
func TestEachRejectionIsItsOwn(t *testing.T) {
	const s = int64(1e9)
	grpc := [2]string{"content-type", "application/grpc"}
	for _, tc := range []struct {
		name, headers string
		steps         []struct {
			at    int64
			req   abitest.Request
			reply string
		}
	}{
		{name: "no rate-limit headers", steps: []struct {
			at    int64
			req   abitest.Request
			reply string
		}{
			{0, keyed("alice", "/"), "no reply"},
			{0, keyed("alice", "/"), `429 [[retry-after 10] [content-type text/plain] [x-why quota] [content-length 9]] "wait 10s\n"`},
			{0, keyed("alice", "/"), `429 [[retry-after 10] [content-type text/plain] [x-why quota] [content-length 9]] "wait 10s\n"`},
			{0, keyed("alice", "/", grpc), `200 [[retry-after 10] [content-type application/grpc] [x-why quota] [grpc-status 8] [grpc-message wait 10s]] ""`},
			{0, keyed("alice", "/"), `429 [[retry-after 10] [content-type text/plain] [x-why quota] [content-length 9]] "wait 10s\n"`},
			{1 * s, keyed("alice", "/"), `429 [[retry-after 9] [content-type text/plain] [x-why quota] [content-length 8]] "wait 9s\n"`},
			{1 * s, keyed("bob", "/"), "no reply"},
			{1 * s, keyed("bob", "/"), `429 [[retry-after 10] [content-type text/plain] [x-why quota] [content-length 9]] "wait 10s\n"`},
		}},
		{name: "rate-limit headers", headers: `, "rate_limit_headers": "x-ratelimit"`, steps: []struct {
			at    int64
			req   abitest.Request
			reply string
		}{
			{0, keyed("alice", "/"), "no reply"},
			{0, keyed("alice", "/"), `429 [[retry-after 10] [content-type text/plain] [x-why quota] [x-ratelimit-limit 1] [x-ratelimit-remaining 0] [x-ratelimit-reset 10] [content-length 9]] "wait 10s\n"`},
			{5 * s, keyed("alice", "/"), `429 [[retry-after 5] [content-type text/plain] [x-why quota] [x-ratelimit-limit 1] [x-ratelimit-remaining 0] [x-ratelimit-reset 5] [content-length 8]] "wait 5s\n"`},
			{5 * s, keyed("alice", "/"), `429 [[retry-after 5] [content-type text/plain] [x-why quota] [x-ratelimit-limit 1] [x-ratelimit-remaining 0] [x-ratelimit-reset 5] [content-length 8]] "wait 5s\n"`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := rig(t, `{"rules": [{"name": "api", "key": [{"header": "x-api-key"}],
			  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "10s"}]}],
			  "response": {"body": "wait {retry_after}s\n", "content_type": "text/plain", "headers": {"x-why": "quota"}, "grpc_status": 8}`+
				tc.headers+`}`)
			for i, step := range tc.steps {
				host.SetMonotonic(abitest.DefaultMonotonic + step.at)
				stream, _ := host.Request(step.req)
				if got := replyText(stream); got != step.reply {
					t.Errorf("step %d: got %s\nwant %s", i, got, step.reply)
				}
				stream.End()
			}
		})
	}
}

// A local rejection with rate-limit headers, then a global one with the same Retry-After and
// none (the service sent no status to describe): the second must not carry the first's.
func TestRejectionHeadersAreNotCarriedOver(t *testing.T) {
	host := rig(t, globalConfig(`{"name": "g", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}],
	  "global": {"cluster": "ratelimit", "domain": "dom", "timeout": "20ms", "failure_mode": "allow"}}`))
	first, _ := host.Request(keyed("alice", "/"))
	host.Answer(onlyCall(t, host, "alice", 0).Token, rlsAnswer(rlsOK, 10, unitMinute, 9, 30000))
	if got := outcome(first); got != "continued" {
		t.Fatalf("alice's first request: %s, want continued", got)
	}
	local, _ := host.Request(keyed("alice", "/"))
	global, _ := host.Request(keyed("bob", "/"))
	host.Answer(onlyCall(t, host, "bob", 0).Token, rlsAnswer(rlsOverLimit, 0, 0, 0, -1))
	for _, tc := range []struct {
		name   string
		stream *abitest.Stream
		want   string
	}{
		{"local", local, "[[retry-after 1] [content-type text/plain; charset=utf-8] [x-ratelimit-limit 1] [x-ratelimit-remaining 0] [x-ratelimit-reset 1] [content-length 35]]"},
		{"global", global, "[[retry-after 1] [content-type text/plain; charset=utf-8] [content-length 35]]"},
	} {
		r := tc.stream.Reply()
		if r == nil || r.Status != 429 || fmt.Sprint(r.Headers) != tc.want {
			t.Errorf("%s rejection: %+v, want 429 with %s", tc.name, r, tc.want)
		}
	}
}

// Each request refused before any limit is read gets its own reply, though the last is kept to
// be sent again: a refusal of another kind, rule or part in between, and a gRPC request (whose
// body Envoy sends as grpc-message, without the newline), change what the next one gets.
func TestEachRefusalIsItsOwn(t *testing.T) {
	host := rig(t, `{"escaped_slashes": "reject", "rules": [
	  {"name": "api", "key": [{"header": "x-api-key"}], "cost": {"header": "x-cost", "max": 5},
	   "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "users", "match": {"path": {"prefix": "/users"}}, "key": [{"query": "user"}],
	   "missing_key": {"action": "reject", "status": 403},
	   "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	const (
		noKey = `401 [[content-type text/plain; charset=utf-8] [www-authenticate Tollgate realm="api"] [content-length 72]] ` +
			`"Unauthorized: the request has no header x-api-key (rate limit rule api)\n"`
		badCost = `400 [[content-type text/plain; charset=utf-8] [content-length 72]] ` +
			`"Bad Request: header x-cost must be a whole number (rate limit rule api)\n"`
		escaped = `400 [[content-type text/plain; charset=utf-8] [content-length 106]] ` +
			`"Bad Request: the path spells a slash as %2F or %5C, which this gateway refuses (escaped_slashes \"reject\")\n"`
		noUser = `403 [[content-type text/plain; charset=utf-8] [content-length 75]] ` +
			`"Forbidden: the request has no query parameter user (rate limit rule users)\n"`
		noKeyGrpc = `200 [[content-type application/grpc] [www-authenticate Tollgate realm="api"] [grpc-status 16] ` +
			`[grpc-message Unauthorized: the request has no header x-api-key (rate limit rule api)]] ""`
	)
	for i, step := range []struct {
		req   abitest.Request
		reply string
	}{
		{keyed("", "/"), noKey},
		{keyed("", "/"), noKey},
		{keyed("alice", "/", [2]string{"x-cost", "many"}), badCost},
		{keyed("", "/"), noKey},
		{keyed("alice", "/a%2Fb"), escaped},
		{keyed("alice", "/users?id=1"), noUser},
		{keyed("alice", "/users?id=2"), noUser},
		{keyed("", "/", [2]string{"content-type", "application/grpc"}), noKeyGrpc},
		{keyed("", "/"), noKey},
	} {
		stream, _ := host.Request(step.req)
		if got := replyText(stream); got != step.reply {
			t.Errorf("step %d: got %s\nwant %s", i, got, step.reply)
		}
		stream.End()
	}
}

// replyText is a stream's local reply in one comparable string: status, headers and body.
func replyText(s *abitest.Stream) string {
	if r := s.Reply(); r != nil {
		return fmt.Sprintf("%d %v %q", r.Status, r.Headers, r.Body)
	}
	return "no reply"
}

// Envoy's test for a gRPC request (Grpc::Common::isGrpcRequestHeaders): content-type
// application/grpc, alone or with a "+" suffix, compared exactly.
func TestIsGrpcContentType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc":        true,
		"application/grpc+proto":  true,
		"application/grpc+":       true,
		"application/grpc-web":    false,
		"application/grpcx":       false,
		"application/grp":         false,
		"Application/grpc":        false,
		"application/grpc;q=1":    false,
		"":                        false,
		"text/plain":              false,
		"application/grpc-web+pb": false,
	} {
		if got := isGrpcContentType([]byte(ct)); got != want {
			t.Errorf("isGrpcContentType(%q) = %v, want %v", ct, got, want)
		}
	}
}
