package e2e

import (
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// An x-forwarded-for entry with a port at the trusted position is not an address: the key falls
// back to the peer, as Envoy's own hop counting does. Envoy's getLastAddressFromXFF
// (source/common/http/utility.cc) takes the entry and parses it with
// Network::Utility::parseInternetAddressNoThrow, which reads an IP address without a port, and
// returns no address when that fails. Every client such a balancer forwards shares its bucket.
func TestForwardedForEntryWithAPortFallsBackToThePeer(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy133, `{"client_ip": {"xff_num_trusted_hops": 1},
	  "rules": [{"name": "per-ip", "key": [{"client_ip": {}}], "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}]}]}`, 2)
	lb := "10.0.0.2:443"
	runPolicy(t, g, []policyStep{
		{name: "IPv4 with a port: the balancer's bucket", req: httpReq("GET", "/", lb, "x-forwarded-for", "203.0.113.7:5555"), status: 200},
		{name: "IPv6 with a port: the balancer's bucket", req: httpReq("GET", "/", lb, "x-forwarded-for", "[2001:db8::1]:443"), status: 200},
		{name: "another client with a port: the same, spent bucket", req: httpReq("GET", "/", lb, "x-forwarded-for", "198.51.100.9:1"), status: 429},
		{name: "the balancer itself, directly: the same bucket", req: httpReq("GET", "/", lb), status: 429},
		{name: "a bare address: its own bucket", req: httpReq("GET", "/", lb, "x-forwarded-for", "203.0.113.7"), status: 200},
	})
}

// A repeated key header or query parameter is keyed on its first copy only (SECURITY.md,
// "Repeated headers and query parameters"): later copies are neither charged nor read.
func TestRepeatedHeaderAndQueryParameterAreKeyedOnTheFirst(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy133, `{"rules": [
	  {"name": "by-header", "match": {"path": {"prefix": "/h"}}, "key": [{"header": "x-api-key"}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "by-query", "match": {"path": {"prefix": "/q"}}, "key": [{"query": "tenant"}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`, 1)
	runPolicy(t, g, []policyStep{
		{name: "header a then b: charged to a", req: httpReq("GET", "/h", peer, "x-api-key", "a", "x-api-key", "b"), status: 200},
		{name: "header a alone: spent", req: httpReq("GET", "/h", peer, "x-api-key", "a"), status: 429},
		{name: "header b alone: untouched", req: httpReq("GET", "/h", peer, "x-api-key", "b"), status: 200},
		{name: "query a then b: charged to a", req: httpReq("GET", "/q?tenant=a&tenant=b", peer), status: 200},
		{name: "query a alone: spent", req: httpReq("GET", "/q?tenant=a", peer), status: 429},
		{name: "query b alone: untouched", req: httpReq("GET", "/q?tenant=b", peer), status: 200},
		{name: "an empty first copy is a missing key", req: httpReq("GET", "/q?tenant=&tenant=c", peer), status: 401},
	})
}
