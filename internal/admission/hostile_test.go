package admission

import (
	"strings"
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
		{"authority key", 0, req("192.0.2.1:1", ":authority", "www.example.com:8080"), Allow, -1, 0},
		{"authority key, fully qualified", 0, req("192.0.2.2:1", ":authority", "WWW.example.com.:8080"), Limited, 1, time.Hour},
		{"authority key, another port", 0, req("192.0.2.2:1", ":authority", "www.example.com.:8081"), Allow, -1, 0},
		{"authority key, no port", 0, req("192.0.2.2:1", ":authority", "www.example.com."), Allow, -1, 0},
		{"authority key, no port again", 0, req("192.0.2.2:1", ":authority", "www.example.com"), Limited, 1, time.Hour},
	})
}

// Every spelling of one authority that Envoy routes to one place is one bucket of an authority
// key: an empty port, the scheme's default port, leading zeros, upper case and one trailing dot
// change nothing; another port is another bucket, unless the part strips the port.
func TestAuthoritySpellingsShareOneBucket(t *testing.T) {
	const limit = `"limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]`
	g := mustGate(t, `{"rules": [
	  {"name": "port", "match": {"path": {"prefix": "/port/"}}, "key": [{"authority": {}}], `+limit+`},
	  {"name": "host", "match": {"path": {"prefix": "/host/"}}, "key": [{"authority": {"strip_port": true}}], `+limit+`}]}`)
	type spelling struct {
		authority, scheme string
		port, host        bool // a new bucket of the rule keyed with the port, and of the one without
	}
	spellings := []spelling{
		{"api.example.com", "http", true, true},
		{"api.example.com:", "http", false, false},
		{"api.example.com:80", "http", false, false},
		{"api.example.com:080", "http", false, false},
		{"api.example.com:0080", "", false, false},
		{"API.example.com.:80", "HTTP", false, false},
		{"api.example.com.", "https", false, false},
		{"api.example.com:443", "https", false, false},
		{"api.example.com:443", "http", true, false},
		{"api.example.com:0443", "http", false, false},
		{"api.example.com:80", "https", true, false},
		{"api.example.com:1", "http", true, false},
		{"api.example.com:01", "http", false, false},
		{"api.example.com:0", "http", true, false},
		{"api.example.com:00", "http", false, false},
		{"api.example.com..", "http", true, true},
		{"[2001:db8::1]:0443", "https", true, true},
		{"[2001:DB8::1]", "https", false, false},
		{"[2001:db8::1]:8443", "https", true, false},
	}
	store := newMemStore()
	for i, s := range spellings {
		for _, rule := range []struct {
			prefix string
			fresh  bool
		}{{"/port/", s.port}, {"/host/", s.host}} {
			r := req("192.0.2.1:1", ":authority", s.authority, ":path", rule.prefix+"x")
			if s.scheme != "" {
				r.headers[":scheme"] = s.scheme
			}
			out := g.Admit(r, store, 1000*sec+int64(i))
			if got := out.Verdict == Allow; got != rule.fresh {
				t.Errorf("%s %q (scheme %q): admitted %v, want %v (admitted means a bucket of its own)",
					rule.prefix, s.authority, s.scheme, got, rule.fresh)
			}
		}
	}
}

// A key longer than max_key_bytes is limited as a key (by its digest), never treated as missing;
// the limit counts the values, not the framing between them.
func TestLongKeysAreLimitedAsKeys(t *testing.T) {
	g := mustGate(t, `{"key_table": {"max_key_bytes": 16}, "rules": [
	  {"name": "one", "match": {"path": {"exact": "/one"}}, "key": [{"header": "k"}], "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "two", "match": {"path": {"exact": "/two"}}, "key": [{"header": "k"}, {"header": "j"}], "missing_key": {"action": "allow"},
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "fallback", "match": {"path": {"exact": "/fallback"}}, "key": [{"header": "x"}],
	   "missing_key": {"action": "fallback", "key": [{"header": "k"}]}, "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	sixteen, long, longToo := strings.Repeat("s", 16), strings.Repeat("L", 17), strings.Repeat("L", 16)+"M"
	huge := strings.Repeat("h", 64<<10)
	get := func(path string, headers ...string) fakeRequest {
		return req("192.0.2.1:1", append([]string{":path", path}, headers...)...)
	}
	runSteps(t, g, newMemStore(), []step{
		{"exactly the limit", 0, get("/one", "k", sixteen), Allow, -1, 0},
		{"exactly the limit again", 0, get("/one", "k", sixteen), Allow, -1, 0},
		{"exactly the limit, over", 0, get("/one", "k", sixteen), Limited, 0, time.Hour},
		{"one byte over", 0, get("/one", "k", long), Allow, -1, 0},
		{"one byte over again", 0, get("/one", "k", long), Allow, -1, 0},
		{"one byte over is limited like any key", 0, get("/one", "k", long), Limited, 0, time.Hour},
		{"another long value has its own bucket", 0, get("/one", "k", longToo), Allow, -1, 0},
		{"64 KiB", 0, get("/one", "k", huge), Allow, -1, 0},
		{"64 KiB again", 0, get("/one", "k", huge), Allow, -1, 0},
		{"64 KiB, over", 0, get("/one", "k", huge), Limited, 0, time.Hour},
		{"two parts of 10 bytes: 20 over 16", 0, get("/two", "k", "0123456789", "j", "abcdefghij"), Allow, -1, 0},
		{"two parts of 10 bytes, over", 0, get("/two", "k", "0123456789", "j", "abcdefghij"), Limited, 1, time.Hour},
		{"the parts split elsewhere are another key", 0, get("/two", "k", "0123456789a", "j", "bcdefghij"), Allow, -1, 0},
		{"long fallback key", 0, get("/fallback", "k", huge), Allow, -1, 0},
		{"long fallback key, over", 0, get("/fallback", "k", huge), Limited, 2, time.Hour},
	})
	// Long values are digested as they are read: the key buffer never holds one.
	if c := cap(g.keyBuf); c > 1024 {
		t.Fatalf("the key buffer grew to %d bytes for a limit of 16", c)
	}
}

// The readings of a path: the plain RFC 3986 one first, the most decoded last, each once.
func TestPathReadings(t *testing.T) {
	for path, want := range map[string][]string{
		"/api/x":                {"/api/x"},
		"":                      {""},
		"/api%2Fx":              {"/api%2Fx", "/api/x"},
		"/x/..%2Fapi/x":         {"/x/..%2Fapi/x", "/api/x"},
		"/api;/x":               {"/api;/x", "/api/x"},
		"/api;v=1/x":            {"/api;v=1/x", "/api/x"},
		`/api\x`:                {`/api\x`, "/api/x"},
		"/public/..%2fip/x":     {"/public/..%2fip/x", "/ip/x"},
		"/public/%2e%2e%2fip/x": {"/public/..%2fip/x", "/ip/x"},
		"/public/..;/ip/x":      {"/public/..;/ip/x", "/ip/x"},
		`/public/..\ip/x`:       {`/public/..\ip/x`, "/ip/x"},
		"/a;b%2F../api":         {"/a;b%2F../api", "/api", "/a/api"},
		"/files/a%2Fb;v=2":      {"/files/a%2Fb;v=2", "/files/a/b;v=2", "/files/a%2Fb", "/files/a/b"},
		"/%5c%5C/api/":          {"/%5c%5C/api/", "/api/"},
		"/a/./b/../c;x/.;/d%41": {"/a/c;x/.;/dA", "/a/c/dA"},
	} {
		got := new(pathReadings).read(path)
		if strings.Join(got, " | ") != strings.Join(want, " | ") {
			t.Errorf("readings of %q: %q, want %q", path, got, want)
		}
	}
}

// A limit applies if any reading of the path matches it; an exemption only if every reading is
// exempt. The spellings an attacker used against nginx, Tomcat and IIS upstreams.
func TestPathSpellingsCannotSlipPastARule(t *testing.T) {
	g := mustGate(t, `{"exempt": {"paths": [{"prefix": "/public/"}, {"exact": "/healthz"}]}, "rules": [
	  {"name": "api", "match": {"path": {"prefix": "/api/"}}, "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "ip", "match": {"path": {"prefix": "/ip/"}}, "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "login", "match": {"path": {"exact": "/login"}}, "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	get := func(path string) fakeRequest { return req("192.0.2.1:1", ":path", path) }
	steps := []step{{"the one token", 0, get("/api/x"), Allow, -1, 0}}
	for _, path := range []string{"/api%2Fx", "/api%2fx", "/x/..%2Fapi/x", "/api;/x", "/api;v=1/x", `/api\x`, "/api%5cx", "/api/x;jsessionid=1"} {
		steps = append(steps, step{path, 0, get(path), Limited, 0, time.Hour})
	}
	steps = append(steps, step{"the exempt prefix", 0, get("/public/x"), Exempt, -1, 0},
		step{"an exempt path with an escaped slash inside it", 0, get("/public/a%2Fb"), Exempt, -1, 0},
		step{"ip's one token", 0, get("/ip/x"), Allow, -1, 0})
	for _, path := range []string{"/public/..%2fip/x", "/public/%2e%2e%2fip/x", "/public/..;/ip/x", `/public/..\ip/x`, "/public/..%5Cip/x"} {
		steps = append(steps, step{path, 0, get(path), Limited, 1, time.Hour})
	}
	steps = append(steps, step{"login", 0, get("/login"), Allow, -1, 0},
		step{"login with a trailing slash", 0, get("/login/"), Limited, 2, time.Hour},
		step{"login with a parameter", 0, get("/login;x=1"), Limited, 2, time.Hour},
		step{"an exact exemption takes no trailing slash", 0, get("/healthz/"), Allow, -1, 0},
		step{"the exact exemption", 0, get("/healthz"), Exempt, -1, 0})
	runSteps(t, g, newMemStore(), steps)
}

// escaped_slashes "reject" answers a path with %2F or %5C, in any case, before anything else.
func TestEscapedSlashesReject(t *testing.T) {
	g := mustGate(t, `{"escaped_slashes": "reject", "exempt": {"paths": [{"prefix": "/public/"}]},
	  "rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	get := func(path string) fakeRequest { return req("192.0.2.1:1", ":path", path) }
	runSteps(t, g, newMemStore(), []step{
		{"plain", 0, get("/api/x"), Allow, -1, 0},
		{"%2F", 0, get("/api%2Fx"), EscapedSlash, -1, 0},
		{"%2f", 0, get("/api%2fx"), EscapedSlash, -1, 0},
		{"%5C", 0, get("/api%5Cx"), EscapedSlash, -1, 0},
		{"%5c in an exempt path", 0, get("/public/..%5cx"), EscapedSlash, -1, 0},
		{"in the query string it is a value", 0, get("/api/x?next=%2Fhome"), Allow, -1, 0},
		{"other escapes", 0, get("/api/%20%2e%41"), Allow, -1, 0},
		{"a truncated escape", 0, get("/api/%2"), Allow, -1, 0},
	})
}

// The path key part takes the most decoded reading: spellings of one path share its bucket.
func TestPathKeyIsTheMostDecodedReading(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "r", "key": [{"path": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	get := func(path string) fakeRequest { return req("192.0.2.1:1", ":path", path) }
	runSteps(t, g, newMemStore(), []step{
		{"a/b", 0, get("/a/b"), Allow, -1, 0},
		{"a%2Fb", 0, get("/a%2Fb"), Limited, 0, time.Hour},
		{"a;x/b", 0, get("/a;x/b"), Limited, 0, time.Hour},
		{"a/c", 0, get("/a/c"), Allow, -1, 0},
	})
}

// Reading paths allocates nothing once the buffer has grown, and the work is a fixed number of
// passes over the path.
func TestPathReadingsDoNotAllocate(t *testing.T) {
	g := mustGate(t, `{"exempt": {"paths": [{"prefix": "/public/"}]}, "rules": [{"name": "r", "match": {"path": {"prefix": "/api/"}},
	  "key": [{"path": {}}, {"header": "k"}], "limits": [{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	g.collectStatus = false
	store := &steadyStore{values: map[string][]byte{}, cas: map[string]uint32{}}
	var r Request = req("192.0.2.1:1", ":path", `/public/..%2Fapi;v=1/x\y/./z?q=1`, "k", strings.Repeat("k", 2000))
	g.Admit(r, store, sec)
	allocs := testing.AllocsPerRun(100, func() {
		if out := g.Admit(r, store, sec); out.Verdict != Allow {
			t.Fatalf("%+v", out)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per decision, want 0", allocs)
	}
}
