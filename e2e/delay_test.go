package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/e2e/scenario"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// on_limit delay through the real module, on the host's manual clock: requests over the limit
// are held (proxy_on_request_headers returns Stop) and resumed by the tick of the VM that holds
// them (proxy_set_effective_context, proxy_continue_stream) when their tokens are due.

const delayConfig = `{"rules": [{"name": "partner", "key": [{"authority": {}}],
  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "200ms"}],
  "on_limit": {"action": "delay", "max_delay": "1s"}}]}`

// heldRequest is a request opened on a VM at an instant, with what became of it.
type heldRequest struct {
	s        *host.Stream
	held     bool
	decision host.Decision
}

func partnerReq() host.Request { return httpReq("GET", "/v1/quotes", peer) }

func (g *rig) open(vm *host.VM, req host.Request) *heldRequest {
	g.t.Helper()
	s, d, held, err := vm.OpenStream(req)
	if err != nil {
		g.t.Fatalf("open: %v\nlogs:\n%s", err, g.logText())
	}
	return &heldRequest{s: s, held: held, decision: d}
}

// settled reports whether a held request was resumed (or answered), and fails on anything else.
func (g *rig) settled(r *heldRequest) bool {
	g.t.Helper()
	if !r.held {
		return true
	}
	d, err := r.s.Settled()
	switch {
	case errors.Is(err, host.ErrStreamHeld):
		return false
	case err != nil:
		g.t.Fatalf("held request: %v\nlogs:\n%s", err, g.logText())
	}
	r.decision = d
	return true
}

// finish completes a request that went on: the upstream answers 200, and the stream ends.
func (g *rig) finish(r *heldRequest) {
	g.t.Helper()
	if r.decision.Continue {
		if _, err := r.s.ResponseHeaders(200, [][2]string{{"content-type", "text/plain"}}, true); err != nil {
			g.t.Fatal(err)
		}
	}
	if err := r.s.Finish(); err != nil {
		g.t.Fatal(err)
	}
}

func (g *rig) tickAt(offset time.Duration) {
	g.t.Helper()
	g.at(offset)
	if err := g.host.Tick(context.Background()); err != nil {
		g.t.Fatalf("tick at %v: %v\nlogs:\n%s", offset, err, g.logText())
	}
}

// Capacity 1, one token per 200ms, max_delay 1s, two workers: a burst of six goes on 200ms
// apart whichever worker holds each request, the seventh is rejected at once, a client that goes
// away while held gives its token back to the next request, and the counters say so.
func TestDelayPacesABurstAcrossWorkers(t *testing.T) {
	t.Parallel()
	for _, profile := range profiles {
		t.Run(profile.String(), func(t *testing.T) {
			g := newRig(t, profile, delayConfig, 2)
			ms := time.Millisecond
			g.at(0)
			var reqs []*heldRequest
			for i := 0; i < 7; i++ {
				reqs = append(reqs, g.open(g.vms[i%2], partnerReq()))
			}
			// #0 goes on at once, #1..#5 are held (due 200..1000ms), #6 would be due at 1200.
			if reqs[0].held || !reqs[0].decision.Continue {
				t.Fatalf("the first request: held %v, %+v; want it admitted at once", reqs[0].held, reqs[0].decision)
			}
			for i := 1; i <= 5; i++ {
				if !reqs[i].held {
					t.Fatalf("request %d was not held: %+v", i, reqs[i].decision)
				}
			}
			if reqs[6].held || reqs[6].decision.Reply == nil || reqs[6].decision.Reply.Status != 429 ||
				reqs[6].decision.Reply.Header("retry-after") != "2" {
				t.Fatalf("request 6: %+v, want 429 at once with Retry-After 2 (1.2s)", reqs[6].decision.Reply)
			}
			if wait := g.exactWait(); wait != "1.2s" {
				t.Fatalf("the rejection's exact wait %q, want 1.2s", wait)
			}
			g.finish(reqs[0])
			g.finish(reqs[6])

			steps := []struct {
				at      time.Duration
				reset   int  // a held request whose client goes away first (0: none)
				open    bool // then one more request arrives
				resumed []int
			}{
				{at: 199 * ms},
				{at: 200 * ms, resumed: []int{1}},
				{at: 399 * ms},
				{at: 400 * ms, resumed: []int{2}},
				// #5 (due 1000, the last) goes away: its token is given back, and the request
				// that comes next (#7) is due at 1000 in its place.
				{at: 450 * ms, reset: 5, open: true},
				{at: 600 * ms, resumed: []int{3}},
				{at: 800 * ms, resumed: []int{4}},
				{at: 999 * ms},
				{at: 1000 * ms, resumed: []int{7}},
			}
			done := map[int]bool{0: true, 6: true}
			for _, s := range steps {
				g.at(s.at)
				if s.reset > 0 {
					if err := reqs[s.reset].s.Reset(); err != nil {
						t.Fatal(err)
					}
					done[s.reset] = true
				}
				if s.open {
					r := g.open(g.vms[len(reqs)%2], partnerReq())
					if !r.held {
						t.Fatalf("at %v: the new request was not held: %+v", s.at, r.decision)
					}
					reqs = append(reqs, r)
				}
				g.tickAt(s.at)
				for i, r := range reqs {
					if done[i] {
						continue
					}
					want := false
					for _, j := range s.resumed {
						want = want || i == j
					}
					if got := g.settled(r); got != want {
						t.Fatalf("at %v: request %d settled %v, want %v\nlogs:\n%s", s.at, i, got, want, g.logText())
					}
					if want {
						if !r.decision.Continue || r.decision.Reply != nil {
							t.Fatalf("at %v: request %d: %+v, want it to go on upstream", s.at, i, r.decision)
						}
						g.finish(r)
						done[i] = true
					}
				}
			}
			for _, c := range []struct {
				kind string
				want int64
			}{
				{scenario.Admitted, 6}, // #0 at once, #1..#4 and #7 when due; #5 never went on
				{scenario.Limited, 1},
				{scenario.Delayed, 6},
				{scenario.DelayMs, 200 + 400 + 600 + 800 + 1000 + 550},
			} {
				if got := g.counter(scenario.RuleStat("partner", c.kind)); got != c.want {
					t.Errorf("%s = %d, want %d", c.kind, got, c.want)
				}
			}
			if got := g.counter(scenario.RuleStat("partner", scenario.MaxDelayMs)); got != 1000 {
				t.Errorf("max_delay_ms = %d, want 1000", got)
			}
			if line := g.lastLog("tollgate: decision delayed rule partner owner#"); !strings.Contains(line, " for 550ms ") ||
				strings.Contains(line, "api.example.com") {
				t.Errorf("the last held request's debug line %q: want its owner hash and delay, never the key", line)
			}
		})
	}
}

// A shadow rule with on_limit delay never holds: the request goes on, marked for the upstream.
func TestDelayShadowNeverHolds(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy139, `{"rules": [{"name": "tried", "shadow": true, "key": [{"authority": {}}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}],
	  "on_limit": {"action": "delay", "max_delay": "5s"}}]}`, 1)
	g.at(0)
	for i := 0; i < 3; i++ {
		r := g.open(g.vms[0], partnerReq())
		if r.held || !r.decision.Continue {
			t.Fatalf("request %d: held %v %+v; a shadow rule never holds", i, r.held, r.decision)
		}
		marked := false
		for _, h := range r.decision.RequestHeaders {
			marked = marked || h[0] == "x-tollgate-shadow-limited" && h[1] == "tried"
		}
		if marked != (i > 0) {
			t.Fatalf("request %d: shadow-limited mark %v, want %v", i, marked, i > 0)
		}
		g.finish(r)
	}
}

// A VM holds at most 1024 requests: the next one is rejected at once, and its reservation is
// given back (the request after it is held where it would have been).
func TestDelayHeldRequestsAreBounded(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy139, `{"rules": [{"name": "fast", "key": [{"authority": {}}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1ms"}],
	  "on_limit": {"action": "delay", "max_delay": "60s"}}]}`, 1)
	g.at(0)
	const maxHeld = 1024
	if r := g.open(g.vms[0], partnerReq()); r.held {
		t.Fatal("the first request was held")
	}
	for i := 1; i <= maxHeld; i++ {
		if r := g.open(g.vms[0], partnerReq()); !r.held {
			t.Fatalf("request %d was not held: %+v", i, r.decision)
		}
	}
	r := g.open(g.vms[0], partnerReq())
	if r.held || r.decision.Reply == nil || r.decision.Reply.Status != 429 || r.decision.Reply.Header("retry-after") != "2" {
		t.Fatalf("request past the bound: held %v, %+v; want 429 with Retry-After 2 (1.025s)", r.held, r.decision.Reply)
	}
	// One tick at 1ms lets the first held request go; then one more can be held, due at 1025ms:
	// the rejected one's reservation was given back.
	g.tickAt(time.Millisecond)
	if r := g.open(g.vms[0], partnerReq()); !r.held {
		t.Fatalf("after one went on: %+v, want held", r.decision)
	}
	if line := g.lastLog("tollgate: decision delayed"); !strings.Contains(line, " for 1.024s ") {
		t.Fatalf("the last held request: %q, want it due at 1025ms (1024ms from now)", line)
	}
}

// A delaying rule with a global limit: the local limits decide first and hold the request, and
// the rate limit service is asked when the request is due, so that it counts what goes on; its
// OVER_LIMIT then rejects the held request as any global rejection.
func TestDelayAsksTheGlobalLimitWhenDue(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	g := newGlobalRig(t, host.Envoy139, `{"rules": [{"name": "partner", "key": [{"authority": {}}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "100ms"}],
	  "on_limit": {"action": "delay", "max_delay": "1s"},
	  "global": {"cluster": "rls", "domain": "d", "timeout": "5s"}}]}`, map[string]string{"rls": rls.addr})
	vm := g.vms[0]
	first := g.open(vm, partnerReq())
	if !first.held {
		t.Fatal("the first request should wait for the rate limit service")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if d, err := first.s.Wait(ctx); err != nil || !d.Continue {
		t.Fatalf("first request: %+v %v", d, err)
	}
	g.finish(first)
	if n := len(rls.taken()); n != 1 {
		t.Fatalf("%d calls for the first request, want 1", n)
	}
	// The second is due 100ms later: held, and nothing asked yet (no tick has run).
	second := g.open(vm, partnerReq())
	if !second.held || len(rls.taken()) != 0 {
		t.Fatal("the second request should be held by its local limit, the service not asked yet")
	}
	rls.set(answerOverLimit(30 * time.Second))
	ticks, stopTicks := context.WithCancel(context.Background())
	defer stopTicks()
	go g.host.RunTicks(ticks)
	d, err := second.s.Wait(ctx)
	if err != nil || d.Continue || d.Reply == nil || d.Reply.Status != 429 || d.Reply.Details != "tollgate_global_rate_limited" ||
		d.Reply.Header("retry-after") != "30" {
		t.Fatalf("second request: %+v %v, want the global 429 once it was due", d.Reply, err)
	}
	g.finish(second)
	if n := len(rls.taken()); n != 1 {
		t.Fatalf("%d calls for the second request, want 1, made when it was due", n)
	}
	stopTicks()
	g.checkHealthy()
}
