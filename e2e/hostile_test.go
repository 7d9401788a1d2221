package e2e

import (
	"strings"
	"testing"

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
