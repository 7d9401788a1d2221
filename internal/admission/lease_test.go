package admission

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// leaseGates are two Gates (two worker VMs) of one policy whose rule 0 leases up to 16 tokens
// for 1 s, sharing one store.
func leaseGates(t *testing.T, maxKeys int) (a, b *Gate, store *memStore) {
	t.Helper()
	doc := `{"key_table": {"max_keys": ` + strconv.Itoa(maxKeys) + `}, "rules": [{"name": "r", "key": [{"header": "k"}],
	  "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1s"}],
	  "global": {"cluster": "rls", "domain": "d", "lease": {"max_tokens": 16, "ttl": "1s"}}}]}`
	a, b = mustGate(t, doc), mustGate(t, doc)
	store = newMemStore()
	for _, g := range []*Gate{a, b} {
		if err := g.LoadSecret(store, func() uint64 { return 9 }); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, store
}

type leaseStep struct {
	at   int64 // ms
	gate int   // 0 or 1
	do   string
	cost int64
	// put / refuse
	grant LeaseGrant
	reset time.Duration
	// want (take)
	verdict LeaseVerdict
	ask     int64
	retry   time.Duration
	expired int64
}

func runLeaseSteps(t *testing.T, steps []leaseStep) {
	t.Helper()
	a, b, store := leaseGates(t, 100)
	gates := []*Gate{a, b}
	for i, s := range steps {
		g, now := gates[s.gate], sec+s.at*ms
		switch s.do {
		case "take":
			got, err := g.TakeLease(store, 0, "key", s.cost, now)
			if err != nil {
				t.Fatalf("step %d (%d ms): %v", i, s.at, err)
			}
			want := LeaseTake{Verdict: s.verdict, Ask: s.ask, RetryAfter: s.retry, Expired: s.expired}
			got.Quota, got.Unit, got.Left, got.UntilReset = 0, 0, 0, 0 // leasequota_test.go checks these
			if got != want {
				t.Fatalf("step %d (%d ms, take %d): got %+v, want %+v", i, s.at, s.cost, got, want)
			}
		case "put":
			if s.grant.SentAt == 0 {
				s.grant.SentAt = now - ms
			}
			expired, err := g.PutLease(store, 0, "key", s.grant, now)
			if err != nil || expired != s.expired {
				t.Fatalf("step %d (%d ms, put %+v): expired %d, %v; want %d", i, s.at, s.grant, expired, err, s.expired)
			}
		case "refuse":
			if err := g.RefuseLease(store, 0, "key", s.reset, 100, 3, now); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
	}
}

func TestLeaseGrowsAndIsSpentExactlyAcrossVMs(t *testing.T) {
	runLeaseSteps(t, []leaseStep{
		{at: 0, do: "take", cost: 1, verdict: LeaseAsk, ask: 1}, // no lease yet: the cost
		{at: 1, do: "put", grant: LeaseGrant{Tokens: 0, Asked: 1}},
		{at: 2, gate: 1, do: "take", cost: 1, verdict: LeaseAsk, ask: 1},
		// Dry within half a ttl of the grant: the size doubles (from what was asked).
		{at: 3, gate: 1, do: "put", grant: LeaseGrant{Tokens: 1, Asked: 1}},
		{at: 4, do: "take", cost: 1, verdict: LeaseServed},
		{at: 5, gate: 1, do: "take", cost: 1, verdict: LeaseAsk, ask: 2},
		{at: 6, gate: 1, do: "put", grant: LeaseGrant{Tokens: 1, Asked: 2}},
		{at: 7, do: "take", cost: 1, verdict: LeaseServed},
		{at: 8, do: "take", cost: 1, verdict: LeaseAsk, ask: 4},
		{at: 9, do: "put", grant: LeaseGrant{Tokens: 3, Asked: 4}},
		{at: 10, gate: 1, do: "take", cost: 1, verdict: LeaseServed},
		{at: 10, gate: 0, do: "take", cost: 1, verdict: LeaseServed},
		{at: 10, gate: 1, do: "take", cost: 1, verdict: LeaseServed},
		{at: 11, gate: 0, do: "take", cost: 1, verdict: LeaseAsk, ask: 8},
		{at: 12, do: "put", grant: LeaseGrant{Tokens: 7, Asked: 8}},
		{at: 13, do: "take", cost: 7, verdict: LeaseServed},
		{at: 14, do: "take", cost: 1, verdict: LeaseAsk, ask: 16},
		{at: 15, do: "put", grant: LeaseGrant{Tokens: 15, Asked: 16}},
		{at: 16, do: "take", cost: 15, verdict: LeaseServed},
		// Never more than max_tokens.
		{at: 17, gate: 1, do: "take", cost: 1, verdict: LeaseAsk, ask: 16},
	})
}

func TestLeaseSlowKeyDoesNotGrow(t *testing.T) {
	runLeaseSteps(t, []leaseStep{
		{at: 0, do: "take", cost: 1, verdict: LeaseAsk, ask: 1},
		{at: 1, do: "put", grant: LeaseGrant{Tokens: 0, Asked: 1}},
		// The pool ran dry, but more than half a ttl after the grant: the size stays.
		{at: 600, do: "take", cost: 1, verdict: LeaseAsk, ask: 1},
		{at: 601, do: "put", grant: LeaseGrant{Tokens: 0, Asked: 1}},
		{at: 1500, do: "take", cost: 1, verdict: LeaseAsk, ask: 1},
	})
}

func TestLeaseExpiresAtTTLAndShrinks(t *testing.T) {
	runLeaseSteps(t, []leaseStep{
		{at: 0, do: "take", cost: 1, verdict: LeaseAsk, ask: 1},
		{at: 1, do: "put", grant: LeaseGrant{Tokens: 0, Asked: 1}},
		{at: 2, do: "take", cost: 1, verdict: LeaseAsk, ask: 1},
		{at: 3, do: "put", grant: LeaseGrant{Tokens: 0, Asked: 1}}, // size 2
		{at: 4, do: "take", cost: 1, verdict: LeaseAsk, ask: 2},
		{at: 5, do: "put", grant: LeaseGrant{Tokens: 0, Asked: 2}}, // size 4
		{at: 6, do: "take", cost: 1, verdict: LeaseAsk, ask: 4},
		{at: 7, do: "put", grant: LeaseGrant{Tokens: 3, Asked: 4}}, // size 8, 3 tokens until 1007 ms
		{at: 1006, gate: 1, do: "take", cost: 1, verdict: LeaseServed},
		// At the ttl the 2 left are dropped and the size halves to 4.
		{at: 1007, gate: 1, do: "take", cost: 1, verdict: LeaseAsk, ask: 4, expired: 2},
		{at: 1008, gate: 0, do: "take", cost: 1, verdict: LeaseAsk, ask: 4},
	})
}

func TestLeaseExpiresAtTheEndOfTheServicesWindow(t *testing.T) {
	runLeaseSteps(t, []leaseStep{
		// The window ends 100 ms after the lease request was sent (at 9 ms), before the ttl.
		{at: 10, do: "put", grant: LeaseGrant{Tokens: 5, Asked: 6, SentAt: sec + 9*ms, UntilReset: 100 * time.Millisecond, Remaining: 50}},
		{at: 108, do: "take", cost: 2, verdict: LeaseServed},
		{at: 109, gate: 1, do: "take", cost: 1, verdict: LeaseAsk, ask: 1, expired: 3},
		// A grant in the next window: the hint of what is left applies within it only.
		{at: 110, do: "put", grant: LeaseGrant{Tokens: 0, Asked: 1, SentAt: sec + 109*ms, UntilReset: 50 * time.Millisecond, Remaining: 0}},
		{at: 111, do: "take", cost: 1, verdict: LeaseAsk, ask: 1},
	})
}

func TestLeaseAskNeverExceedsWhatTheServiceHasLeft(t *testing.T) {
	steps := []leaseStep{{at: 0, do: "take", cost: 1, verdict: LeaseAsk, ask: 1}}
	// Grow to 16 quickly: a new lease starts at 1, then each dry pool doubles what was asked.
	asked, next := []int64{1, 1, 2, 4, 8}, []int64{1, 2, 4, 8, 16}
	for i := range asked {
		at := int64(1 + 2*i)
		steps = append(steps, leaseStep{at: at, do: "put", grant: LeaseGrant{Asked: asked[i], UntilReset: time.Hour, Remaining: 1000}},
			leaseStep{at: at + 1, do: "take", cost: 1, verdict: LeaseAsk, ask: next[i]})
	}
	steps = append(steps,
		leaseStep{at: 20, do: "put", grant: LeaseGrant{Asked: 16, UntilReset: time.Hour, Remaining: 5}},
		// Half of what is left: other replicas want the rest.
		leaseStep{at: 21, do: "take", cost: 1, verdict: LeaseAsk, ask: 2},
		// But never less than the cost.
		leaseStep{at: 21, do: "take", cost: 9, verdict: LeaseAsk, ask: 9})
	runLeaseSteps(t, steps)
}

func TestLeaseCostLargerThanWhatIsLeft(t *testing.T) {
	runLeaseSteps(t, []leaseStep{
		{at: 0, do: "put", grant: LeaseGrant{Tokens: 3, Asked: 4}},
		// 3 left, cost 5: ask for (at least) the cost; the 3 stay for smaller requests.
		{at: 1, do: "take", cost: 5, verdict: LeaseAsk, ask: 5},
		{at: 2, gate: 1, do: "take", cost: 2, verdict: LeaseServed},
		{at: 3, do: "take", cost: 1, verdict: LeaseServed},
		{at: 4, do: "take", cost: 1, verdict: LeaseAsk, ask: 1},
	})
}

func TestLeaseRemembersOverLimit(t *testing.T) {
	runLeaseSteps(t, []leaseStep{
		{at: 0, do: "put", grant: LeaseGrant{Tokens: 2, Asked: 3}},
		{at: 1, gate: 1, do: "refuse", reset: 2500 * time.Millisecond},
		// Tokens leased before stay spendable: the service counted them in this window.
		{at: 2, do: "take", cost: 1, verdict: LeaseServed},
		{at: 3, do: "take", cost: 2, verdict: LeaseOverLimit, retry: 2498 * time.Millisecond},
		{at: 4, gate: 1, do: "take", cost: 1, verdict: LeaseServed},
		{at: 5, gate: 1, do: "take", cost: 1, verdict: LeaseOverLimit, retry: 2496 * time.Millisecond},
		{at: 2500, gate: 0, do: "take", cost: 1, verdict: LeaseOverLimit, retry: time.Millisecond},
		// Reset: ask again.
		{at: 2501, gate: 0, do: "take", cost: 1, verdict: LeaseAsk, ask: 1},
	})
}

// Envoy has no delete: however many keys lease, the table keeps to its slots.
func TestLeaseTableIsBounded(t *testing.T) {
	a, _, store := leaseGates(t, 16)
	before := store.keys()
	kept, dropped := 0, int64(0)
	for i := 0; i < 1000; i++ {
		key := "k" + strconv.Itoa(i)
		now := sec + int64(i)*ms
		expired, err := a.PutLease(store, 0, key, LeaseGrant{Tokens: 4, Asked: 5, SentAt: now, Remaining: -1}, now)
		if err != nil {
			t.Fatal(err)
		}
		dropped += expired
		if take, _ := a.TakeLease(store, 0, key, 1, now); take.Verdict == LeaseServed {
			kept++
		}
	}
	if n := store.keys() - before; n > 16 {
		t.Fatalf("%d lease slots for a table of 16", n)
	}
	// A key with no free candidate drops its grant (reported as expired) and is not served.
	if kept == 0 || int64(1000-kept)*4 != dropped {
		t.Fatalf("kept %d leases, dropped %d tokens", kept, dropped)
	}
}

// Property: whatever the order of takes, grants, refusals and expiries over several VMs, every
// token the service granted is spent once, dropped (reported expired) or still in the pool; a
// lease request never asks for less than the cost; and the pool is never spendable past the end
// of the service's window it knows (the earliest of the grants it holds).
func TestLeaseAccountingProperty(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		a, b, store := leaseGates(t, 100)
		gates := []*Gate{a, b}
		var granted, spent, expired int64
		now := sec
		for step := 0; step < 300; step++ {
			now += int64(rng.IntN(400)) * ms
			g := gates[rng.IntN(2)]
			switch op := rng.IntN(10); {
			case op < 6:
				cost := int64(1 + rng.IntN(3))
				take, err := g.TakeLease(store, 0, "key", cost, now)
				if err != nil {
					t.Fatal(err)
				}
				expired += take.Expired
				if take.Verdict == LeaseServed {
					spent += cost
				}
				if take.Verdict == LeaseAsk && take.Ask < cost {
					t.Fatalf("seed %d: ask %d for a cost of %d", seed, take.Ask, cost)
				}
			case op < 9:
				n := int64(rng.IntN(17))
				reset := time.Duration(0)
				if rng.IntN(2) == 0 {
					reset = time.Duration(50+rng.IntN(2000)) * time.Millisecond
				}
				granted += n
				e, err := g.PutLease(store, 0, "key", LeaseGrant{Tokens: n, Asked: n + 1, SentAt: now - int64(rng.IntN(20))*ms,
					UntilReset: reset, Remaining: int64(rng.IntN(50))}, now)
				if err != nil {
					t.Fatal(err)
				}
				expired += e
			default:
				if err := g.RefuseLease(store, 0, "key", time.Duration(rng.IntN(3000))*time.Millisecond, 10, 3, now); err != nil {
					t.Fatal(err)
				}
			}
			ref, _ := a.leaseRef(0, "key")
			f, err := a.findLease(store, &ref, now)
			if err != nil {
				t.Fatal(err)
			}
			left := int64(0)
			if f.mine {
				left = f.slot.tokens
				if f.slot.windowEnd != 0 && f.slot.expiresAt > f.slot.windowEnd {
					t.Fatalf("seed %d step %d: tokens spendable until %d, after the window's end %d", seed, step, f.slot.expiresAt, f.slot.windowEnd)
				}
			}
			if granted != spent+expired+left {
				t.Fatalf("seed %d step %d: granted %d != spent %d + expired %d + left %d", seed, step, granted, spent, expired, left)
			}
		}
	}
}

// Two VMs racing for the last tokens: the compare-and-swap makes one of them read again, and
// each token is spent once.
func TestLeaseSpendRacesAreExact(t *testing.T) {
	a, b, store := leaseGates(t, 100)
	if _, err := a.PutLease(store, 0, "key", LeaseGrant{Tokens: 3, Asked: 3, SentAt: sec, Remaining: -1}, sec); err != nil {
		t.Fatal(err)
	}
	raced := false
	store.onSet(func(key string) error {
		if raced {
			return nil
		}
		raced = true
		// b spends 2 between a's read and a's write.
		store.onSet(nil)
		if take, err := b.TakeLease(store, 0, "key", 2, sec+ms); err != nil || take.Verdict != LeaseServed {
			t.Fatalf("b: %+v %v", take, err)
		}
		return nil
	})
	// a wants 2 as well: its first write loses the CAS, it reads 1 left and must ask.
	take, err := a.TakeLease(store, 0, "key", 2, sec+ms)
	if err != nil || take.Verdict != LeaseAsk {
		t.Fatalf("a: %+v %v, want to ask: only 1 token is left", take, err)
	}
	if take, _ := a.TakeLease(store, 0, "key", 1, sec+ms); take.Verdict != LeaseServed {
		t.Fatalf("the last token: %+v", take)
	}
	if take, _ := b.TakeLease(store, 0, "key", 1, sec+ms); take.Verdict != LeaseAsk {
		t.Fatalf("nothing is left: %+v", take)
	}
}
