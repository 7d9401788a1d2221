package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// The features of the request path together, through the real module on the manual clock: a
// request held by on_limit delay that also holds a concurrency slot of another rule, settles at
// its response (refund), is rejected by a later rule, or whose client goes away while held. Each
// charge and each slot is given back exactly once, and each request is counted once.

// interplayConfig: "paced" delays (one token per 200ms, max_delay 1s) and refunds a 503;
// "slots" admits two requests of the same authority in flight.
const interplayConfig = `{"rules": [
  {"name": "paced", "key": [{"authority": {}}],
   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "200ms"}],
   "on_limit": {"action": "delay", "max_delay": "1s"}, "refund": {"statuses": ["503"]}},
  {"name": "slots", "key": [{"authority": {}}],
   "limits": [{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "10s"}]}]}`

// interplayStep happens at an instant: a held request's client goes away (reset), the VM ticks,
// a request opens (want: "go" admitted at once, "held", or a status answered at once), a request
// that went on gets its response (respond, with status), and what must have been resumed.
type interplayStep struct {
	at      time.Duration
	reset   int
	open    string
	respond int
	status  int
	resumed []int
	config  string // a new configuration, pushed first
	plan    string // the request's x-plan header, if any
}

// runInterplay runs steps on one VM; requests are numbered in the order they open, from 1.
func runInterplay(t *testing.T, g *rig, steps []interplayStep) {
	t.Helper()
	vm := g.vms[0]
	reqs := []*heldRequest{nil}
	resumed := map[int]bool{}
	for i, s := range steps {
		g.at(s.at)
		if s.config != "" {
			g.reconfigure(s.config)
		}
		if s.reset > 0 {
			if err := reqs[s.reset].s.Reset(); err != nil {
				t.Fatal(err)
			}
			resumed[s.reset] = true // never resumed: gone
		}
		if s.respond > 0 {
			r := reqs[s.respond]
			if !r.decision.Continue {
				t.Fatalf("step %d: request %d did not go on", i, s.respond)
			}
			if _, err := r.s.ResponseHeaders(s.status, [][2]string{{"content-length", "0"}}, true); err != nil {
				t.Fatal(err)
			}
			if err := r.s.Finish(); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.host.Tick(t.Context()); err != nil {
			t.Fatalf("step %d: tick: %v\nlogs:\n%s", i, err, g.logText())
		}
		for n, r := range reqs[1:] {
			n++
			if r == nil || !r.held || resumed[n] {
				continue
			}
			if g.settled(r) {
				resumed[n] = true
				if !contains(s.resumed, n) {
					t.Fatalf("step %d at %v: request %d settled (%+v), want it held", i, s.at, n, r.decision)
				}
				if !r.decision.Continue {
					t.Fatalf("step %d: request %d answered %+v, want it resumed", i, n, r.decision.Reply)
				}
			}
		}
		for _, n := range s.resumed {
			if !resumed[n] {
				t.Fatalf("step %d at %v: request %d still held, want it resumed\nlogs:\n%s", i, s.at, n, g.logText())
			}
		}
		if s.open != "" {
			req := partnerReq()
			if s.plan != "" {
				req = httpReq("GET", "/v1/quotes", peer, "x-plan", s.plan)
			}
			r := g.open(vm, req)
			reqs = append(reqs, r)
			n := len(reqs) - 1
			switch {
			case s.open == "held" && !r.held:
				t.Fatalf("step %d at %v: request %d not held: %+v", i, s.at, n, r.decision)
			case s.open == "go" && (r.held || !r.decision.Continue):
				t.Fatalf("step %d at %v: request %d held %v %+v, want it admitted at once", i, s.at, n, r.held, r.decision.Reply)
			case s.open != "go" && s.open != "held" && (r.held || r.decision.Reply == nil || itoa(r.decision.Reply.Status) != s.open):
				t.Fatalf("step %d at %v: request %d held %v %+v, want %s\nlogs:\n%s", i, s.at, n, r.held, r.decision.Reply, s.open, g.logText())
			}
			if r.decision.Reply != nil {
				if err := r.s.Finish(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func contains(list []int, n int) bool {
	for _, v := range list {
		if v == n {
			return true
		}
	}
	return false
}

// A held request holds its slot of the other rule while it waits; its client going away gives
// back its reservation and its slot, once; a request the slots reject reserves nothing; a 503
// after a delay is refunded.
func TestInterplayDelaySlotsRefund(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy139, interplayConfig, 1)
	ms := time.Millisecond
	runInterplay(t, g, []interplayStep{
		{at: 0, open: "go"},         // #1: token, slot 1
		{at: 0, open: "held"},       // #2: due 200ms, slot 2
		{at: 0, open: "429"},        // #3: no slot: nothing reserved on paced
		{at: 50 * ms, reset: 2},     // #2 goes away: its token and slot come back
		{at: 50 * ms, open: "held"}, // #4: due 200ms (not 400ms), slot 2 again
		{at: 60 * ms, open: "429"},  // #5: the slots are #1 and #4
		{at: 200 * ms, resumed: []int{4}},
		{at: 210 * ms, respond: 1, status: 200},
		// #4's 503 is refunded: it was the last reservation, so its token comes back.
		{at: 210 * ms, respond: 4, status: 503, open: "go"}, // #6
		// #7: the bucket held 0.05 of a token at 210ms (0.8 refilled since #4's reservation at
		// 50ms left -0.75), the refund filled it to its capacity, and #6 took that: due 410ms.
		{at: 210 * ms, open: "held"},
		{at: 409 * ms},
		{at: 410 * ms, resumed: []int{7}},
		{at: 410 * ms, respond: 6, status: 200},
		{at: 410 * ms, respond: 7, status: 200},
		{at: 610 * ms, open: "go"}, // #8: both slots free again, and a token
	})
	g.wantCounters(map[string]int64{
		"tollgate.rule.paced.admitted": 5, "tollgate.rule.paced.delayed": 3, "tollgate.rule.paced.refunded": 1,
		"tollgate.rule.paced.limited": 0, "tollgate.rule.slots.admitted": 5, "tollgate.rule.slots.limited": 2,
		"tollgate.rule.slots.in_flight_limited": 2,
	})
}

// A new configuration while requests are held and hold slots: the held requests stay with the
// root context they were decided by, which keeps ticking until its last stream ends, so they go
// on when due; their slots and reservations stand, and are given back when they end, whichever
// root decides the requests after them.
func TestInterplayReconfigureWhileHeld(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, next := range []struct {
		name, config string
		after        []interplayStep
	}{
		{"same", interplayConfig, []interplayStep{
			{at: 100 * ms, open: "429"}, // #3: #1 and #2 hold both slots
			{at: 200 * ms, resumed: []int{2}},
			{at: 200 * ms, respond: 1, status: 200, open: "held"}, // #4: a slot again, due 400ms
			{at: 250 * ms, open: "429"},                           // #5: #2 and #4 hold the slots
			{at: 399 * ms},
			{at: 400 * ms, resumed: []int{4}},
		}},
		// The delay is gone and there is a slot more: the old root context still wakes what it
		// holds, and its slots count against the new limit.
		{"rejecting", `{"rules": [
		  {"name": "paced", "key": [{"authority": {}}],
		   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "200ms"}]},
		  {"name": "slots", "key": [{"authority": {}}],
		   "limits": [{"algorithm": "concurrency", "max_in_flight": 3, "slot_timeout": "10s"}]}]}`, []interplayStep{
			{at: 100 * ms, open: "429"}, // #3: a slot, but the token is #2's until 200ms
			{at: 199 * ms},
			{at: 200 * ms, resumed: []int{2}},
			{at: 210 * ms, respond: 1, status: 200},
			{at: 210 * ms, respond: 2, status: 200},
			// (The new rejecting bucket cannot owe: the reservation #2 still owed at the push
			// was carried over as an empty bucket, tokenBucket.convert; so no probe before
			// 400ms here.)
			{at: 400 * ms, open: "go"},
			{at: 400 * ms, open: "429"},
		}},
	} {
		t.Run(next.name, func(t *testing.T) {
			t.Parallel()
			g := newRig(t, host.Envoy139, interplayConfig, 1)
			runInterplay(t, g, append([]interplayStep{
				{at: 0, open: "go"},   // #1
				{at: 0, open: "held"}, // #2: due 200ms, both slots taken
				{at: 50 * ms, config: next.config},
			}, next.after...))
		})
	}
}

// A delaying rule with a global lease, and a concurrency limit on another rule: a held request
// that, when due, waits for the lease request another request sent, and whose client goes away
// then, gives its reservation and its slot back once; the grant serves the request that sent it
// (one token, the first lease), and the next request is not delayed.
func TestInterplayDelayedLeaseWaiterGoesAway(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	blocked := holdCalls(rls, grant(time.Hour))
	g := newLeaseRig(t, host.Envoy139, `{"rules": [
	  {"name": "paced", "key": [{"authority": {}}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "200ms"}],
	   "on_limit": {"action": "delay", "max_delay": "1s"},
	   "global": {"cluster": "rls", "domain": "d", "timeout": "60s", "lease": {"max_tokens": 4, "ttl": "10s"}}},
	  {"name": "slots", "key": [{"authority": {}}],
	   "limits": [{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "10s"}]}]}`, rls)
	vm := g.vms[0]
	ms := time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	g.at(0)
	first := g.open(vm, partnerReq()) // admitted locally, waits for the lease request it sent
	if !first.held {
		t.Fatalf("the first request: %+v, want it held for the lease request", first.decision)
	}
	<-blocked.arrived
	second := g.open(vm, partnerReq()) // due 200ms
	if !second.held {
		t.Fatalf("the second request: %+v, want it held", second.decision)
	}
	g.tickAt(200 * ms) // due: it waits for the same lease request
	if g.settled(second) {
		t.Fatalf("the second request settled %+v, want it waiting for the lease request", second.decision)
	}
	if n := vm.PendingCalls(); n != 1 {
		t.Fatalf("%d calls pending, want the one lease request", n)
	}
	if err := second.s.Reset(); err != nil { // its client goes away
		t.Fatal(err)
	}
	close(blocked.release)
	if d, err := first.s.Wait(ctx); err != nil || !d.Continue {
		t.Fatalf("the first request: %+v %v, want it to go on with the grant", d, err)
	}
	first.decision.Continue = true
	// The second request's token (nothing was reserved after it) and slot came back: the third
	// is admitted locally at once (not delayed) and asks for a lease of its own (the first grant
	// was one token, the first request's), the fourth finds both slots taken.
	third := g.open(vm, partnerReq())
	if third.held {
		if d, err := third.s.Wait(ctx); err != nil || !d.Continue {
			t.Fatalf("the third request: %+v %v, want it to go on\nlogs:\n%s", d, err, g.logText())
		}
		third.decision.Continue = true
	} else if !third.decision.Continue {
		t.Fatalf("the third request: %+v, want it to go on", third.decision.Reply)
	}
	fourth := g.open(vm, partnerReq())
	if fourth.held || fourth.decision.Reply == nil || fourth.decision.Reply.Status != 429 {
		t.Fatalf("the fourth request: held %v %+v, want 429 (no slot)", fourth.held, fourth.decision.Reply)
	}
	g.finish(first)
	g.finish(third)
	g.finish(fourth)
	g.checkHealthy()
	g.wantCounters(map[string]int64{
		"tollgate.rule.paced.admitted": 2, "tollgate.rule.paced.delayed": 1, "tollgate.rule.paced.limited": 0,
		"tollgate.rule.paced.global_lease_requests": 2, "tollgate.rule.paced.global_cancelled": 0,
		"tollgate.rule.slots.admitted": 2, "tollgate.rule.slots.limited": 1, "tollgate.rule.slots.in_flight_limited": 1,
	})
	if hits := hits(rls); len(hits) != 2 {
		t.Fatalf("calls %v, want two lease requests: the first request's and the third's", hits)
	}
}

// A shadow rule with count: a held request whose client goes away never reached the upstream,
// so the shadow rule gives its charge back as it does for any request that ends without a
// response; the enforced charge is given back once, with the reservation.
func TestInterplayHeldRequestGoneSettlesShadowCount(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy139, `{"rules": [
	  {"name": "paced", "key": [{"authority": {}}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "200ms"}],
	   "on_limit": {"action": "delay", "max_delay": "1s"}},
	  {"name": "watch", "shadow": true, "key": [{"authority": {}}],
	   "limits": [{"algorithm": "fixed_window", "capacity": 1, "window": "10s"}],
	   "count": {"statuses": ["2xx"]}}]}`, 1)
	ms := time.Millisecond
	runInterplay(t, g, []interplayStep{
		{at: 0, open: "go"},              // #1: watch counts it until its response
		{at: 0, respond: 1, status: 500}, // not counted: watch gives it back
		{at: 0, open: "held"},            // #2: due 200ms; watch counts it
		{at: 50 * ms, reset: 2},          // gone: watch gives it back too
		{at: 50 * ms, open: "held"},      // #3: due 200ms; watch has room
		{at: 200 * ms, resumed: []int{3}},
		{at: 200 * ms, respond: 3, status: 200}, // counted
		{at: 200 * ms, open: "held"},            // #4: due 400ms; watch full: shadow-limited
	})
	g.wantCounters(map[string]int64{
		"tollgate.rule.watch.shadow_limited": 1, "tollgate.rule.watch.refunded": 2,
		"tollgate.rule.paced.delayed": 3, "tollgate.rule.paced.admitted": 2,
	})
}

// limits_by with on_limit delay and refund: a held request reserves on its tier's limits, and
// its refund goes back to them.
func TestInterplayTierDelayRefund(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy139, `{"rules": [{"name": "plans", "key": [{"authority": {}}],
	  "limits_by": {"part": {"header": "x-plan"}, "default": "free", "tiers": {
	    "free": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}],
	    "pro": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "100ms"}]}},
	  "on_limit": {"action": "delay", "max_delay": "1s"}, "refund": {"statuses": ["503"]}}]}`, 1)
	ms := time.Millisecond
	runInterplay(t, g, []interplayStep{
		{at: 0, open: "go", plan: "pro"},
		{at: 0, open: "go", plan: "pro"},
		{at: 0, open: "held", plan: "pro"}, // #3: due 100ms (pro's refill, not free's 1s)
		{at: 0, open: "held", plan: "pro"}, // #4: due 200ms
		{at: 99 * ms},
		{at: 100 * ms, resumed: []int{3}},
		{at: 200 * ms, resumed: []int{4}},
		// #4 made the last reservation: its 503 gives the token back, and #5 goes on at once.
		{at: 200 * ms, respond: 4, status: 503, open: "go", plan: "pro"},
		{at: 200 * ms, open: "held", plan: "pro"}, // #6: due 300ms
		{at: 300 * ms, resumed: []int{6}},
	})
	g.wantCounters(map[string]int64{
		"tollgate.rule.plans.admitted": 6, "tollgate.rule.plans.delayed": 3, "tollgate.rule.plans.refunded": 1,
		"tollgate.rule.plans.limited": 0,
	})
}

// A request rejected because the VM holds as many requests as it may gives back its whole
// charge: its reservation, and a shadow count rule's part, as for a stream without a response.
func TestInterplayHeldSetFullSettlesShadowCount(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy139, `{"rules": [
	  {"name": "fast", "key": [{"authority": {}}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1ms"}],
	   "on_limit": {"action": "delay", "max_delay": "60s"}},
	  {"name": "watch", "shadow": true, "key": [{"authority": {}}],
	   "limits": [{"algorithm": "fixed_window", "capacity": 1026, "window": "1h"}],
	   "count": {"statuses": ["2xx"]}}]}`, 1)
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
	// The 1026th: rejected, and watch's unit (its last) given back.
	if r := g.open(g.vms[0], partnerReq()); r.held || r.decision.Reply == nil || r.decision.Reply.Status != 429 {
		t.Fatalf("request past the bound: held %v, %+v; want 429", r.held, r.decision.Reply)
	} else if err := r.s.Finish(); err != nil {
		t.Fatal(err)
	}
	g.tickAt(time.Millisecond)
	if r := g.open(g.vms[0], partnerReq()); !r.held {
		t.Fatalf("after one went on: %+v, want held", r.decision)
	}
	g.wantCounters(map[string]int64{
		"tollgate.rule.watch.shadow_limited": 0, "tollgate.rule.watch.refunded": 1, "tollgate.rule.fast.limited": 1,
	})
}

// A global rejection gives the local charge back; a shadow count rule's part, which is not in
// that charge, settles as for a stream without a response (the rejection is Tollgate's own
// reply, which does not pass its encoder).
func TestInterplayGlobalRejectionSettlesShadowCount(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	g := newGlobalRig(t, host.Envoy139, `{"rules": [
	  {"name": "api", "key": [{"authority": {}}],
	   "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1h"}],
	   "global": {"cluster": "rls", "domain": "d", "timeout": "60s"}},
	  {"name": "watch", "shadow": true, "key": [{"authority": {}}],
	   "limits": [{"algorithm": "fixed_window", "capacity": 1, "window": "1h"}],
	   "count": {"statuses": ["2xx"]}}]}`, map[string]string{"rls": rls.addr})
	vm := g.vms[0]
	rls.set(answerOverLimit(time.Minute))
	if resp := g.send(vm, partnerReq(), nil); resp.Status != 429 {
		t.Fatalf("first request: %d, want the global 429", resp.Status)
	}
	rls.set(answerOK)
	if resp := g.send(vm, partnerReq(), nil); resp.Status != 200 {
		t.Fatalf("second request: %d, want 200", resp.Status)
	}
	g.checkHealthy()
	g.wantCounters(map[string]int64{
		"tollgate.rule.watch.shadow_limited": 0, "tollgate.rule.watch.refunded": 1,
		"tollgate.rule.api.limited": 1, "tollgate.rule.api.admitted": 1,
	})
}
