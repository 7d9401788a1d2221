package admission

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// Capacity 1, one token per 200ms, max_delay 1s: a burst is paced 200ms apart, the request past
// max_delay is Limited at once, and a give-back (a client gone while held) makes room again when
// no request reserved behind it.
func TestDelaySteps(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "partner", "key": [{"header": "k"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "200ms"}],
	  "on_limit": {"action": "delay", "max_delay": "1s"}}]}`)
	if g.fast != nil {
		t.Fatal("a delaying rule took the fast path")
	}
	store := newMemStore()
	base := 1000 * sec
	charges := map[int]Charge{}
	steps := []struct {
		at       int64
		key      string
		giveBack int // a step whose request's client goes away now (0: none)
		verdict  Verdict
		delay    time.Duration
		retry    time.Duration
	}{
		{at: 0, key: "a", verdict: Allow, delay: 0},
		{at: 0, key: "a", verdict: Allow, delay: 200 * time.Millisecond},
		{at: 0, key: "a", verdict: Allow, delay: 400 * time.Millisecond},
		{at: 50 * ms, key: "a", verdict: Allow, delay: 550 * time.Millisecond},  // due at 600
		{at: 100 * ms, key: "a", verdict: Allow, delay: 700 * time.Millisecond}, // due at 800
		{at: 100 * ms, key: "a", verdict: Allow, delay: 900 * time.Millisecond}, // due at 1000
		// Due at 1200: more than max_delay from 100ms; refused with the wait, without holding.
		{at: 100 * ms, key: "a", verdict: Limited, retry: 1100 * time.Millisecond},
		// Another key has its own bucket.
		{at: 100 * ms, key: "b", verdict: Allow, delay: 0},
		// The request due at 600 goes away: two requests reserved behind it keep their instants,
		// so its token stays spent (given back, a new request would be due with the last one).
		{at: 150 * ms, key: "a", giveBack: 3, verdict: Limited, retry: 1050 * time.Millisecond},
		// The last one (due at 1000) goes away: nothing behind it, its token comes back, and the
		// next request is due where it was.
		{at: 160 * ms, key: "a", giveBack: 5, verdict: Allow, delay: 840 * time.Millisecond},
		{at: 160 * ms, key: "a", verdict: Limited, retry: 1040 * time.Millisecond},
		// Once the debt is repaid (the last reservation is due at 1000), a request at 1200
		// finds a whole token.
		{at: 1200 * ms, key: "a", verdict: Allow, delay: 0},
	}
	for i, s := range steps {
		if s.giveBack > 0 {
			g.GiveBack(store, charges[s.giveBack], base+s.at)
		}
		out := g.Admit(header("k", s.key), store, base+s.at)
		if out.Verdict != s.verdict || out.Delay != s.delay || (s.verdict == Limited && out.RetryAfter != s.retry) {
			t.Fatalf("step %d at %dms: got verdict %d delay %v retry %v, want %d, %v, %v",
				i, s.at/ms, out.Verdict, out.Delay, out.RetryAfter, s.verdict, s.delay, s.retry)
		}
		charges[i] = out.Charge()
	}
}

// A request matched by a delaying rule and a rejecting one: the rejecting rule's limits must
// admit at once (a request it would reject is not held), the delaying rule's may be due later.
// A shadow rule with on_limit delay never holds.
func TestDelayWithOtherRules(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "paced", "key": [{"header": "k"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}],
	   "on_limit": {"action": "delay", "max_delay": "5s"}},
	  {"name": "strict", "key": [{"header": "k"}], "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}]},
	  {"name": "tried", "key": [{"header": "k"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}],
	   "shadow": true, "on_limit": {"action": "delay", "max_delay": "60s"}}]}`)
	store := newMemStore()
	steps := []struct {
		at      int64
		verdict Verdict
		rule    int
		delay   time.Duration
		shadow  bool
	}{
		{0, Allow, -1, 0, false},
		{0, Allow, -1, time.Second, true}, // paced holds it 1s, strict admits at once, tried would limit
		// strict has no token left: Limited by it, and paced's reservation is not made.
		{0, Limited, 1, 0, true},
		{0, Limited, 1, 0, true},
	}
	for i, s := range steps {
		out := g.Admit(header("k", "a"), store, sec+s.at)
		if out.Verdict != s.verdict || out.Rule != s.rule || out.Delay != s.delay || (len(out.ShadowLimited) > 0) != (s.shadow && s.verdict == Allow) {
			t.Fatalf("step %d: got %+v, want verdict %d rule %d delay %v shadow-limited %v", i, out, s.verdict, s.rule, s.delay, s.shadow)
		}
	}
	// paced holds exactly the one reservation of the second request: one token below zero.
	slot, ok := storedSlot(g, store, &g.rules[0].limits[0], "1:a")
	if !ok || slot.cells[0] != -1 || slot.cells[2] != 0 {
		t.Fatalf("paced's bucket holds %+v, want one token owed", slot.cells)
	}
}

// Several workers (Gates on one store) reserve from one bucket at random instants, and some held
// clients go away: the instants the requests that go on are due never put more than
// capacity + rate × T in any interval T, and no request is held longer than max_delay.
func TestDelayAcrossWorkersIsPaced(t *testing.T) {
	doc := `{"rules": [{"name": "r", "key": [{"header": "k"}],
	  "limits": [{"capacity": 3, "refill_tokens": 2, "refill_interval": "300ms"}],
	  "on_limit": {"action": "delay", "max_delay": "700ms"}}]}`
	store := newMemStore()
	gates := []*Gate{mustGate(t, doc), mustGate(t, doc), mustGate(t, doc)}
	rng := rand.New(rand.NewPCG(7, 8))
	var requests []*heldRequest
	now := 10 * sec
	for i := 0; i < 3000; i++ {
		now += rng.Int64N(120 * ms)
		if rng.IntN(4) == 0 {
			// A client that is still held goes away: its reservation is given back (when
			// nothing was reserved behind it) and its request never goes on.
			for _, r := range requests[max(len(requests)-5, 0):] {
				if !r.gone && r.due > now {
					gates[rng.IntN(len(gates))].GiveBack(store, r.charge, now)
					r.gone = true
					break
				}
			}
		}
		out := gates[rng.IntN(len(gates))].Admit(header("k", "a"), store, now)
		switch out.Verdict {
		case Allow:
			if out.Delay < 0 || out.Delay > 700*time.Millisecond {
				t.Fatalf("request %d held %v, outside 0..max_delay", i, out.Delay)
			}
			requests = append(requests, &heldRequest{due: now + int64(out.Delay), at: now, charge: out.Charge()})
		case Limited:
		default:
			t.Fatalf("request %d: %+v", i, out)
		}
	}
	var due []int64
	for _, r := range requests {
		if !r.gone {
			due = append(due, r.due)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i] < due[j] })
	// capacity 3 + 2 tokens per 300ms; waits are rounded up to a nanosecond: 1ns of slack.
	for i := range due {
		for j := i; j < len(due); j++ {
			tokens := int64(j - i + 1)
			if tokens*300*ms > 3*300*ms+2*(due[j]-due[i]+1) {
				t.Fatalf("%d requests due within [%d, %d]: more than the bucket allows", tokens, due[i], due[j])
			}
			if due[j]-due[i] > 10*sec {
				break
			}
		}
	}
	if held, gone := countHeld(requests), len(requests)-len(due); held < 300 || gone < 100 {
		t.Fatalf("%d requests held, %d gone: the test exercises too little", held, gone)
	}
}

type heldRequest struct {
	due, at int64
	charge  Charge
	gone    bool
}

func countHeld(requests []*heldRequest) (n int) {
	for _, r := range requests {
		if r.due > r.at {
			n++
		}
	}
	return n
}
