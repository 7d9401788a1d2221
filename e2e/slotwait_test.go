package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// on_limit delay on a rule with a concurrency limit, through the real module on the manual clock:
// a request that finds every slot of its key taken waits (held), decided again on each tick of
// its worker, until a slot frees or max_delay has passed since it arrived.

// wantHeld fails unless every request is still held.
func (g *rig) wantHeld(what string, reqs ...*heldRequest) {
	g.t.Helper()
	for i, r := range reqs {
		if !r.held || g.settled(r) {
			g.t.Fatalf("%s: request %d: held %v, settled %+v; want it still held\nlogs:\n%s", what, i, r.held, r.decision, g.logText())
		}
	}
}

// wantGoneOn fails unless the request was let go on upstream.
func (g *rig) wantGoneOn(what string, r *heldRequest) {
	g.t.Helper()
	if !g.settled(r) || !r.decision.Continue {
		g.t.Fatalf("%s: settled %+v; want it gone on upstream\nlogs:\n%s", what, r.decision, g.logText())
	}
}

// wantRejected fails unless the request was answered 429 with the given Retry-After.
func (g *rig) wantRejected(what string, r *heldRequest, retryAfter string) {
	g.t.Helper()
	if !g.settled(r) || r.decision.Reply == nil || r.decision.Reply.Status != 429 || r.decision.Reply.Header("retry-after") != retryAfter {
		g.t.Fatalf("%s: settled %+v; want 429 with Retry-After %s", what, r.decision, retryAfter)
	}
}

func (g *rig) tickVM(vm *host.VM, at time.Duration) {
	g.t.Helper()
	g.at(at)
	if err := vm.Tick(); err != nil {
		g.t.Fatalf("tick of vm %d at %v: %v\nlogs:\n%s", vm.ID(), at, err, g.logText())
	}
}

// One slot, max_delay 2s, two workers: a slot freed on one worker lets a waiter on the other in
// at that worker's next tick; a worker's waiters get slots in the order they arrived; a waiter
// whose client goes away takes nothing and is counted nowhere; one still waiting at max_delay
// gets 429 with Retry-After 1; each request is counted once, when it is finally decided.
func TestInFlightWaitsForASlot(t *testing.T) {
	t.Parallel()
	// tenants counts its missing keys: once per request, not once per decision while waiting.
	config := `{"rules": [{"name": "uploads", "key": [{"header": "x-api-key"}],
	  "limits": [{"algorithm": "concurrency", "max_in_flight": 1, "slot_timeout": "10s"}],
	  "on_limit": {"action": "delay", "max_delay": "2s"}},
	  {"name": "tenants", "key": [{"header": "x-tenant"}], "missing_key": {"action": "allow"},
	   "limits": [{"capacity": 100, "refill_tokens": 100, "refill_interval": "1s"}]}]}`
	ms := time.Millisecond
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRig(t, p, config, 2)
			vm := g.vms
			g.at(0)
			first := g.open(vm[0], inFlightRequest("alice"))
			g.wantGoneOn("the first request", first)
			w1 := g.open(vm[1], inFlightRequest("alice"))
			g.at(100 * ms)
			w2 := g.open(vm[1], inFlightRequest("alice")) // behind w1 on the same worker
			g.at(200 * ms)
			gone := g.open(vm[0], inFlightRequest("alice"))
			g.at(300 * ms)
			w3 := g.open(vm[0], inFlightRequest("alice"))
			bob := g.open(vm[0], inFlightRequest("bob")) // another key, its own slot
			g.wantGoneOn("bob", bob)
			g.tickAt(500 * ms)
			g.wantHeld("at 500ms, every slot taken", w1, w2, gone, w3)

			g.at(600 * ms)
			if err := gone.s.Reset(); err != nil { // its client goes away while it waits
				t.Fatal(err)
			}
			g.at(700 * ms)
			g.finish(first) // the slot frees on worker 0
			g.tickVM(vm[1], 700*ms)
			g.wantGoneOn("w1, the oldest waiter of worker 1, at its tick", w1)
			g.wantHeld("w2 behind w1", w2)
			g.tickVM(vm[0], 700*ms)
			g.wantHeld("w3 on worker 0: the slot is w1's", w3)

			g.at(time.Second)
			g.finish(w1)
			g.tickAt(time.Second) // worker 0 ticks first: w3 takes the slot before w2
			g.wantGoneOn("w3, whose worker ticked first", w3)
			g.wantHeld("w2", w2)

			g.tickAt(2099 * ms)
			g.wantHeld("w2 before max_delay", w2)
			g.tickAt(2100 * ms) // max_delay since w2 arrived
			g.wantRejected("w2 at max_delay", w2, "1")
			g.finish(w2)
			g.finish(w3)
			g.finish(bob)
			g.at(2200 * ms)
			last := g.open(vm[1], inFlightRequest("alice")) // the slot is free: gone took none
			g.wantGoneOn("a new request once every slot is free", last)
			g.finish(last)

			g.wantCounters(map[string]int64{
				"tollgate.rule.uploads.admitted": 5, "tollgate.rule.uploads.limited": 1,
				"tollgate.rule.uploads.in_flight_limited": 1,
				// w1 waited 700ms, w3 700ms.
				"tollgate.rule.uploads.delayed": 2, "tollgate.rule.uploads.delay_ms": 1400,
				"tollgate.rule.uploads.max_delay_ms": 700,
				// Every request but gone's, finally decided.
				"tollgate.rule.tenants.missing_key": 6,
			})
		})
	}
}

// A request that waited for a slot and then finds its tokens due later is held for them in turn,
// holding its slot; its whole hold counts as its delay. One whose client goes away while held for
// its tokens gives them back, and its slot, to the next waiter.
func TestInFlightWaitThenTokenDelay(t *testing.T) {
	t.Parallel()
	config := `{"rules": [{"name": "paced", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"},
	             {"algorithm": "concurrency", "max_in_flight": 1, "slot_timeout": "10s"}],
	  "on_limit": {"action": "delay", "max_delay": "2s"}}]}`
	ms := time.Millisecond
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRig(t, p, config, 1)
			vm := g.vms[0]
			g.at(0)
			first := g.open(vm, inFlightRequest("k"))
			g.wantGoneOn("the first request", first)
			second := g.open(vm, inFlightRequest("k"))
			g.wantHeld("second, every slot taken", second)
			g.at(500 * ms)
			g.finish(first)
			g.tickAt(500 * ms)
			g.wantHeld("second at 500ms: its slot taken, its token due at 1s", second)
			third := g.open(vm, inFlightRequest("k"))
			g.wantHeld("third: the second holds the slot", third)
			g.tickAt(time.Second)
			g.wantGoneOn("second at 1s", second)
			g.wantHeld("third at 1s", third)
			g.finish(second)
			g.tickAt(1010 * ms) // the next tick
			g.wantHeld("third: its slot taken, its token due at 2s", third)
			g.at(1500 * ms)
			fourth := g.open(vm, inFlightRequest("k"))
			g.wantHeld("fourth: the third holds the slot", fourth)
			g.at(1600 * ms)
			if err := third.s.Reset(); err != nil { // gives its token and its slot back
				t.Fatal(err)
			}
			g.tickAt(1600 * ms)
			g.wantHeld("fourth: its slot taken, its token (given back by third) due at 2s", fourth)
			g.tickAt(2 * time.Second)
			g.wantGoneOn("fourth at 2s", fourth)
			g.finish(fourth)
			g.wantCounters(map[string]int64{
				"tollgate.rule.paced.admitted": 3, "tollgate.rule.paced.limited": 0,
				// second 0 → 1s, third 0.5s → 2s (as planned when it was held), fourth 1.5s → 2s.
				"tollgate.rule.paced.delayed": 3, "tollgate.rule.paced.delay_ms": 1000 + 1500 + 500,
				"tollgate.rule.paced.max_delay_ms": 1500,
			})
		})
	}
}

// The whole hold of a request that waited for a slot is bounded by max_delay from its arrival:
// tokens due later than that reject it (429, their Retry-After) even when they are due within
// max_delay of the retry, and it reserved nothing. Capacity 2, one token per second, two slots,
// max_delay 2s.
func TestInFlightWaitBoundsTheTokenDelay(t *testing.T) {
	t.Parallel()
	config := `{"rules": [{"name": "paced", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"},
	             {"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "10s"}],
	  "on_limit": {"action": "delay", "max_delay": "2s"}}]}`
	ms := time.Millisecond
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRig(t, p, config, 2)
			vm := g.vms
			g.at(0)
			r1, r2 := g.open(vm[0], inFlightRequest("k")), g.open(vm[1], inFlightRequest("k"))
			g.wantGoneOn("r1", r1)
			g.wantGoneOn("r2", r2)
			r3 := g.open(vm[0], inFlightRequest("k")) // waits for a slot, until 2s at most
			g.wantHeld("r3, both slots taken", r3)
			g.at(100 * ms)
			g.finish(r1)
			r4 := g.open(vm[1], inFlightRequest("k")) // takes the slot before r3's tick: due at 1s
			g.wantHeld("r4, held for its token", r4)
			g.tickAt(100 * ms)
			g.wantHeld("r3, r4 at 100ms", r3, r4)
			g.tickAt(time.Second)
			g.wantGoneOn("r4 at 1s", r4)
			g.wantHeld("r3 at 1s: its token would be due at 2s, both slots are taken", r3)
			g.at(1200 * ms)
			g.finish(r2)
			r5 := g.open(vm[1], inFlightRequest("k")) // takes the slot before r3's tick: due at 2s
			g.wantHeld("r5, held for its token", r5)
			// r3's token would be due at 3s: within max_delay of now, past max_delay of its
			// arrival.
			g.tickAt(1200 * ms)
			g.wantRejected("r3 at 1.2s", r3, "2")
			g.finish(r3)
			r6 := g.open(vm[0], inFlightRequest("k"))
			g.wantHeld("r6, both slots taken", r6)
			g.at(1500 * ms)
			g.finish(r4)
			g.tickAt(1500 * ms)
			g.wantHeld("r6, its token due at 3s (r3 reserved nothing)", r6)
			g.tickAt(2 * time.Second)
			g.wantGoneOn("r5 at 2s", r5)
			g.wantHeld("r6 at 2s", r6)
			g.tickAt(3 * time.Second)
			g.wantGoneOn("r6 at 3s", r6)
			g.finish(r5)
			g.finish(r6)
			g.wantCounters(map[string]int64{
				"tollgate.rule.paced.admitted": 5, "tollgate.rule.paced.limited": 1,
				"tollgate.rule.paced.in_flight_limited": 0,
				// r4 0.1s → 1s, r5 1.2s → 2s, r6 1.2s → 3s.
				"tollgate.rule.paced.delayed": 3, "tollgate.rule.paced.delay_ms": 900 + 800 + 1800,
				"tollgate.rule.paced.max_delay_ms": 1800,
			})
		})
	}
}

// A worker decides about one waiting request per full key and tick, however many wait for it:
// the others are tried again on the next tick, in their order, and each is still answered at its
// own max_delay.
func TestInFlightWaitersOfAFullKeyCostOneDecisionPerTick(t *testing.T) {
	t.Parallel()
	config := `{"rules": [{"name": "uploads", "key": [{"header": "x-api-key"}],
	  "limits": [{"algorithm": "concurrency", "max_in_flight": 1, "slot_timeout": "10s"}],
	  "on_limit": {"action": "delay", "max_delay": "1s"}}]}`
	ms := time.Millisecond
	g := newRig(t, host.Envoy139, config, 1)
	vm := g.vms[0]
	vm.CountHostCallsByName()
	reads := func() int64 { return vm.Stats().ByName["env.proxy_get_shared_data"] }
	g.at(0)
	a := g.open(vm, inFlightRequest("a"))
	b := g.open(vm, inFlightRequest("b"))
	g.wantGoneOn("a", a)
	g.wantGoneOn("b", b)
	waitA := g.open(vm, inFlightRequest("a"))
	before := reads()
	g.tickAt(10 * ms)
	one := reads() - before // one waiter decided again
	var waitB []*heldRequest
	for i := 0; i < 50; i++ {
		waitB = append(waitB, g.open(vm, inFlightRequest("b")))
	}
	g.wantHeld("the waiters", append(waitB, waitA)...)
	before = reads()
	g.tickAt(20 * ms)
	if fifty, want := reads()-before, 2*one; one == 0 || fifty != want {
		t.Fatalf("a tick with waiters of two full keys read shared data %d times, want %d (%d for one waiter)", fifty, want, one)
	}
	g.at(30 * ms)
	g.finish(b)
	g.tickAt(30 * ms)
	g.wantGoneOn("the oldest waiter of b", waitB[0])
	g.wantHeld("the other waiters", append(waitB[1:], waitA)...)
	g.tickAt(time.Second)
	g.wantRejected("a's waiter at max_delay", waitA, "1")
	g.wantHeld("b's waiters, which came 10ms later", waitB[1:]...)
	g.tickAt(1010 * ms)
	for i, r := range waitB[1:] {
		g.wantRejected("b's waiter "+strconv.Itoa(i+1)+" at max_delay", r, "1")
		g.finish(r)
	}
	g.finish(waitB[0])
	g.finish(waitA)
	g.finish(a)
	g.wantCounters(map[string]int64{"tollgate.rule.uploads.admitted": 3, "tollgate.rule.uploads.limited": 50,
		"tollgate.rule.uploads.in_flight_limited": 50})
}
