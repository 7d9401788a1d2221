package admission

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

const globalRules = `{"rules": [
  {"name": "g", "key": [{"header": "k"}], "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1h"},
    {"algorithm": "fixed_window", "capacity": 5, "window": "1h"}],
   "cost": {"header": "x-cost", "max": 3},
   "global": {"cluster": "ratelimit", "domain": "d"}},
  {"name": "local", "key": [{"header": "k"}], "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1s"}]},
  {"name": "free", "key": [{"header": "k"}], "cost": 0, "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}],
   "global": {"cluster": "ratelimit", "domain": "d"}}
]}`

// An admitted request lists one check per enforced rule with a global limit and a cost; the key
// is a hash, not the key.
func TestGlobalChecks(t *testing.T) {
	g := mustGate(t, globalRules)
	store := newMemStore()
	req := fakeRequest{headers: map[string]string{"k": "alice-secret-key", "x-cost": "2"}}
	out := g.Admit(req, store, sec)
	if out.Verdict != Allow {
		t.Fatalf("%+v", out)
	}
	checks := out.Global
	if len(checks) != 1 {
		t.Fatalf("checks %+v, want one for rule g (rule local has no global limit, rule free costs nothing)", checks)
	}
	c := checks[0]
	if c.Rule != 0 || c.Cost != 2 || c.Key != GlobalKey("g", "16:alice-secret-key") {
		t.Fatalf("check %+v", c)
	}
	if strings.Contains(c.Key, "alice") || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(c.Key) {
		t.Fatalf("key %q: want 32 hex digits that do not show the key", c.Key)
	}
	// A request that was not admitted needs no check and was charged nothing.
	g.Admit(fakeRequest{headers: map[string]string{"k": "bob", "x-cost": "3"}}, store, sec)
	out = g.Admit(fakeRequest{headers: map[string]string{"k": "bob", "x-cost": "3"}}, store, sec)
	if out.Verdict != Limited {
		t.Fatalf("%+v, want limited", out)
	}
	if len(out.Global) != 0 {
		t.Fatalf("a limited request has checks %+v", out.Global)
	}
	if !out.Charge().Empty() {
		t.Fatal("a limited request has a charge")
	}
}

// Replicas have different secrets for their key tables, but send the same global key, and keep
// sending it across versions: it is pinned here.
func TestGlobalKeyIsTheSameEverywhere(t *testing.T) {
	a, b := mustGate(t, globalRules), mustGate(t, globalRules)
	a.secret, b.secret = [2]uint64{1, 2}, [2]uint64{3, 4}
	ka := a.Admit(header("k", "alice"), newMemStore(), sec).Global
	kb := b.Admit(header("k", "alice"), newMemStore(), sec).Global
	if len(ka) != 1 || len(kb) != 1 || ka[0].Key != kb[0].Key {
		t.Fatalf("replicas disagree: %+v and %+v", ka, kb)
	}
	if got := GlobalKey("per-api-key", "alice"); got != "e6595ae8a03c4e628d82b8239b53381e" {
		t.Fatalf("GlobalKey(per-api-key, alice) = %s: changing it resets every client's global count", got)
	}
	if GlobalKey("r1", "alice") == GlobalKey("r2", "alice") {
		t.Fatal("two rules send the same hash for one key")
	}
}

// What a request was charged can be given back later, after other requests, to every limit it
// was taken from.
func TestGiveBack(t *testing.T) {
	g := mustGate(t, globalRules)
	store := newMemStore()
	alice := fakeRequest{headers: map[string]string{"k": "alice", "x-cost": "2"}}
	charge := g.Admit(alice, store, sec).Charge()
	if len(charge.entries) != 3 {
		t.Fatalf("charge %+v: want the two limits of g and the one of local", charge.entries)
	}
	// Another key in between: the charge is a copy, not the Gate's buffers.
	g.Admit(header("k", "bob"), store, sec)
	if out := g.Admit(alice, store, 2*sec); out.Verdict != Limited {
		t.Fatalf("%+v: 3 tokens, 2 taken, 2 more wanted: want limited", out)
	}
	g.GiveBack(store, charge, 3*sec)
	for i, want := range []int64{3, 5} {
		s, ok := storedSlot(g, store, &g.rules[0].limits[i], "5:alice")
		_, d := g.rules[0].limits[i].algo.take(s.cells, 3*sec, 1)
		if !ok || d.Remaining+1 != want {
			t.Fatalf("limit %d holds %d after the refund, want %d", i, d.Remaining+1, want)
		}
	}
	if out := g.Admit(alice, store, 3*sec); out.Verdict != Allow {
		t.Fatalf("%+v: the refund should have made room", out)
	}
	// Giving nothing back, or a charge of a request that cost nothing, is a no-op.
	g.GiveBack(store, Charge{}, 4*sec)
	g.Admit(fakeRequest{headers: map[string]string{"k": "carol", "x-cost": "0"}}, store, 4*sec)
}

// A window gives back only while the window the units were counted in lasts: after it, the
// refund would land on what the next window counted.
func TestGiveBackAfterTheWindowIsDropped(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "w", "key": [{"header": "k"}],
	  "limits": [{"algorithm": "fixed_window", "capacity": 2, "window": "1s"}],
	  "global": {"cluster": "ratelimit", "domain": "d"}}]}`)
	store := newMemStore()
	old := g.Admit(header("k", "x"), store, 10*sec).Charge()
	g.Admit(header("k", "x"), store, 11*sec)                    // next window: 1 counted
	recent := g.Admit(header("k", "x"), store, 11*sec).Charge() // 2 counted: full
	g.GiveBack(store, old, 11*sec)
	if out := g.Admit(header("k", "x"), store, 11*sec); out.Verdict != Limited {
		t.Fatalf("%+v: a refund from the previous window was applied to this one", out)
	}
	g.GiveBack(store, recent, 11*sec+sec/2)
	if out := g.Admit(header("k", "x"), store, 11*sec+sec/2); out.Verdict != Allow {
		t.Fatalf("%+v: a refund within its window was dropped", out)
	}
}

func TestFloorDiv(t *testing.T) {
	for _, c := range [][3]int64{{7, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 5, 0}, {-1, 5, -1}} {
		if got := floorDiv(c[0], c[1]); got != c[2] {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}

// Gates deciding by one Policy share its buckets through the store, and each Outcome keeps what
// its own request needs: deciding another request, on this Gate or another, changes neither its
// global checks nor its charge.
func TestGatesShareAPolicy(t *testing.T) {
	a := mustGate(t, globalRules)
	b := NewGate(a.Policy)
	store := newMemStore()
	alice := fakeRequest{headers: map[string]string{"k": "alice", "x-cost": "2"}}
	first := a.Admit(alice, store, sec)
	checks, charge := append([]GlobalCheck(nil), first.Global...), first.Charge()
	if out := b.Admit(alice, store, sec); out.Verdict != Limited {
		t.Fatalf("%+v: the second Gate does not see the first one's charge (3 tokens, 2 taken, 2 wanted)", out)
	}
	if len(first.Global) != 1 || first.Global[0] != checks[0] || len(first.Charge().entries) != len(charge.entries) {
		t.Fatalf("another Gate's decision changed this outcome: %+v", first)
	}
	b.GiveBack(store, charge, sec)
	if out := b.Admit(alice, store, sec); out.Verdict != Allow {
		t.Fatalf("%+v: a charge taken through one Gate is given back through another", out)
	}
}

// A request charged at t=0 whose global check is rejected (or whose client goes away) at
// t=200ms: by then the bucket has refilled to full and been drained by two more requests. The
// charge was already made up for by the refill, so giving it back must not admit a third
// request at that instant (capacity 2).
func TestGiveBackAfterARefillOwesNothing(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "100ms"}]}]}`)
	store := newMemStore()
	ms := int64(time.Millisecond)
	base := int64(time.Hour)
	r1 := g.Admit(header("k", "a"), store, base)
	if r1.Verdict != Allow {
		t.Fatal("r1")
	}
	charge := r1.Charge()
	at := base + 200*ms
	admitted := 0
	for i := 0; i < 2; i++ {
		if g.Admit(header("k", "a"), store, at).Verdict == Allow {
			admitted++
		}
	}
	g.GiveBack(store, charge, at) // r1 rejected by the global limit: not admitted
	if g.Admit(header("k", "a"), store, at).Verdict == Allow {
		admitted++
	}
	if admitted > 2 {
		t.Fatalf("%d requests admitted at one instant by a bucket of capacity 2 (r1 was given back)", admitted)
	}
}
