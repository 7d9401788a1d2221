package admission

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// Capacity 1, one token per 200ms, max_delay 1s: a burst is paced 200ms apart, the request past
// max_delay is Limited at once, and a give-back (a client gone while held) makes room again.
func TestDelaySteps(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "partner", "key": [{"header": "k"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "200ms"}],
	  "on_limit": {"action": "delay", "max_delay": "1s"}}]}`)
	if g.fast != nil {
		t.Fatal("a delaying rule took the fast path")
	}
	store := newMemStore()
	base := 1000 * sec
	var held Charge
	steps := []struct {
		at       int64
		key      string
		verdict  Verdict
		delay    time.Duration
		retry    time.Duration
		giveBack bool // give back the charge kept from the step marked keep
		keep     bool
	}{
		{at: 0, key: "a", verdict: Allow, delay: 0},
		{at: 0, key: "a", verdict: Allow, delay: 200 * time.Millisecond},
		{at: 0, key: "a", verdict: Allow, delay: 400 * time.Millisecond},
		{at: 50 * ms, key: "a", verdict: Allow, delay: 550 * time.Millisecond, keep: true}, // due at 600
		{at: 100 * ms, key: "a", verdict: Allow, delay: 700 * time.Millisecond},            // due at 800
		{at: 100 * ms, key: "a", verdict: Allow, delay: 900 * time.Millisecond},            // due at 1000
		// Due at 1200: more than max_delay from 100ms; refused with the wait without holding.
		{at: 100 * ms, key: "a", verdict: Limited, retry: 1100 * time.Millisecond},
		// Another key has its own bucket.
		{at: 100 * ms, key: "b", verdict: Allow, delay: 0},
		// The request due at 600 goes away at 150: its token comes back, and the next request
		// is due where the last one was, at 1000.
		{at: 150 * ms, key: "a", giveBack: true, verdict: Allow, delay: 1000*time.Millisecond - 150*time.Millisecond},
		{at: 150 * ms, key: "a", verdict: Limited, retry: 1050 * time.Millisecond},
		// Once the debt is repaid (at 1000ms the last reservation is due), a request at 1200
		// has a whole token again.
		{at: 1200 * ms, key: "a", verdict: Allow, delay: 0},
	}
	for i, s := range steps {
		if s.giveBack {
			g.GiveBack(store, held, base+s.at)
		}
		out := g.Admit(header("k", s.key), store, base+s.at)
		if out.Verdict != s.verdict || out.Delay != s.delay || (s.verdict == Limited && out.RetryAfter != s.retry) {
			t.Fatalf("step %d at %dms: got verdict %d delay %v retry %v, want %d, %v, %v",
				i, s.at/ms, out.Verdict, out.Delay, out.RetryAfter, s.verdict, s.delay, s.retry)
		}
		if s.keep {
			held = out.Charge()
		}
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
	if tb := g.rules[0].limits[0].algo.(*tokenBucket); !ok || slot.cells[0] != -tb.creditsPerToken {
		t.Fatalf("paced's bucket holds %+v, want one token owed", slot.cells)
	}
}

// Several workers (Gates on one store) reserve from one bucket at random instants: the instants
// the admitted requests are due never put more than capacity + rate × T in any interval T, and
// no request is held longer than max_delay.
func TestDelayAcrossWorkersIsPaced(t *testing.T) {
	doc := `{"rules": [{"name": "r", "key": [{"header": "k"}],
	  "limits": [{"capacity": 3, "refill_tokens": 2, "refill_interval": "300ms"}],
	  "on_limit": {"action": "delay", "max_delay": "700ms"}}]}`
	store := newMemStore()
	gates := []*Gate{mustGate(t, doc), mustGate(t, doc), mustGate(t, doc)}
	rng := rand.New(rand.NewPCG(7, 8))
	var due []int64
	now := 10 * sec
	for i := 0; i < 3000; i++ {
		now += rng.Int64N(120 * ms)
		out := gates[rng.IntN(len(gates))].Admit(header("k", "a"), store, now)
		switch out.Verdict {
		case Allow:
			if out.Delay < 0 || out.Delay > 700*time.Millisecond {
				t.Fatalf("request %d held %v, outside 0..max_delay", i, out.Delay)
			}
			due = append(due, now+int64(out.Delay))
		case Limited:
		default:
			t.Fatalf("request %d: %+v", i, out)
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
	if len(due) < 1000 {
		t.Fatalf("only %d of 3000 admitted: the test paces nothing", len(due))
	}
}
