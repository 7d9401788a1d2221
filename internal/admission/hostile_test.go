package admission

import (
	"testing"
	"time"
)

// A client owning an IPv6 /64 has one bucket with ipv6_prefix 64, not one per address; the key
// part's own prefix takes precedence over the top-level one; zones are dropped.
func TestClientAddressGrouping(t *testing.T) {
	g := mustGate(t, `{"client_ip": {"ipv6_prefix": 64, "ipv4_prefix": 24},
	  "rules": [
	    {"name": "net", "match": {"path": {"prefix": "/net/"}}, "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	    {"name": "host", "match": {"path": {"prefix": "/host/"}}, "key": [{"client_ip": {"ipv6_prefix": 128, "ipv4_prefix": 32}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	runSteps(t, g, newMemStore(), []step{
		{"first address of a /64", 0, req("[2001:db8:0:1::1]:1", ":path", "/net/x"), Allow, -1, 0},
		{"another address of that /64", 0, req("[2001:db8:0:1:ffff::9]:1", ":path", "/net/x"), Limited, 0, time.Hour},
		{"the next /64", 0, req("[2001:db8:0:2::1]:1", ":path", "/net/x"), Allow, -1, 0},
		{"first address of a /24", 0, req("192.0.2.1:1", ":path", "/net/x"), Allow, -1, 0},
		{"another address of that /24", 0, req("192.0.2.200:1", ":path", "/net/x"), Limited, 0, time.Hour},
		{"IPv4-mapped in that /24", 0, req("[::ffff:192.0.2.7]:1", ":path", "/net/x"), Limited, 0, time.Hour},
		{"the part's own prefix: whole address", 0, req("[2001:db8:0:1::1]:1", ":path", "/host/x"), Allow, -1, 0},
		{"another address has its own bucket", 0, req("[2001:db8:0:1::2]:1", ":path", "/host/x"), Allow, -1, 0},
		{"the same address with a zone", 0, req("[2001:db8:0:1::2%eth0]:1", ":path", "/host/x"), Limited, 1, time.Hour},
	})
}

// A zone never makes an address miss its exemption.
func TestZonedAddressIsExempt(t *testing.T) {
	g := mustGate(t, `{"exempt": {"client_cidrs": ["fe80::/10"]},
	  "rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	if out := g.Admit(req("[fe80::1%eth0]:1"), newMemStore(), sec); out.Verdict != Exempt {
		t.Fatalf("fe80::1%%eth0: verdict %d, want exempt", out.Verdict)
	}
}

// A trailing dot names the same host: for match.hosts and for the authority key part.
func TestHostsWithATrailingDot(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "api", "match": {"hosts": ["api.example.com"]}, "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "per-host", "match": {"hosts": ["www.example.com"]}, "key": [{"authority": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	runSteps(t, g, newMemStore(), []step{
		{"host", 0, req("192.0.2.1:1", ":authority", "api.example.com"), Allow, -1, 0},
		{"fully qualified", 0, req("192.0.2.1:1", ":authority", "api.example.com."), Limited, 0, time.Hour},
		{"fully qualified, upper case, port", 0, req("192.0.2.1:1", ":authority", "API.example.com.:80"), Limited, 0, time.Hour},
		{"two dots is another name", 0, req("192.0.2.1:1", ":authority", "api.example.com.."), Allow, -1, 0},
		{"authority key", 0, req("192.0.2.1:1", ":authority", "www.example.com:80"), Allow, -1, 0},
		{"authority key, fully qualified", 0, req("192.0.2.2:1", ":authority", "WWW.example.com.:80"), Limited, 1, time.Hour},
		{"authority key, another port", 0, req("192.0.2.2:1", ":authority", "www.example.com.:8080"), Allow, -1, 0},
		{"authority key, no port", 0, req("192.0.2.2:1", ":authority", "www.example.com."), Allow, -1, 0},
		{"authority key, no port again", 0, req("192.0.2.2:1", ":authority", "www.example.com"), Limited, 1, time.Hour},
	})
}
