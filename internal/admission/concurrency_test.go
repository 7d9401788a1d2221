package admission

import (
	"math/rand/v2"
	"testing"
	"time"
)

const concurrencyDoc = `{"rules": [{"name": "uploads", "key": [{"header": "x-api-key"}],
  "limits": [{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "10s"}]}]}`

// TestConcurrencySteps: two worker VMs (two Gates on one store) share the slots of a key; a
// stream's end frees its slot at once; slots whose end is never seen are freed when their
// period and the next one have passed (between 1 and 2 leases).
func TestConcurrencySteps(t *testing.T) {
	gates := []*Gate{mustGate(t, concurrencyDoc), mustGate(t, concurrencyDoc)}
	store := newMemStore()
	base := 1000 * sec // a multiple of the lease: periods start at base, base+10s, ...
	held := map[string][]InFlight{}
	type step struct {
		at      int64 // ns after base
		vm      int
		key     string
		release string // the name of a held request to release instead of admitting one
		name    string // the name the admitted request is held under
		verdict Verdict
		left    int64 // Remaining after the decision
	}
	steps := []step{
		{at: 0, vm: 0, key: "a", name: "a1", verdict: Allow, left: 1},
		{at: 0, vm: 1, key: "a", name: "a2", verdict: Allow, left: 0},
		{at: sec, vm: 0, key: "a", verdict: Limited},
		{at: sec, vm: 1, key: "b", name: "b1", verdict: Allow, left: 1}, // another key has its own slots
		{at: 2 * sec, vm: 1, release: "a1"},                             // released by the other VM
		{at: 2 * sec, vm: 0, key: "a", name: "a3", verdict: Allow, left: 0},
		{at: 3 * sec, vm: 0, key: "a", verdict: Limited},
		// The next period: a2 and a3 are counted as the previous period's; releasing a3 there
		// frees its slot.
		{at: 11 * sec, vm: 1, key: "a", verdict: Limited},
		{at: 12 * sec, vm: 0, release: "a3"},
		{at: 12 * sec, vm: 1, key: "a", name: "a4", verdict: Allow, left: 0},
		// a2 never ends (its VM died): it is dropped when its period is two periods back.
		{at: 19*sec + 999_999_999, vm: 0, key: "a", verdict: Limited},
		{at: 20 * sec, vm: 0, key: "a", name: "a5", verdict: Allow, left: 0}, // a4 (previous) and a5
		// A release of a request already dropped frees nothing more.
		{at: 21 * sec, vm: 0, release: "a2"},
		{at: 21 * sec, vm: 1, key: "a", verdict: Limited},
		{at: 22 * sec, vm: 1, release: "a4"},
		{at: 22 * sec, vm: 1, release: "a5"},
		{at: 22 * sec, vm: 0, key: "a", name: "a6", verdict: Allow, left: 1},
		{at: 22 * sec, vm: 1, key: "a", name: "a7", verdict: Allow, left: 0},
	}
	for i, s := range steps {
		g := gates[s.vm]
		now := base + s.at
		if s.release != "" {
			g.Release(store, held[s.release], now)
			continue
		}
		out := g.Admit(header("x-api-key", s.key), store, now)
		if out.Verdict != s.verdict {
			t.Fatalf("step %d (%+v): verdict %v, want %v", i, s, out.Verdict, s.verdict)
		}
		switch out.Verdict {
		case Allow:
			leases := out.AppendInFlight(nil)
			if len(leases) != 1 {
				t.Fatalf("step %d: %d leases, want 1", i, len(leases))
			}
			held[s.name] = leases
			if len(out.Limits) != 1 || out.Limits[0].Remaining != s.left {
				t.Fatalf("step %d: limits %+v, want remaining %d", i, out.Limits, s.left)
			}
		case Limited:
			if !out.InFlightLimited || out.RetryAfter != time.Second || out.RetryAfterSeconds() != 1 {
				t.Fatalf("step %d: in flight limited %v, retry after %v, want true and 1s", i, out.InFlightLimited, out.RetryAfter)
			}
			if len(out.AppendInFlight(nil)) != 0 {
				t.Fatalf("step %d: a rejected request holds a lease", i)
			}
		}
	}
}

// TestConcurrencyWithARateLimit: the limits of a rule are charged all or nothing, so a request
// the rate limit rejects takes no slot, and one the full slots reject takes no token.
func TestConcurrencyWithARateLimit(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [
	  {"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"},
	  {"algorithm": "concurrency", "max_in_flight": 1, "slot_timeout": "1m"}]}]}`)
	store := newMemStore()
	now := 3600 * sec
	first := g.Admit(header("k", "x"), store, now)
	if first.Verdict != Allow {
		t.Fatalf("first: %v", first.Verdict)
	}
	lease := first.AppendInFlight(nil)
	// The slot is taken: rejected by the concurrency limit, and the bucket keeps its token.
	if out := g.Admit(header("k", "x"), store, now); out.Verdict != Limited || !out.InFlightLimited {
		t.Fatalf("second: %v in flight %v, want limited by the concurrency limit", out.Verdict, out.InFlightLimited)
	}
	g.Release(store, lease, now)
	second := g.Admit(header("k", "x"), store, now)
	if second.Verdict != Allow {
		t.Fatalf("after the release: %v, want allow (the bucket kept its second token)", second.Verdict)
	}
	g.Release(store, second.AppendInFlight(nil), now)
	// The bucket is empty: rejected by it, and the free slot stays free.
	out := g.Admit(header("k", "x"), store, now)
	if out.Verdict != Limited || out.InFlightLimited || out.RetryAfter != time.Hour {
		t.Fatalf("third: %v in flight %v retry %v, want limited by the bucket", out.Verdict, out.InFlightLimited, out.RetryAfter)
	}
	l := &g.rules[0].limits[1]
	s, ok := storedSlot(g, store, l, "1:x")
	if !ok || l.algo.(concurrency).inFlight(s.cells) != 0 {
		t.Fatalf("slot %+v (found %v), want nothing in flight", s, ok)
	}
}

// TestConcurrencyLeasesOfShadowRulesAndGiveBack: a shadow rule's slots are held and released
// like an enforced rule's; a charge given back (a global limit rejected the request) holds no
// slot: the caller releases the leases, once.
func TestConcurrencyLeasesOfShadowRulesAndGiveBack(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "enforced", "key": [{"header": "k"}], "limits": [{"algorithm": "concurrency", "max_in_flight": 1}]},
	  {"name": "tried", "shadow": true, "key": [{"header": "k"}], "limits": [{"algorithm": "concurrency", "max_in_flight": 1}]}]}`)
	store := newMemStore()
	now := 100 * sec
	out := g.Admit(header("k", "x"), store, now)
	if out.Verdict != Allow || len(out.ShadowLimited) != 0 {
		t.Fatalf("first: %v shadow limited %v", out.Verdict, out.ShadowLimited)
	}
	first := out.AppendInFlight(nil)
	if len(first) != 2 {
		t.Fatalf("%d leases, want 2 (enforced and shadow)", len(first))
	}
	out = g.Admit(header("k", "x"), store, now)
	if out.Verdict != Limited {
		t.Fatalf("second: %v, want limited", out.Verdict)
	}
	g.Release(store, first, now)
	out = g.Admit(header("k", "x"), store, now)
	if out.Verdict != Allow || len(out.ShadowLimited) != 0 {
		t.Fatalf("after the release: %v shadow limited %v, want both slots free", out.Verdict, out.ShadowLimited)
	}
	if !out.Charge().Empty() {
		t.Fatal("a concurrency slot is in the charge: a give-back and the release would both free it")
	}
	g.GiveBack(store, out.Charge(), now)
	if out := g.Admit(header("k", "x"), store, now); out.Verdict != Limited {
		t.Fatalf("after the give-back: %v, want the slot still held", out.Verdict)
	}
}

// TestConcurrencyMatchesModel runs random acquisitions, releases and clock moves on several
// Gates against a model that knows every acquisition: a request is in flight until it is
// released or until the end of the lease period after the one it was admitted in; a request
// is admitted exactly when fewer than max_in_flight are in flight.
func TestConcurrencyMatchesModel(t *testing.T) {
	const maxInFlight, lease = 3, 10 * sec
	doc := `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"algorithm": "concurrency", "max_in_flight": 3, "slot_timeout": "10s"}]}]}`
	for seed := uint64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		gates := []*Gate{mustGate(t, doc), mustGate(t, doc), mustGate(t, doc)}
		store := newMemStore()
		type acquisition struct {
			at    int64
			lease []InFlight
		}
		var open []acquisition // admitted, not released
		now := 50*sec + r.Int64N(lease)
		for step := 0; step < 300; step++ {
			switch op := r.IntN(10); {
			case op < 3:
				now += r.Int64N(lease / 2)
			case op < 6 && len(open) > 0:
				i := r.IntN(len(open))
				gates[r.IntN(len(gates))].Release(store, open[i].lease, now)
				open = append(open[:i], open[i+1:]...)
			default:
				inFlight := 0
				for _, a := range open {
					if floorDiv(a.at, lease)*lease+2*lease > now {
						inFlight++
					}
				}
				out := gates[r.IntN(len(gates))].Admit(header("k", "key"), store, now)
				want := Limited
				if inFlight < maxInFlight {
					want = Allow
				}
				if out.Verdict != want {
					t.Fatalf("seed %d step %d at %d: %v, want %v (%d in flight)", seed, step, now, out.Verdict, want, inFlight)
				}
				if want == Allow {
					if rem := out.Limits[0].Remaining; rem != int64(maxInFlight-inFlight-1) {
						t.Fatalf("seed %d step %d: remaining %d, want %d", seed, step, rem, maxInFlight-inFlight-1)
					}
					open = append(open, acquisition{at: now, lease: out.AppendInFlight(nil)})
				}
			}
		}
	}
}

// TestConcurrencyIdleAt: from idleAt on, a state holds nothing in flight (a slot may go to
// another key), and before it something is, so a slot with requests in flight is never idle
// before their lease runs out.
func TestConcurrencyIdleAt(t *testing.T) {
	c := concurrency{max: 5, timeout: 10 * sec}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 10000; i++ {
		start := r.Int64N(1000) * c.timeout
		s := cells{start, r.Int64N(3), r.Int64N(3)}
		idle := c.idleAt(s)
		if c.inFlight(c.roll(s, idle)) != 0 {
			t.Fatalf("%v: something in flight at idleAt %d", s, idle)
		}
		if c.inFlight(s) > 0 && idle > start && c.inFlight(c.roll(s, idle-1)) == 0 {
			t.Fatalf("%v: nothing in flight just before idleAt %d", s, idle)
		}
		if next, _ := c.take(s, idle, 1); next != c.initial(idle) && c.inFlight(next) != 1 {
			t.Fatalf("%v: a take at idleAt does not start from a fresh state", s)
		}
	}
}

// TestConcurrencyChangedLimit: a changed max_in_flight keeps the counts and the releases of the
// requests in flight; a changed lease carries the requests in flight over as held.
func TestConcurrencyChangedLimit(t *testing.T) {
	store := newMemStore()
	now := 100 * sec
	old := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "10s"}]}]}`)
	a, b := old.Admit(header("k", "x"), store, now), old.Admit(header("k", "x"), store, now)
	if a.Verdict != Allow || b.Verdict != Allow {
		t.Fatal("the first two requests were not admitted")
	}
	first := a.AppendInFlight(nil)
	bigger := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"algorithm": "concurrency", "max_in_flight": 3, "slot_timeout": "10s"}]}]}`)
	if out := bigger.Admit(header("k", "x"), store, now); out.Verdict != Allow || out.Limits[0].Remaining != 0 {
		t.Fatalf("max 3 with 2 in flight: %v remaining %d, want allow and 0", out.Verdict, out.Limits[0].Remaining)
	}
	old.Release(store, first, now) // a request admitted under the old limit ends
	if out := bigger.Admit(header("k", "x"), store, now); out.Verdict != Allow {
		t.Fatalf("after the release: %v, want allow", out.Verdict)
	}
	longer := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"algorithm": "concurrency", "max_in_flight": 3, "slot_timeout": "1m"}]}]}`)
	if out := longer.Admit(header("k", "x"), store, now); out.Verdict != Limited {
		t.Fatalf("a new lease with 3 in flight: %v, want limited", out.Verdict)
	}
	// Counted as acquired in the new period holding the old one's start (60 s to 120 s):
	// still held in the next, dropped from 180 s.
	if out := longer.Admit(header("k", "x"), store, 179*sec); out.Verdict != Limited {
		t.Fatalf("in the next new period: %v, want limited", out.Verdict)
	}
	if out := longer.Admit(header("k", "x"), store, 180*sec); out.Verdict != Allow {
		t.Fatalf("two new periods later: %v, want allow", out.Verdict)
	}
}

func twoHeaders(a, av, b, bv string) fakeRequest {
	return fakeRequest{headers: map[string]string{a: av, b: bv}, source: "192.0.2.1:5000"}
}

// TestConcurrencyByTier: a tier's concurrency limit holds slots like any other (leases, release),
// and a key that changes tier keeps its requests in flight counted, with the same lease as with
// another one.
func TestConcurrencyByTier(t *testing.T) {
	for _, lease := range []string{"10s", "20s"} {
		g := mustGate(t, `{"rules": [{"name": "plans", "key": [{"header": "x-user"}], "limits_by": {
		  "part": {"header": "x-plan"}, "default": "free", "tiers": {
		    "free": [{"algorithm": "concurrency", "max_in_flight": 1, "slot_timeout": "10s"}],
		    "pro": [{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "`+lease+`"}]}}}]}`)
		store := newMemStore()
		now := 100 * sec
		free := g.Admit(twoHeaders("x-user", "u", "x-plan", "free"), store, now)
		if free.Verdict != Allow {
			t.Fatalf("lease %s: free: %v", lease, free.Verdict)
		}
		held := free.AppendInFlight(nil)
		if len(held) != 1 {
			t.Fatalf("lease %s: %d leases, want 1", lease, len(held))
		}
		// Upgraded: the request in flight still counts, so one more fits in pro's two.
		pro := g.Admit(twoHeaders("x-user", "u", "x-plan", "pro"), store, now)
		if pro.Verdict != Allow {
			t.Fatalf("lease %s: pro: %v", lease, pro.Verdict)
		}
		proLeases := pro.AppendInFlight(nil) // the Outcome is the Gate's until its next Admit
		if out := g.Admit(twoHeaders("x-user", "u", "x-plan", "pro"), store, now); out.Verdict != Limited {
			t.Fatalf("lease %s: a third in flight on pro: %v, want limited", lease, out.Verdict)
		}
		g.Release(store, proLeases, now)
		if out := g.Admit(twoHeaders("x-user", "u", "x-plan", "pro"), store, now); out.Verdict != Allow {
			t.Fatalf("lease %s: after a release: %v, want allow", lease, out.Verdict)
		}
	}
}

// TestConcurrencyIsNotSettledAtTheResponse: a rule with refund keeps its rate charges until the
// response, but its concurrency slot is released at the stream's end only, never at the
// response too.
func TestConcurrencyIsNotSettledAtTheResponse(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "api", "key": [{"header": "k"}], "limits": [
	  {"capacity": 5, "refill_tokens": 5, "refill_interval": "1h"},
	  {"algorithm": "concurrency", "max_in_flight": 1}], "refund": {"statuses": ["5xx"]}}]}`)
	store := newMemStore()
	now := 100 * sec
	out := g.Admit(header("k", "x"), store, now)
	var pending Pending
	out.Hold(&pending)
	leases := out.AppendInFlight(nil)
	g.Settle(store, &pending, 503, now) // refunded: the token comes back, the slot stays taken
	if out := g.Admit(header("k", "x"), store, now); out.Verdict != Limited || !out.InFlightLimited {
		t.Fatalf("after the response: %v, want the slot still held", out.Verdict)
	}
	g.Release(store, leases, now)
	if out := g.Admit(header("k", "x"), store, now); out.Verdict != Allow || out.Limits[0].Remaining != 4 {
		t.Fatalf("after the stream's end: %v remaining %d, want allow with 4 tokens left (one refunded)", out.Verdict, out.Limits[0].Remaining)
	}
}
