package e2e

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate-proxy/tollgate/e2e/scenario"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// statusUpstream answers each request with the status its x-want-status header asks for (200
// without it): the test chooses every response's status.
func statusUpstream(headers [][2]string) (*host.Response, error) {
	status := 200
	for _, h := range headers {
		if h[0] == "x-want-status" {
			status, _ = strconv.Atoi(h[1])
		}
	}
	return &host.Response{Status: status, Headers: [][2]string{{"content-type", "text/plain"}}, Body: []byte("from the upstream\n")}, nil
}

const settleConfig = `{"rules": [
  {"name": "failed-logins", "match": {"path": {"exact": "/login"}}, "key": [{"client_ip": {}}],
   "limits": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "15m"}],
   "count": {"statuses": ["401", "403"]}},
  {"name": "api", "match": {"path": {"prefix": "/api/"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 3, "refill_tokens": 3, "refill_interval": "1h"}],
   "refund": {"statuses": ["5xx"]}}
]}`

type settleStep struct {
	path, want string // want: the status the upstream is asked for
	status     int    // the status the client gets
	upstream   bool   // the request reached the upstream
}

// runSettle sends the steps through the rig's VMs in turn, at 10ms intervals.
func runSettle(t *testing.T, g *rig, steps []settleStep) {
	t.Helper()
	for i, s := range steps {
		g.at(time.Duration(i) * 10 * time.Millisecond)
		reached := false
		upstream := func(headers [][2]string) (*host.Response, error) {
			reached = true
			return statusUpstream(headers)
		}
		resp := g.send(g.vms[i%len(g.vms)], httpReq("POST", s.path, peer, "x-api-key", "k1", "x-want-status", s.want), upstream)
		if resp.Status != s.status || reached != s.upstream {
			t.Fatalf("step %d (%s asking %s): status %d, reached the upstream %v; want %d, %v\nlogs:\n%s",
				i, s.path, s.want, resp.Status, reached, s.status, s.upstream, g.logText())
		}
		if s.status == 429 && resp.Header("retry-after") == "" {
			t.Fatalf("step %d: a 429 without Retry-After", i)
		}
	}
}

// count: successes are never charged; two failed logins empty the bucket, and then any login is
// answered 429 before the upstream, whatever it would have answered. Two workers share it.
func TestCountThroughTheModule(t *testing.T) {
	t.Parallel()
	for _, profile := range profiles {
		g := newRig(t, profile, settleConfig, 2)
		ok := settleStep{"/login", "200", 200, true}
		runSettle(t, g, []settleStep{
			ok, ok, ok,
			{"/login", "401", 401, true},
			ok, ok,
			{"/login", "403", 403, true},
			{"/login", "200", 429, false},
			{"/login", "401", 429, false},
		})
		want := map[string]int64{scenario.Admitted: 7, scenario.Limited: 2, scenario.Refunded: 5}
		for kind, n := range want {
			if got := g.counter(scenario.RuleStat("failed-logins", kind)); got != n {
				t.Errorf("%s: %s = %d, want %d", profile, kind, got, n)
			}
		}
	}
}

// refund: four upstream failures cost nothing, and then the whole quota of 3 is still there.
func TestRefundThroughTheModule(t *testing.T) {
	t.Parallel()
	for _, profile := range profiles {
		g := newRig(t, profile, settleConfig, 2)
		fail := settleStep{"/api/x", "503", 503, true}
		ok := settleStep{"/api/x", "200", 200, true}
		runSettle(t, g, []settleStep{
			fail, {"/api/x", "500", 500, true}, fail, {"/api/x", "504", 504, true},
			ok, ok, {"/api/x", "404", 404, true},
			{"/api/x", "200", 429, false},
		})
		if got := g.counter(scenario.RuleStat("api", scenario.Refunded)); got != 4 {
			t.Errorf("%s: refunded = %d, want 4", profile, got)
		}
		if got := g.counter(scenario.RuleStat("failed-logins", scenario.Refunded)); got != 0 {
			t.Errorf("%s: failed-logins refunded %d requests it never saw", profile, got)
		}
	}
}

// Requests in flight hold their tokens until their response headers: with two tokens, a third
// login while two are in flight gets 429 (no over-admission). A success gives its token back;
// a forwarded request whose stream ends before its response headers (the client went away)
// keeps its charge, for count and refund alike.
func TestInFlightRequestsHoldTheirTokens(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy139, settleConfig, 2)
	login := httpReq("POST", "/login", peer)
	start := func(vm *host.VM) (*host.Stream, host.Decision) {
		t.Helper()
		s, d, err := vm.StartStream(login)
		if err != nil {
			t.Fatalf("start: %v\nlogs:\n%s", err, g.logText())
		}
		return s, d
	}
	respond := func(s *host.Stream, status int) {
		t.Helper()
		if _, err := s.ResponseHeaders(status, nil, true); err != nil {
			t.Fatalf("response headers: %v", err)
		}
		if err := s.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	g.at(0)
	a, da := start(g.vms[0])
	b, db := start(g.vms[1])
	c, dc := start(g.vms[0])
	if !da.Continue || !db.Continue || dc.Continue || dc.Reply == nil || dc.Reply.Status != 429 {
		t.Fatalf("two tokens, three logins in flight: decisions %+v %+v %+v, want the third one 429", da, db, dc)
	}
	respond(c, 429) // the reply passes the filter's encoder too: it settles nothing
	respond(a, 200)
	d, dd := start(g.vms[1])
	if !dd.Continue {
		t.Fatalf("a success gave its token back, yet the next login got %+v", dd.Reply)
	}
	// b's client goes away after b was forwarded: no response headers, and the charge stands
	// (the upstream may have done the work; hanging up must not escape a count rule).
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	respond(d, 200)
	e, de := start(g.vms[0])
	if !de.Continue {
		t.Fatalf("one charge stands of two, yet the next login got %+v", de.Reply)
	}
	respond(e, 403)
	_, df := start(g.vms[1])
	if df.Continue || df.Reply.Status != 429 {
		t.Fatalf("a failure and a hang-up counted, yet the next login was let through")
	}
	if got := g.counter(scenario.RuleStat("failed-logins", scenario.Refunded)); got != 2 {
		t.Errorf("refunded = %d, want 2 (a's and d's successes)", got)
	}

	// refund keeps the charge of a stream that ended without a response: three went away, and
	// the quota of 3 is spent.
	g.at(time.Second)
	apiReq := httpReq("GET", "/api/x", peer, "x-api-key", "gone")
	for i := 0; i < 3; i++ {
		s, d, err := g.vms[i%2].StartStream(apiReq)
		if err != nil || !d.Continue {
			t.Fatalf("api request %d: %v %+v", i, err, d.Reply)
		}
		if err := s.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if resp := g.send(g.vms[0], apiReq, statusUpstream); resp.Status != 429 {
		t.Fatalf("status %d: the charges of the streams that ended were given back", resp.Status)
	}
}

// A charge is given back only within the window it was counted in: a refunded failure counted
// at 900ms whose response comes in the next window frees nothing in that one.
func TestRefundAcrossAWindowBoundaryThroughTheModule(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy133, `{"rules": [{"name": "w", "key": [{"header": "x-api-key"}],
	  "limits": [{"algorithm": "fixed_window", "capacity": 2, "window": "1s"}],
	  "refund": {"statuses": ["5xx"]}}]}`, 1)
	req := httpReq("GET", "/", peer, "x-api-key", "k")
	// Windows are aligned on the monotonic clock: the scenario starts at a whole second.
	g.at(900 * time.Millisecond)
	slow, d, err := g.vms[0].StartStream(req)
	if err != nil || !d.Continue {
		t.Fatalf("%v %+v", err, d)
	}
	g.at(1100 * time.Millisecond)
	if resp := g.send(g.vms[0], req, statusUpstream); resp.Status != 200 {
		t.Fatalf("first of the new window: %d", resp.Status)
	}
	if _, err := slow.ResponseHeaders(503, nil, true); err != nil {
		t.Fatal(err)
	}
	_ = slow.Finish()
	if resp := g.send(g.vms[0], req, statusUpstream); resp.Status != 200 {
		t.Fatalf("second of the new window: %d", resp.Status)
	}
	if resp := g.send(g.vms[0], req, statusUpstream); resp.Status != 429 {
		t.Fatalf("third of the new window: %d: the previous window's refund was taken off this one", resp.Status)
	}
}

// A request that a count rule admitted and a global limit then rejects (or whose client goes
// away while the service is asked) gets its charge back once: with the global rejection, not
// again when the 429 passes the filter's encoder or the stream ends. The login bucket is kept
// below full, where a second give-back would show as one more admission.
func TestCountRuleWithAGlobalRejection(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	g := newGlobalRig(t, host.Envoy139, `{"rules": [
	  {"name": "shared", "key": [{"header": "x-api-key"}],
	   "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1h"}],
	   "global": {"cluster": "rls", "domain": "tollgate", "timeout": "60s"}},
	  {"name": "logins", "key": [{"header": "x-api-key"}],
	   "limits": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"}],
	   "count": {"statuses": ["401"]}}]}`, map[string]string{"rls": rls.addr})
	vm := g.vms[0]
	failedLogin := httpReq("POST", "/login", peer, "x-api-key", "k", "x-want-status", "401")
	if resp := g.send(vm, failedLogin, statusUpstream); resp.Status != 401 {
		t.Fatalf("first failed login: %d", resp.Status)
	}
	// Over the global limit: 429, the login charge given back with the rest.
	rls.set(answerOverLimit(time.Minute))
	for i := 0; i < 2; i++ {
		if resp := g.send(vm, failedLogin, statusUpstream); resp.Status != 429 {
			t.Fatalf("over the global limit: %d", resp.Status)
		}
	}
	// The client goes away while the service is asked.
	held := make(chan struct{}, 1)
	rls.set(func(ctx context.Context, _ *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		held <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-held
		cancel()
	}()
	s, _, err := vm.StartStreamContext(ctx, failedLogin)
	if !errors.Is(err, host.ErrStreamReset) {
		t.Fatalf("got %v, want the stream reset while held", err)
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	g.checkHealthy()
	rls.set(answerOK)
	if resp := g.send(vm, failedLogin, statusUpstream); resp.Status != 401 {
		t.Fatalf("second failed login: %d", resp.Status)
	}
	if resp := g.send(vm, failedLogin, statusUpstream); resp.Status != 429 {
		t.Fatalf("third failed login: %d, want 429: a charge was given back twice", resp.Status)
	}
	if got := g.counter(scenario.RuleStat("logins", scenario.Refunded)); got != 0 {
		t.Errorf("refunded = %d, want 0: the rejected requests' charges went back with the global rejection", got)
	}
}

// Every way a forwarded login's stream can end, against a count rule of 401 and 403 with two
// tokens: only a response with another status gives the charge back. The router's replies to an
// upstream reset (503) and an upstream timeout (504), and a later filter's local reply, pass the
// filter's encoder like the upstream's response (Envoy's sendLocalReply runs the encoder
// filters before the one replying); a client that hangs up after the request went on keeps its
// charge. Each ending is followed by a failed login and one more: the last one is 429 exactly
// when the ending was counted. (A client gone while its request was still held, never
// forwarded, gets the charge back: TestCountRuleWithAGlobalRejection and the interplay tests.)
func TestCountEveryWayAForwardedStreamEnds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ending  string
		end     func(s *host.Stream) error
		counted bool
	}{
		{"client reset after forwarding", func(s *host.Stream) error { return s.Reset() }, true},
		{"client reset after a 401's headers", func(s *host.Stream) error {
			if _, err := s.ResponseHeaders(401, nil, false); err != nil {
				return err
			}
			return s.Reset()
		}, true},
		{"upstream reset: the router's 503", respondWith(503), false},
		{"upstream timeout: the router's 504", respondWith(504), false},
		{"a later filter's local reply 403", respondWith(403), true},
		{"success", respondWith(200), false},
	} {
		t.Run(c.ending, func(t *testing.T) {
			t.Parallel()
			g := newRig(t, host.Envoy139, settleConfig, 1)
			vm := g.vms[0]
			g.at(0)
			s, d, err := vm.StartStream(httpReq("POST", "/login", peer))
			if err != nil || !d.Continue {
				t.Fatalf("the login was not forwarded: %v %+v", err, d.Reply)
			}
			if err := c.end(s); err != nil {
				t.Fatal(err)
			}
			if err := s.Finish(); err != nil {
				t.Fatal(err)
			}
			runSettle(t, g, []settleStep{
				{"/login", "401", 401, true},
				map[bool]settleStep{true: {"/login", "200", 429, false}, false: {"/login", "200", 200, true}}[c.counted],
			})
		})
	}
}

// respondWith ends a stream with a complete response of status.
func respondWith(status int) func(s *host.Stream) error {
	return func(s *host.Stream) error {
		_, err := s.ResponseHeaders(status, nil, true)
		return err
	}
}
