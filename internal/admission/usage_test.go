package admission

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// usageDoc is one rule with usage: a token bucket of capacity 10 refilled 1 a second, each
// request reserving reserve.
func usageDoc(reserve string, limits string) string {
	return `{"rules": [{"name": "llm", "key": [{"header": "k"}], "limits": [` + limits + `],
	  "usage": {"source": "openai", "reserve": ` + reserve + `, "unknown": 10}}]}`
}

const usageBucket = `{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}`

// usageStep is one event at a fixed instant: a request admitted (want its verdict and, for a
// rejection, the exact Retry-After), or a request's usage settled.
type usageStep struct {
	at    int64 // ms
	id    string
	admit bool
	want  Verdict
	retry time.Duration
	used  int64 // settle: the amount the response reported
}

func usageAdmit(at int64, id string, want Verdict, retry time.Duration) usageStep {
	return usageStep{at: at, id: id, admit: true, want: want, retry: retry}
}
func usageSettle(at int64, id string, used int64) usageStep {
	return usageStep{at: at, id: id, used: used}
}

func runUsageSteps(t *testing.T, doc string, steps []usageStep) {
	t.Helper()
	g, store := mustGate(t, doc), newMemStore()
	held := map[string]*Pending{}
	base := 1000 * sec
	amounts := make([]int64, 1)
	for i, s := range steps {
		now := base + s.at*ms
		if s.admit {
			out := g.Admit(header("k", "alice"), store, now)
			if out.Verdict != s.want || out.Verdict == Limited && s.retry != 0 && out.RetryAfter != s.retry {
				t.Fatalf("step %d (admit %s at %dms): verdict %d retry %v, want %d retry %v", i, s.id, s.at, out.Verdict, out.RetryAfter, s.want, s.retry)
			}
			p := &Pending{}
			out.Hold(p)
			if out.Verdict == Allow {
				if rules := p.AppendUsageRules(nil); len(rules) != 1 || rules[0] != 0 {
					t.Fatalf("step %d: the held charge has usage rules %v, want [0]", i, rules)
				}
				held[s.id] = p
			}
			continue
		}
		amounts[0] = s.used
		g.SettleUsage(store, held[s.id], amounts, now)
		if !held[s.id].Empty() {
			t.Fatalf("step %d: the charge is still held after it was settled", i)
		}
	}
}

func TestUsageSettlesToTheReportedAmount(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		steps []usageStep
	}{
		{"the reserve is what admission charges", usageDoc("4", usageBucket), []usageStep{
			usageAdmit(0, "a", Allow, 0), usageAdmit(0, "b", Allow, 0), // 10 - 8 = 2 left
			usageAdmit(0, "c", Limited, 2*time.Second), // 2 more needed, at 1/s
		}},
		{"usage beyond the reserve is taken", usageDoc("1", usageBucket), []usageStep{
			usageAdmit(0, "a", Allow, 0), usageSettle(0, "a", 9), // 10 - 9 = 1 left
			usageAdmit(0, "b", Allow, 0), usageAdmit(0, "c", Limited, time.Second),
		}},
		{"the unused reserve is given back", usageDoc("4", usageBucket), []usageStep{
			usageAdmit(0, "a", Allow, 0), usageAdmit(0, "b", Allow, 0), usageAdmit(0, "c", Limited, 2*time.Second), // 2 left
			usageSettle(0, "a", 1), // 3 given back: 5 left
			usageAdmit(0, "d", Allow, 0), usageAdmit(0, "e", Limited, 3*time.Second),
		}},
		{"a key in debt waits until the debt is repaid and the reserve is there", usageDoc("1", usageBucket), []usageStep{
			usageAdmit(0, "a", Allow, 0), usageSettle(0, "a", 15), // 10 - 15 = -5
			usageAdmit(0, "b", Limited, 6*time.Second), // 5 owed, then 1 for the reserve
			usageAdmit(5500, "c", Limited, 500*time.Millisecond),
			usageAdmit(6000, "d", Allow, 0),
		}},
		{"a debt is bounded by minus the capacity", usageDoc("1", usageBucket), []usageStep{
			usageAdmit(0, "a", Allow, 0), usageSettle(0, "a", 1000), // floor: -10
			usageAdmit(0, "b", Limited, 11*time.Second),
		}},
		{"a settlement at once after admission, with usage equal to the reserve, changes nothing", usageDoc("5", usageBucket), []usageStep{
			usageAdmit(0, "a", Allow, 0), usageSettle(0, "a", 5),
			usageAdmit(0, "b", Allow, 0), usageAdmit(0, "c", Limited, 5*time.Second),
		}},
		{"a window counts usage up to its capacity", usageDoc("1", `{"algorithm": "fixed_window", "capacity": 10, "window": "10s"}`), []usageStep{
			usageAdmit(0, "a", Allow, 0), usageSettle(100, "a", 50), // full until the window ends
			usageAdmit(200, "b", Limited, 9800*time.Millisecond),
			usageAdmit(10000, "c", Allow, 0), // a new window: nothing carried over
		}},
		{"a tier's bucket goes into debt", `{"rules": [{"name": "llm", "key": [{"header": "k"}],
		  "limits_by": {"part": {"header": "plan"}, "default": "free", "tiers": {
		    "free": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}],
		    "pro": [{"capacity": 100, "refill_tokens": 10, "refill_interval": "1s"}]}},
		  "usage": {"source": "openai", "reserve": 1, "unknown": 10}}]}`, []usageStep{
			usageAdmit(0, "a", Allow, 0), usageSettle(0, "a", 15), // the free tier: 10 - 15 = -5
			usageAdmit(0, "b", Limited, 6*time.Second),
		}},
		{"a window gives back the unused reserve", usageDoc("6", `{"algorithm": "fixed_window", "capacity": 10, "window": "10s"}`), []usageStep{
			usageAdmit(0, "a", Allow, 0), usageAdmit(0, "b", Limited, 10*time.Second),
			usageSettle(100, "a", 2), // 4 given back: 2 counted
			usageAdmit(200, "c", Allow, 0), usageAdmit(200, "d", Limited, 9800*time.Millisecond),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runUsageSteps(t, tt.doc, tt.steps) })
	}
}

// TestUsageBoundHolds checks the bound of usage.go against a model of what was used: requests
// of one key arrive at random instants, reserve a fixed amount and report a random usage after a
// random time in flight. Over every interval [t1, t2] of length T, the usage of the requests
// admitted in it is at most capacity + rate × T, plus the usage beyond their reserves of those
// still in flight at t2, plus the debt the bucket owes at t2 (repaid before it admits again), as
// long as no debt reached the floor (minus the capacity), below which it is forgiven. When every
// request reserves what it can use, there is never a debt nor usage beyond a reserve.
func TestUsageBoundHolds(t *testing.T) {
	for _, tt := range []struct {
		name             string
		reserve, maxUsed int64
	}{
		{"every request reserves its ceiling", 6, 6},
		{"requests use more than they reserve", 2, 5},
		{"requests use less than they reserve", 5, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 40; seed++ {
				checkUsageBound(t, seed, tt.reserve, tt.maxUsed)
			}
		})
	}
}

type usageRequest struct {
	admitted, due, settled int64 // ns; settled is 0 until it is
	used                   int64
	pending                *Pending
}

func checkUsageBound(t *testing.T, seed uint64, reserve, maxUsed int64) {
	t.Helper()
	// The numbers keep the debt above its floor (checked), where nothing is forgiven: the
	// bound is then exact.
	const capacity, perSecond = 100, 20
	rng := rand.New(rand.NewPCG(seed, 7))
	g := mustGate(t, `{"rules": [{"name": "llm", "key": [{"header": "k"}],
	  "limits": [{"capacity": 100, "refill_tokens": 20, "refill_interval": "1s"}],
	  "usage": {"source": "openai", "reserve": `+strconv.FormatInt(reserve, 10)+`, "unknown": 1}}]}`)
	store := newMemStore()
	var admitted []*usageRequest
	var inFlight []*usageRequest
	debtAt := map[int64]int64{} // the bucket's debt, in whole tokens, after each event
	amounts := make([]int64, 1)
	now := 1000 * sec
	for step := 0; step < 400; step++ {
		now += int64(rng.IntN(300)) * ms
		// Settle what is due first, in order.
		kept := inFlight[:0]
		for _, r := range inFlight {
			if r.due <= now {
				amounts[0], r.settled = r.used, now
				g.SettleUsage(store, r.pending, amounts, now)
				continue
			}
			kept = append(kept, r)
		}
		inFlight = kept
		out := g.Admit(header("k", "alice"), store, now)
		if out.Verdict == Allow {
			r := &usageRequest{admitted: now, due: now + int64(rng.IntN(2000))*ms, used: 1 + rng.Int64N(maxUsed), pending: &Pending{}}
			out.Hold(r.pending)
			admitted, inFlight = append(admitted, r), append(inFlight, r)
		}
		debtAt[now] = bucketDebt(t, store)
		if debtAt[now] >= capacity {
			t.Fatalf("seed %d: the debt reached its floor, where the bound does not hold: change the test's numbers", seed)
		}
	}
	for _, first := range admitted {
		for _, last := range admitted {
			t1, t2 := first.admitted, last.admitted
			if t2 < t1 {
				continue
			}
			var used, beyond int64
			for _, r := range admitted {
				if r.admitted < t1 || r.admitted > t2 {
					continue
				}
				used += r.used
				if r.settled == 0 || r.settled > t2 {
					beyond += max(r.used-reserve, 0)
				}
			}
			// used ≤ capacity + perSecond × T + beyond + debt, in exact integers.
			lhs := (used - capacity - beyond - debtAt[t2]) * sec
			if lhs > perSecond*(t2-t1) {
				t.Fatalf("seed %d: requests admitted in [%d, %d] ms used %d, over capacity %d + %d/s × %d ms + %d beyond their reserves in flight + %d owed",
					seed, (t1-1000*sec)/ms, (t2-1000*sec)/ms, used, capacity, perSecond, (t2-t1)/ms, beyond, debtAt[t2])
			}
			if reserve >= maxUsed && beyond+debtAt[t2] != 0 {
				t.Fatalf("seed %d: requests reserving their ceiling left %d beyond and %d owed", seed, beyond, debtAt[t2])
			}
		}
	}
}

// bucketDebt is the whole tokens the only bucket in store owes (0 if it owes nothing).
func bucketDebt(t *testing.T, store *memStore) int64 {
	t.Helper()
	var debt int64
	for _, v := range store.entries() {
		if s, ok := decodeSlot(v); ok && s.kind == kindLive {
			debt = max(debt, -s.cells[0])
		}
	}
	return debt
}

// A key whose response is in flight keeps its bucket under a flood of other keys, even once the
// bucket would be full again: the settlement still finds it, and the usage beyond the reserve is
// owed, not dropped with a slot given away.
func TestUsageKeepsTheBucketForItsSettlement(t *testing.T) {
	g, store := mustGate(t, `{"key_table": {"max_keys": 16, "when_full": "reject"},
	  "rules": [{"name": "llm", "key": [{"header": "k"}],
	  "limits": [{"capacity": 10, "refill_tokens": 10, "refill_interval": "1s"}],
	  "usage": {"source": "openai", "reserve": 1, "unknown": 10}}]}`), newMemStore()
	base := 1000 * sec
	out := g.Admit(header("k", "alice"), store, base)
	if out.Verdict != Allow {
		t.Fatalf("alice: verdict %d", out.Verdict)
	}
	held := &Pending{}
	out.Hold(held)
	// 0.5 s later alice's bucket is full again; 200 other keys want slots.
	for i := range 200 {
		g.Admit(header("k", "flood-"+strconv.Itoa(i)), store, base+500*ms)
	}
	g.SettleUsage(store, held, []int64{25}, base+600*ms) // 24 owed: 10 - 24 = -14, floored at -10
	out = g.Admit(header("k", "alice"), store, base+600*ms)
	if out.Verdict != Limited || out.RetryAfter != 1100*time.Millisecond {
		t.Fatalf("alice after her settlement: verdict %d retry %v, want limited for 1.1s (the debt of 10, then the reserve)", out.Verdict, out.RetryAfter)
	}
}

// A request that never reached the upstream (status 0) gets a usage rule's reserve back from
// Settle, not counted as a refund; a response (any other status) leaves it for SettleUsage.
func TestSettleGivesBackAnUnusedReserve(t *testing.T) {
	g := mustGate(t, usageDoc("6", usageBucket))
	base := 1000 * sec
	for _, tt := range []struct {
		status   int
		heldLeft bool
		want     Verdict // of a second request of 6 tokens
	}{
		{0, false, Allow},    // 10 - 6 + 6: the second fits
		{200, true, Limited}, // 4 left until SettleUsage
	} {
		store := newMemStore()
		out := g.Admit(header("k", "alice"), store, base)
		p := &Pending{}
		out.Hold(p)
		if given := g.Settle(store, p, tt.status, base); len(given) != 0 || p.Empty() == tt.heldLeft {
			t.Fatalf("status %d: rules %v counted as refunds, charge still held %v; want none, held %v", tt.status, given, !p.Empty(), tt.heldLeft)
		}
		if got := g.Admit(header("k", "alice"), store, base).Verdict; got != tt.want {
			t.Errorf("status %d: the next request's verdict %d, want %d", tt.status, got, tt.want)
		}
	}
}
