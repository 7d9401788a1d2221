package admission

import (
	"slices"
	"testing"
	"time"
)

func req(source string, headers ...string) fakeRequest {
	r := fakeRequest{headers: map[string]string{":method": "GET", ":path": "/", ":authority": "api.example.com"}, source: source}
	for i := 0; i+1 < len(headers); i += 2 {
		r.headers[headers[i]] = headers[i+1]
	}
	return r
}

type step struct {
	name    string
	at      int64
	req     fakeRequest
	verdict Verdict
	rule    int           // -1: none
	retry   time.Duration // Limited
}

func runSteps(t *testing.T, g *Gate, store *memStore, steps []step) {
	t.Helper()
	for i, s := range steps {
		out := g.Admit(s.req, store, 1000*sec+s.at)
		if out.Verdict != s.verdict || out.Rule != s.rule || (s.verdict == Limited && out.RetryAfter != s.retry) {
			t.Fatalf("step %d (%s): got verdict %d rule %d retry %v err %v; want verdict %d rule %d retry %v",
				i, s.name, out.Verdict, out.Rule, out.RetryAfter, out.Err, s.verdict, s.rule, s.retry)
		}
	}
}

// A client behind one trusted proxy cannot change its key by sending its own x-forwarded-for
// entries: only the entry the trusted proxy appended counts.
func TestForwardedForSpoofing(t *testing.T) {
	g := mustGate(t, `{"client_ip": {"xff_num_trusted_hops": 1},
	  "rules": [{"name": "ip", "key": [{"client_ip": {}}], "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	store := newMemStore()
	lb := "10.0.0.1:443" // the trusted proxy is the connection peer
	runSteps(t, g, store, []step{
		{"first", 0, req(lb, "x-forwarded-for", "203.0.113.9"), Allow, -1, 0},
		{"spoofed entry on the left", 0, req(lb, "x-forwarded-for", "198.51.100.1, 203.0.113.9"), Allow, -1, 0},
		{"another spoof, same client", 0, req(lb, "x-forwarded-for", "1.1.1.1,2.2.2.2 , 203.0.113.9"), Limited, 0, time.Hour},
		{"another client", 0, req(lb, "x-forwarded-for", "203.0.113.10"), Allow, -1, 0},
		// The same address in another spelling is the same client.
		{"IPv4-mapped spelling", 0, req(lb, "x-forwarded-for", "::ffff:203.0.113.10"), Allow, -1, 0},
		{"limit reached", 0, req(lb, "x-forwarded-for", "203.0.113.10"), Limited, 0, time.Hour},
		// Fewer entries than trusted hops: the request did not come through the proxies.
		{"no header: the peer", 0, req("192.0.2.50:1000"), Allow, -1, 0},
		{"garbage entry: the peer", 0, req("192.0.2.50:1000", "x-forwarded-for", "not-an-ip"), Allow, -1, 0},
		{"peer limit reached", 0, req("192.0.2.50:1000"), Limited, 0, time.Hour},
	})
}

// Trusted hops count on the header as the filter receives it. With use_remote_address, Envoy
// appends the peer's address first, so that entry is one of the N; no entry is ever skipped by
// guessing, since the same header arrives from a proxy that appended the peer itself.
func TestForwardedForCountsTheHeaderAsReceived(t *testing.T) {
	g := mustGate(t, `{"client_ip": {"xff_num_trusted_hops": 2},
	  "rules": [{"name": "ip", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	lb := "10.0.0.1:443"
	runSteps(t, g, newMemStore(), []step{
		{"client via the proxy, peer appended by Envoy", 0, req(lb, "x-forwarded-for", "6.6.6.6, 203.0.113.9, 10.0.0.1"), Allow, -1, 0},
		{"same client, other spoof", 0, req(lb, "x-forwarded-for", "7.7.7.7, 203.0.113.9, 10.0.0.1"), Limited, 0, time.Hour},
	})
	// Envoy's default (use_remote_address false) sets source.address from the rightmost entry:
	// with one trusted hop the client is that entry, and entries on its left change nothing.
	one := mustGate(t, `{"client_ip": {"xff_num_trusted_hops": 1},
	  "rules": [{"name": "ip", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	runSteps(t, one, newMemStore(), []step{
		{"first", 0, req("203.0.113.7:0", "x-forwarded-for", "6.6.6.1, 203.0.113.7"), Allow, -1, 0},
		{"spoof", 0, req("203.0.113.7:0", "x-forwarded-for", "6.6.6.2, 203.0.113.7"), Limited, 0, time.Hour},
	})
}

func TestDefaultClientIPIgnoresForwardedFor(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "ip", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	runSteps(t, g, newMemStore(), []step{
		{"first", 0, req("192.0.2.1:1", "x-forwarded-for", "203.0.113.1"), Allow, -1, 0},
		{"rotating xff changes nothing", 0, req("192.0.2.1:2", "x-forwarded-for", "203.0.113.2"), Limited, 0, time.Hour},
	})
}

func TestKeyParts(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "composite",
	  "key": [{"path": {}}, {"method": {}}, {"authority": {}}, {"query": "tenant"}, {"attribute": ["xds", "route_name"]}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	base := func(path, method, host string, route string) fakeRequest {
		r := req("192.0.2.1:1", ":path", path, ":method", method, ":authority", host)
		r.properties = map[string]string{"xds.route_name": route}
		return r
	}
	runSteps(t, g, newMemStore(), []step{
		{"first", 0, base("/a?tenant=x&y=1", "GET", "h", "r1"), Allow, -1, 0},
		{"same key, other query params, host case", 0, base("/a?y=2&tenant=x", "GET", "H", "r1"), Limited, 0, time.Hour},
		{"percent-encoded same tenant", 0, base("/a?tenant=%78", "GET", "h", "r1"), Limited, 0, time.Hour},
		{"other path", 0, base("/b?tenant=x", "GET", "h", "r1"), Allow, -1, 0},
		{"other method", 0, base("/a?tenant=x", "POST", "h", "r1"), Allow, -1, 0},
		{"other host", 0, base("/a?tenant=x", "GET", "h2", "r1"), Allow, -1, 0},
		{"other tenant", 0, base("/a?tenant=y", "GET", "h", "r1"), Allow, -1, 0},
		{"other route", 0, base("/a?tenant=x", "GET", "h", "r2"), Allow, -1, 0},
		{"no tenant", 0, base("/a", "GET", "h", "r1"), MissingKey, 0, 0},
	})
}

// Tiered keys: the user id when there is one, else the client address, in separate key spaces.
func TestFallbackKey(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "tiered", "key": [{"header": "x-user-id"}],
	  "missing_key": {"action": "fallback", "key": [{"client_ip": {}}]},
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	store := newMemStore()
	runSteps(t, g, store, []step{
		{"user whose id looks like the address", 0, req("192.0.2.1:1", "x-user-id", "192.0.2.1"), Allow, -1, 0},
		{"anonymous from that address: own bucket", 0, req("192.0.2.1:1"), Allow, -1, 0},
		{"anonymous again", 0, req("192.0.2.1:2"), Limited, 0, time.Hour},
		{"another anonymous address", 0, req("192.0.2.2:1"), Allow, -1, 0},
	})
	out := g.Admit(req("192.0.2.3:1"), store, 1000*sec)
	if len(out.MissingKeys) != 1 || out.MissingKeys[0] != 0 {
		t.Fatalf("a fallback is counted as a missing key: %+v", out.MissingKeys)
	}
	out = g.Admit(fakeRequest{headers: map[string]string{}}, store, 1000*sec)
	if out.Verdict != MissingKey || out.MissingPart != "client address" {
		t.Fatalf("no key and no fallback: %+v", out)
	}
}

func TestMissingKeyActions(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "optional", "key": [{"header": "x-team"}], "missing_key": {"action": "allow"},
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "required", "key": [{"header": "x-api-key"}], "missing_key": {"status": 403},
	   "limits": [{"capacity": 5, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	store := newMemStore()
	out := g.Admit(req("192.0.2.1:1", "x-api-key", "k"), store, sec)
	if out.Verdict != Allow || len(out.Admitted) != 1 || out.Admitted[0] != 1 || len(out.MissingKeys) != 1 {
		t.Fatalf("allow on missing key: %+v", out)
	}
	out = g.Admit(req("192.0.2.1:1", "x-team", "t"), store, sec)
	if out.Verdict != MissingKey || out.Status != 403 || out.Rule != 1 {
		t.Fatalf("configured status: %+v", out)
	}
	if store.keys() != 1 {
		t.Fatalf("a rejected request charged something: %d keys", store.keys())
	}
}

func TestMatching(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "login", "match": {"path": {"exact": "/login"}, "methods": ["POST"]},
	   "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "api", "match": {"path": {"prefix": "/api/"}, "hosts": ["api.example.com"], "headers": [{"name": "x-tier", "exact": "free"}]},
	   "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "no-auth", "match": {"headers": [{"name": "authorization", "present": false}]},
	   "key": [{"client_ip": {}}], "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	store := newMemStore()
	check := func(name string, r fakeRequest, want ...int) {
		t.Helper()
		out := g.Admit(r, store, sec)
		if out.Verdict != Allow || len(out.Admitted) != len(want) {
			t.Fatalf("%s: %+v, want rules %v", name, out, want)
		}
		for i := range want {
			if out.Admitted[i] != want[i] {
				t.Fatalf("%s: rules %v, want %v", name, out.Admitted, want)
			}
		}
	}
	auth := "authorization"
	check("login POST", req("192.0.2.1:1", ":path", "/login", ":method", "POST", auth, "x"), 0)
	check("login GET does not match", req("192.0.2.1:1", ":path", "/login", ":method", "GET", auth, "x"))
	check("login with query matches the path", req("192.0.2.2:1", ":path", "/login?next=/", ":method", "post", auth, "x"), 0)
	check("api free tier", req("192.0.2.1:1", ":path", "/api/v1", "x-tier", "free", ":authority", "API.example.com:8443", auth, "x"), 1)
	check("api paid tier", req("192.0.2.1:1", ":path", "/api/v1", "x-tier", "paid", auth, "x"))
	check("api other host", req("192.0.2.3:1", ":path", "/api/v1", "x-tier", "free", ":authority", "other", auth, "x"))
	check("no rule without authorization... the third", req("192.0.2.1:1", ":path", "/x"), 2)
}

func TestExemptions(t *testing.T) {
	g := mustGate(t, `{"exempt": {"paths": [{"exact": "/healthz"}, {"prefix": "/internal/"}],
	    "client_cidrs": ["10.0.0.0/8", "2001:db8::/32"], "headers": [{"name": "x-canary", "exact": "1"}]},
	  "rules": [{"name": "all", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	store := newMemStore()
	for name, r := range map[string]fakeRequest{
		"health":        req("192.0.2.1:1", ":path", "/healthz"),
		"internal path": req("192.0.2.1:1", ":path", "/internal/metrics?x=1"),
		"internal ipv4": req("10.1.2.3:1"),
		"internal ipv6": req("[2001:db8::7]:443"),
		"canary header": req("192.0.2.1:1", "x-canary", "1"),
	} {
		for i := 0; i < 3; i++ {
			if out := g.Admit(r, store, sec); out.Verdict != Exempt {
				t.Fatalf("%s: %+v", name, out)
			}
		}
	}
	if store.keys() != 0 {
		t.Fatal("exempt requests consumed tokens")
	}
	runSteps(t, g, store, []step{
		{"not exempt", 0, req("192.0.2.1:1", ":path", "/healthz/x"), Allow, -1, 0},
		{"limited", 0, req("192.0.2.1:1", "x-canary", "0"), Limited, 0, time.Hour},
	})
}

func TestCost(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "fixed", "match": {"path": {"prefix": "/export"}}, "key": [{"client_ip": {}}], "cost": 5,
	   "limits": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "header", "match": {"path": {"prefix": "/batch"}}, "key": [{"client_ip": {}}],
	   "cost": {"header": "x-batch-size", "max": 8, "default": 2},
	   "limits": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	ip := "192.0.2.1:1"
	runSteps(t, g, newMemStore(), []step{
		{"5 of 10", 0, req(ip, ":path", "/export"), Allow, -1, 0},
		{"10 of 10", 0, req(ip, ":path", "/export"), Allow, -1, 0},
		// Five more tokens are due in exactly five seconds: Retry-After covers the whole cost.
		{"cost 5 needs 5 s", 0, req(ip, ":path", "/export"), Limited, 0, 5 * time.Second},
		{"header 3", 0, req(ip, ":path", "/batch", "x-batch-size", "3"), Allow, -1, 0},
		{"default 2", 0, req(ip, ":path", "/batch"), Allow, -1, 0},
		// A client could make every request free with 0: a header cost is at least 1.
		{"zero counts as one: 4 left", 0, req(ip, ":path", "/batch", "x-batch-size", "0"), Allow, -1, 0},
		{"99 counts as max 8", 0, req(ip, ":path", "/batch", "x-batch-size", "99"), Limited, 1, 4 * time.Second},
		{"huge counts as max", 0, req(ip, ":path", "/batch", "x-batch-size", "99999999999999999999999"), Limited, 1, 4 * time.Second},
		// Below 1 is 1, negative numbers included, as the documentation says: 3 left, then 2.
		{"negative counts as one", 0, req(ip, ":path", "/batch", "x-batch-size", "-1"), Allow, -1, 0},
		{"very negative counts as one", 0, req(ip, ":path", "/batch", "x-batch-size", "-99999999999999999999999"), Allow, -1, 0},
		{"two left: 3 is too many", 0, req(ip, ":path", "/batch", "x-batch-size", "3"), Limited, 1, time.Second},
		{"minus sign alone", 0, req(ip, ":path", "/batch", "x-batch-size", "-"), BadCost, 1, 0},
		{"plus sign", 0, req(ip, ":path", "/batch", "x-batch-size", "+3"), BadCost, 1, 0},
		{"not a number", 0, req(ip, ":path", "/batch", "x-batch-size", "3.5"), BadCost, 1, 0},
	})
}

// Several limits: the request is admitted only if all admit, all are charged, and Retry-After
// is the time until every one of them admits.
func TestSeveralLimitsAllOrNothing(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [
	  {"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"},
	  {"capacity": 3, "refill_tokens": 3, "refill_interval": "1m"}]}]}`)
	store := newMemStore()
	ip := req("192.0.2.1:1")
	runSteps(t, g, store, []step{
		{"1", 0, ip, Allow, -1, 0},
		{"2", 0, ip, Allow, -1, 0},
		// The per-second bucket is empty (1 s to wait) and the per-minute one has 1 left.
		{"both would", 0, ip, Limited, 0, time.Second},
		{"3", sec, ip, Allow, -1, 0},
		// Now the per-minute bucket is empty: its next token comes 20 s after the first request.
		{"minute empty", 2 * sec, ip, Limited, 0, 18 * time.Second},
		{"still", 19 * sec, ip, Limited, 0, time.Second},
		{"4", 20 * sec, ip, Allow, -1, 0},
	})
	// Rejections charged nothing: at 20 s the per-second bucket had refilled to 2 and gave one.
	out := g.Admit(ip, store, 1000*sec+20*sec)
	if out.Verdict != Limited || out.RetryAfter != 20*time.Second {
		t.Fatalf("after: %+v", out)
	}
	if out.Limits[0].Remaining != 1 {
		t.Fatalf("the per-second bucket holds %d, want 1: a rejection charged it", out.Limits[0].Remaining)
	}
}

func TestShadowRules(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "enforced", "key": [{"client_ip": {}}], "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "trial", "shadow": true, "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	store := newMemStore()
	ip := req("192.0.2.1:1")
	for i, want := range []struct {
		verdict Verdict
		shadow  []int
	}{{Allow, nil}, {Allow, []int{1}}, {Allow, []int{1}}, {Limited, nil}} {
		out := g.Admit(ip, store, sec)
		if out.Verdict != want.verdict || len(out.ShadowLimited) != len(want.shadow) {
			t.Fatalf("request %d: %+v, want %v shadow %v", i, out, want.verdict, want.shadow)
		}
	}
	global := mustGate(t, `{"shadow": true, "rules": [
	  {"name": "a", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	store = newMemStore()
	for i := 0; i < 3; i++ {
		out := global.Admit(ip, store, sec)
		if out.Verdict != Allow || (i > 0) != (len(out.ShadowLimited) == 1) {
			t.Fatalf("global shadow, request %d: %+v", i, out)
		}
	}
}

// Every applied limit is described for rate-limit headers: its quota and window, what is left,
// when more is available, and a keyed hash of the partition key; on a rejection, the limit that
// rejected is marked and its wait is Retry-After.
func TestLimitStatus(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "burst", "key": [{"header": "k"}], "limits": [{"capacity": 10, "refill_tokens": 10, "refill_interval": "1m"}]},
	  {"name": "daily", "key": [{"header": "k"}], "limits": [
	    {"algorithm": "fixed_window", "capacity": 1000, "window": "24h"},
	    {"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	store := newMemStore()
	if err := g.LoadSecret(store, func() uint64 { return 7 }); err != nil {
		t.Fatal(err)
	}
	burst, daily := g.partitionHash("burst", []byte("10:secret-key")), g.partitionHash("daily", []byte("10:secret-key"))
	if burst == daily {
		t.Fatal("two rules identify one key by the same hash")
	}
	out := g.Admit(req("192.0.2.1:1", "k", "secret-key"), store, 0)
	// Next is the time until more quota: a token every 6 s, the window's end, a token every second.
	want := []LimitStatus{
		{Rule: 0, Limit: 0, Quota: 10, WindowSeconds: 60, Remaining: 9, Reset: 6 * time.Second, Next: 6 * time.Second, PartitionHash: burst},
		{Rule: 1, Limit: 0, Quota: 1000, WindowSeconds: 86400, Remaining: 999, Reset: 24 * time.Hour, Next: 24 * time.Hour, PartitionHash: daily},
		{Rule: 1, Limit: 1, Quota: 2, WindowSeconds: 2, Remaining: 1, Reset: time.Second, Next: time.Second, PartitionHash: daily},
	}
	if out.Verdict != Allow || !slices.Equal(out.Limits, want) {
		t.Fatalf("admitted: %+v\n got  %+v\n want %+v", out, out.Limits, want)
	}
	g.Admit(req("192.0.2.1:1", "k", "secret-key"), store, 0)
	out = g.Admit(req("192.0.2.1:1", "k", "secret-key"), store, 0)
	// Reset is the time until the limit is whole again, 2 s for two tokens; Next, when the
	// request would be admitted.
	rejecting := LimitStatus{Rule: 1, Limit: 1, Quota: 2, WindowSeconds: 2, Remaining: 0, Reset: 2 * time.Second, Next: time.Second,
		Rejecting: true, PartitionHash: daily}
	if out.Verdict != Limited || out.RetryAfter != time.Second || len(out.Limits) != 3 || out.Limits[2] != rejecting {
		t.Fatalf("rejected: %+v, limits %+v", out, out.Limits)
	}
	if out.Limits[0].Remaining != 8 || out.Limits[0].Rejecting || out.Limits[1].Remaining != 998 {
		t.Fatalf("rejected: the other limits read %+v", out.Limits[:2])
	}
}

func TestPathsAreNormalizedBeforeMatching(t *testing.T) {
	for path, want := range map[string]string{
		"/": "/", "/api/x": "/api/x", "//api//x": "/api/x", "/./api/x": "/api/x",
		"/healthz/../api/x": "/api/x", "/%61pi/x": "/api/x", "/a/b/../../../api": "/api",
		"/api/": "/api/", "/api/x/.": "/api/x/", "/%2Fapi": "/%2Fapi", "/API": "/API", "": "",
	} {
		if got := new(pathReadings).read(path)[0]; got != want {
			t.Errorf("the plain reading of %q is %q, want %q", path, got, want)
		}
	}
	g := mustGate(t, `{"exempt": {"paths": [{"prefix": "/healthz"}]},
	  "rules": [{"name": "api", "match": {"path": {"prefix": "/api/"}}, "key": [{"client_ip": {}}],
	    "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	store := newMemStore()
	runSteps(t, g, store, []step{
		{"first", 0, req("192.0.2.1:1", ":path", "/api/x"), Allow, -1, 0},
		{"through the exemption", 0, req("192.0.2.1:1", ":path", "/healthz/../api/x"), Limited, 0, time.Hour},
		{"doubled slash", 0, req("192.0.2.1:1", ":path", "//api/x"), Limited, 0, time.Hour},
		{"dot segment", 0, req("192.0.2.1:1", ":path", "/./api/x"), Limited, 0, time.Hour},
		{"encoded letter", 0, req("192.0.2.1:1", ":path", "/%61pi/x"), Limited, 0, time.Hour},
	})
}
