package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// Hostile input through the real module: the spellings, addresses and keys a client picks to get
// more than its limit.

// With ipv6_prefix 64, a client that owns a /64 has one bucket however many addresses it uses;
// zones are dropped.
func TestIPv6ClientsAreGroupedByPrefix(t *testing.T) {
	g := newRig(t, host.Envoy133, `{"client_ip": {"ipv6_prefix": 64},
	  "rules": [{"name": "per-client", "key": [{"client_ip": {}}],
	    "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}]}]}`, 2)
	runPolicy(t, g, []policyStep{
		{name: "one address", req: httpReq("GET", "/", "[2001:db8:1:2::1]:40000"), status: 200},
		{name: "another address of the /64", req: httpReq("GET", "/", "[2001:db8:1:2:aaaa::7]:40000"), status: 200},
		{name: "a third address of the /64 is over", req: httpReq("GET", "/", "[2001:db8:1:2:ffff:ffff:ffff:ffff]:40000"), status: 429},
		{name: "with a zone, still over", req: httpReq("GET", "/", "[2001:db8:1:2::1%eth0]:40000"), status: 429},
		{name: "the next /64 is another client", req: httpReq("GET", "/", "[2001:db8:1:3::1]:40000"), status: 200},
		{name: "IPv4 stays per address", req: httpReq("GET", "/", "192.0.2.1:40000"), status: 200},
		{name: "IPv4 stays per address, another", req: httpReq("GET", "/", "192.0.2.2:40000"), status: 200},
	})
}

// withAuthority returns r with its :authority replaced.
func withAuthority(r host.Request, authority string) host.Request {
	for i := range r.Headers {
		if r.Headers[i][0] == ":authority" {
			r.Headers[i][1] = authority
		}
	}
	return r
}

// A host with a trailing dot is the same host, for match.hosts and the authority key part.
func TestHostsWithATrailingDotThroughTheModule(t *testing.T) {
	g := newRig(t, host.Envoy133, `{"rules": [
	  {"name": "api", "match": {"hosts": ["api.example.com"]}, "key": [{"client_ip": {}}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "per-host", "match": {"hosts": ["www.example.com"]}, "key": [{"authority": {}}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`, 2)
	get := func(authority, source string) host.Request {
		return withAuthority(httpReq("GET", "/", source), authority)
	}
	runPolicy(t, g, []policyStep{
		{name: "api", req: get("api.example.com", peer), status: 200},
		{name: "api, fully qualified", req: get("api.example.com.", peer), status: 429},
		{name: "api, fully qualified with a port", req: get("API.example.com.:80", peer), status: 429},
		{name: "www", req: get("www.example.com:80", "192.0.2.1:1"), status: 200},
		{name: "www, fully qualified, from elsewhere: the same key", req: get("WWW.example.com.:80", "192.0.2.2:1"), status: 429},
	})
}

// A long key is a key: a 1,100-byte x-user is limited under missing_key allow, a long token is
// never answered 401, and a 1,020-byte value is within the default 1,024.
func TestLongKeysAreLimitedThroughTheModule(t *testing.T) {
	g := newRig(t, host.Envoy133, `{"rules": [
	  {"name": "users", "match": {"path": {"prefix": "/users/"}}, "key": [{"header": "x-user"}], "missing_key": {"action": "allow"},
	   "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "tokens", "match": {"path": {"prefix": "/tokens/"}}, "key": [{"header": "authorization"}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`, 2)
	user, token, within := strings.Repeat("u", 1100), "Bearer "+strings.Repeat("j", 4000), strings.Repeat("w", 1020)
	runPolicy(t, g, []policyStep{
		{name: "1,100-byte user", req: httpReq("GET", "/users/a", peer, "x-user", user), status: 200},
		{name: "1,100-byte user again", req: httpReq("GET", "/users/a", peer, "x-user", user), status: 200},
		{name: "1,100-byte user, over", req: httpReq("GET", "/users/a", peer, "x-user", user), status: 429},
		{name: "1,100-byte user, over on the other worker", req: httpReq("GET", "/users/a", peer, "x-user", user), status: 429},
		{name: "1,020-byte user", req: httpReq("GET", "/users/a", peer, "x-user", within), status: 200},
		{name: "1,020-byte user again", req: httpReq("GET", "/users/a", peer, "x-user", within), status: 200},
		{name: "1,020-byte user, over", req: httpReq("GET", "/users/a", peer, "x-user", within), status: 429},
		{name: "long token", req: httpReq("GET", "/tokens/a", peer, "authorization", token), status: 200},
		{name: "long token, over", req: httpReq("GET", "/tokens/a", peer, "authorization", token), status: 429},
	})
}

// The spellings that slipped past a prefix rule and through an exemption against nginx, Tomcat,
// Jetty and IIS upstreams: a limit applies if any reading of the path matches it, an exemption
// only if every reading is exempt.
func TestPathSpellingsThroughTheModule(t *testing.T) {
	g := newRig(t, host.Envoy133, `{"exempt": {"paths": [{"prefix": "/public/"}]}, "rules": [
	  {"name": "api", "match": {"path": {"prefix": "/api/"}}, "key": [{"client_ip": {}}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "ip", "match": {"path": {"prefix": "/ip/"}}, "key": [{"client_ip": {}}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`, 2)
	steps := []policyStep{{name: "/api/x uses the one token", req: httpReq("GET", "/api/x", peer), status: 200}}
	for _, path := range []string{"/api%2Fx", "/api%2fx", "/x/..%2Fapi/x", "/api;/x", "/api;v=1/x", `/api\x`} {
		steps = append(steps, policyStep{name: path, req: httpReq("GET", path, peer), status: 429})
	}
	steps = append(steps, policyStep{name: "/ip/x uses the one token", req: httpReq("GET", "/ip/x", peer), status: 200})
	for _, path := range []string{"/public/..%2fip/x", "/public/%2e%2e%2fip/x", "/public/..;/ip/x", `/public/..\ip/x`} {
		steps = append(steps, policyStep{name: path, req: httpReq("GET", path, peer), status: 429})
	}
	for _, path := range []string{"/public/x", "/public/a%2Fb", "/public/a;v=1"} {
		steps = append(steps, policyStep{name: path + " is exempt", req: httpReq("GET", path, peer), status: 200})
	}
	runPolicy(t, g, steps)
	if n := g.counter("tollgate.exempt"); n != 3 {
		t.Fatalf("tollgate.exempt = %d, want 3", n)
	}
}

// escaped_slashes "reject" answers 400 for %2F and %5C in the path, and counts it.
func TestEscapedSlashesRejectThroughTheModule(t *testing.T) {
	g := newRig(t, host.Envoy133, `{"escaped_slashes": "reject", "rules": [{"name": "r", "key": [{"client_ip": {}}],
	  "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1h"}]}]}`, 2)
	runPolicy(t, g, []policyStep{
		{name: "plain", req: httpReq("GET", "/api/x", peer), status: 200},
		{name: "%2F", req: httpReq("GET", "/api%2Fx", peer), status: 400, body: "%2F or %5C"},
		{name: "%5c", req: httpReq("GET", "/api%5cx", peer), status: 400, body: "%2F or %5C"},
		{name: "in the query", req: httpReq("GET", "/api/x?next=%2F", peer), status: 200},
	})
	if n := g.counter("tollgate.escaped_slashes_rejected"); n != 2 {
		t.Fatalf("tollgate.escaped_slashes_rejected = %d, want 2", n)
	}
}

// A configuration over config.MaxSize is refused by the module before it is copied in, with one
// critical line; one byte under that is read and judged on its content.
func TestOversizeConfigurationIsRefusedByTheModule(t *testing.T) {
	const rule = `{"rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]`
	for _, tc := range []struct {
		name string
		doc  string
		want string // "" for a valid configuration
	}{
		{"over the maximum", rule + strings.Repeat(" ", config.MaxSize) + "}", "tollgate: invalid configuration: " + config.ErrTooLarge.Problems[0].Message},
		{"at the maximum", rule + strings.Repeat(" ", config.MaxSize-len(rule)-1) + "}", ""},
		{"a byte-order mark", "\xef\xbb\xbf" + rule + "}", "tollgate: invalid configuration: the configuration starts with a UTF-8 byte-order mark"},
	} {
		var critical []string
		h, err := host.New(context.Background(), module(t), host.Options{
			PluginName: "tollgate", PluginConfig: []byte(tc.doc), CompilationCache: cache,
			Log: func(e host.LogEntry) {
				if e.Level == 5 {
					critical = append(critical, e.Message)
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.NewVM(context.Background())
		h.Close(context.Background())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v (%q)", tc.name, err, critical)
		case tc.want != "" && (err == nil || len(critical) != 1 || !strings.HasPrefix(critical[0], tc.want)):
			t.Errorf("%s: start %v, critical lines %q; want one starting with %q", tc.name, err, critical, tc.want)
		}
	}
}

// X-RateLimit-Reset is what the documentation says, on admitted responses and on a 429 alike:
// seconds until the limit is whole again. Retry-After says when the request would be admitted.
func TestXRateLimitResetMeansWholeAgain(t *testing.T) {
	g := newRig(t, host.Envoy133, `{"rate_limit_headers": "x-ratelimit", "rules": [{"name": "r", "key": [{"client_ip": {}}],
	  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "10s"}]}]}`, 2)
	get := httpReq("GET", "/", peer)
	runPolicy(t, g, []policyStep{
		{name: "2 left, whole in 10 s", req: get, status: 200, headers: map[string]string{"x-ratelimit-remaining": "2", "x-ratelimit-reset": "10"}},
		{name: "1 left, whole in 20 s", req: get, status: 200, headers: map[string]string{"x-ratelimit-remaining": "1", "x-ratelimit-reset": "20"}},
		{name: "0 left, whole in 30 s", req: get, status: 200, headers: map[string]string{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "30"}},
		{name: "rejected: retry in 10 s, whole in 30 s", req: get, status: 429,
			headers: map[string]string{"retry-after": "10", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "30"}},
		{name: "4 s later: retry in 6 s, whole in 26 s", at: 4 * time.Second, req: get, status: 429,
			headers: map[string]string{"retry-after": "6", "x-ratelimit-reset": "26"}},
	})
}

// The spellings of one host that Envoy routes to one virtual host share one bucket of an
// authority key: an empty port, the default port with or without leading zeros, upper case, a
// trailing dot; with strip_port, any port.
func TestAuthoritySpellingsThroughTheModule(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy139, `{"rules": [
	  {"name": "per-host", "match": {"path": {"prefix": "/a/"}}, "key": [{"authority": {}}],
	   "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "per-host-any-port", "match": {"path": {"prefix": "/b/"}}, "key": [{"authority": {"strip_port": true}}],
	   "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}]}]}`, 2)
	at := func(path, authority string) host.Request {
		r := httpReq("GET", path, peer)
		r.Headers[2][1] = authority
		return r
	}
	var steps []policyStep
	for _, prefix := range []string{"/a/", "/b/"} {
		steps = append(steps,
			policyStep{name: prefix + " host", req: at(prefix, "api.example.com"), status: 200},
			policyStep{name: prefix + " host:80", req: at(prefix, "api.example.com:80"), status: 200})
		for _, spelling := range []string{"api.example.com:", "api.example.com:080", "api.example.com:0080", "API.example.com.:80", "api.example.com."} {
			steps = append(steps, policyStep{name: prefix + " " + spelling, req: at(prefix, spelling), status: 429})
		}
	}
	steps = append(steps,
		policyStep{name: "another port is another bucket", req: at("/a/", "api.example.com:1"), status: 200},
		policyStep{name: "unless the port is stripped", req: at("/b/", "api.example.com:1"), status: 429},
		policyStep{name: "or :2", req: at("/b/", "api.example.com:2"), status: 429})
	runPolicy(t, g, steps)
}
