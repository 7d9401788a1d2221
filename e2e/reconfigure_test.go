package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// Configuration pushes. Envoy re-runs proxy_on_configure when a changed plugin configuration
// arrives: on every existing VM it creates a new root context, with a new id, for the new
// configuration, after a canary VM accepted it (cpp-host createWasm → canary, WasmBase::start;
// host.Host.Reconfigure does the same). The module's buckets live in shared data, so they
// survive the push: a rule whose name and limits are unchanged keeps its state, a changed limit
// carries its state over (tokens clamped to the new capacity), and the slots of a removed rule
// are taken over by other keys once their buckets are idle.

func (g *rig) reconfigure(config string) {
	g.t.Helper()
	roots := make([]uint32, len(g.vms))
	for i, vm := range g.vms {
		roots[i] = vm.RootID()
	}
	if err := g.host.Reconfigure(context.Background(), []byte(config)); err != nil {
		g.t.Fatalf("reconfigure: %v\nlogs:\n%s", err, g.logText())
	}
	for i, vm := range g.vms {
		if vm.RootID() == roots[i] {
			g.t.Fatalf("VM %d kept root context %d: a new configuration gets a new one", vm.ID(), roots[i])
		}
	}
}

// statuses sends n requests for a rule and key, alternating VMs, and returns how many were
// admitted before the first 429 (and fails if any is admitted after it).
func (g *rig) admittedRun(rule, key string, n int) int {
	g.t.Helper()
	admitted, limited := 0, false
	for i := 0; i < n; i++ {
		resp := g.send(g.vms[i%len(g.vms)], httpReq("GET", "/", peer, "x-rule", rule, "x-key", key), nil)
		switch {
		case resp.Status == 200 && !limited:
			admitted++
		case resp.Status == 429:
			limited = true
		default:
			g.t.Fatalf("%s/%s request %d: status %d after a 429: %s", rule, key, i, resp.Status, resp.Body)
		}
	}
	return admitted
}

func ruleJSON(name, limits string) string {
	return `{"name": "` + name + `", "match": {"headers": [{"name": "x-rule", "exact": "` + name + `"}]},
	  "key": [{"header": "x-key"}], "limits": [` + limits + `]}`
}

func TestReconfigureCarriesBucketsOver(t *testing.T) {
	t.Parallel()
	const (
		tb10 = `{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}`
		tb5  = `{"capacity": 5, "refill_tokens": 1, "refill_interval": "1s"}`
		tb20 = `{"capacity": 20, "refill_tokens": 1, "refill_interval": "1s"}`
		fw10 = `{"algorithm": "fixed_window", "capacity": 10, "window": "1m"}`
		fw5  = `{"algorithm": "fixed_window", "capacity": 5, "window": "1m"}`
		sw10 = `{"algorithm": "sliding_window", "capacity": 10, "window": "1m"}`
	)
	before := `{"rules": [` + strings.Join([]string{
		ruleJSON("same", tb10), ruleJSON("shrink", tb10), ruleJSON("grow", tb10),
		ruleJSON("window-shrink", fw10), ruleJSON("other-algorithm", tb10), ruleJSON("gone", tb10),
	}, ", ") + `]}`
	after := `{"rules": [` + strings.Join([]string{
		ruleJSON("added", tb10), ruleJSON("same", tb10), ruleJSON("shrink", tb5), ruleJSON("grow", tb20),
		ruleJSON("window-shrink", fw5), ruleJSON("other-algorithm", sw10),
	}, ", ") + `]}`
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRigWith(t, p, before, 2, rigOptions{})
			g.at(time.Hour)
			for _, rule := range []string{"same", "shrink", "grow", "window-shrink", "other-algorithm", "gone"} {
				g.admittedRun(rule, "alice", 3) // 7 of 10 left
			}
			admittedBefore := g.counter("tollgate.rule.same.admitted")
			g.reconfigure(after)
			for _, c := range []struct {
				rule string
				want int
				why  string
			}{
				{"same", 7, "an unchanged rule keeps its bucket"},
				{"shrink", 5, "a smaller capacity clamps the tokens left"},
				{"grow", 7, "a larger capacity keeps the tokens left (no free refill)"},
				{"window-shrink", 2, "a smaller window capacity keeps what was counted"},
				{"other-algorithm", 10, "a limit that changed algorithm starts afresh"},
				{"added", 10, "a new rule starts with full buckets"},
			} {
				if got := g.admittedRun(c.rule, "alice", 12); got != c.want {
					t.Errorf("%s: %d admitted, want %d: %s", c.rule, got, c.want, c.why)
				}
			}
			// The removed rule no longer applies.
			if s := g.send(g.vms[0], httpReq("GET", "/", peer, "x-rule", "gone", "x-key", "alice"), nil).Status; s != 200 {
				t.Errorf("a request for the removed rule: %d", s)
			}
			// Counters continue across the push: the new root context binds the same stats.
			if got := g.counter("tollgate.rule.same.admitted"); got != admittedBefore+7 {
				t.Errorf("tollgate.rule.same.admitted = %d, want %d", got, admittedBefore+7)
			}
			// Refill continues at the new rate from where it was.
			g.at(time.Hour + 2*time.Second)
			if got := g.admittedRun("shrink", "alice", 5); got != 2 {
				t.Errorf("shrink, 2 s later: %d admitted, want 2", got)
			}
		})
	}
}

// The slots of a removed rule are reclaimed: while its buckets are in use nobody takes them
// (that would hand their tokens out); once they are idle, other keys take them over.
func TestReconfigureReclaimsSlotsOfRemovedRules(t *testing.T) {
	t.Parallel()
	slow := `{"capacity": 1, "refill_tokens": 1, "refill_interval": "10s"}`
	table := `"key_table": {"max_keys": 16, "when_full": "reject"}`
	g := newRigWith(t, host.Envoy133, `{"rules": [`+ruleJSON("gone", slow)+`, `+ruleJSON("stay", slow)+`], `+table+`}`,
		2, rigOptions{secret: [2]uint64{7, 11}})
	g.at(time.Hour)
	for i := 0; i < 6; i++ {
		g.admittedRun("gone", "g"+itoa(i), 1)
	}
	goneOwners := map[uint64]bool{}
	goneSlots := map[string]uint64{}
	for k, v := range g.slots() {
		goneOwners[slotOwner(v)] = true
		goneSlots[k] = slotOwner(v)
	}
	if len(goneSlots) < 3 {
		t.Fatalf("the removed rule holds only %d slots; the test needs more", len(goneSlots))
	}
	g.reconfigure(`{"rules": [` + ruleJSON("stay", slow) + `], ` + table + `}`)

	flood := func() {
		for i := 0; i < 200; i++ {
			g.send(g.vms[i%2], httpReq("GET", "/", peer, "x-rule", "stay", "x-key", "s"+itoa(i)), nil)
		}
	}
	// Busy: the removed rule's buckets were used a moment ago.
	flood()
	for k, owner := range goneSlots {
		if got := slotOwner(g.slots()[k]); got != owner {
			t.Fatalf("slot %s was taken while the removed rule's bucket in it was still in use", k)
		}
	}
	if g.counter("tollgate.key_table_full") == 0 {
		t.Fatal("no request found its slot busy")
	}
	// Idle: ten seconds later every bucket of the removed rule is full again.
	g.at(time.Hour + 10*time.Second)
	flood()
	slots := g.slots()
	for k := range goneSlots {
		if goneOwners[slotOwner(slots[k])] {
			t.Errorf("slot %s still holds the removed rule's bucket after it became idle", k)
		}
	}
	if n := g.host.SharedData().Keys("tollgate"); n > rowsOf(16)+1 {
		t.Errorf("%d shared-data keys, want at most the 2 rows of 16 slots and the secret", n)
	}
}

// A configuration the module rejects is refused by the canary; the workers keep serving with the
// configuration they have, with their buckets.
func TestReconfigureRejectedKeepsServing(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, `{"rules": [`+ruleJSON("r", `{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}`)+`]}`, 2, rigOptions{})
	g.admittedRun("r", "alice", 2)
	root := g.vms[0].RootID()
	err := g.host.Reconfigure(context.Background(), []byte(`{"rules": [{"name": "r", "limits": []}]}`))
	if !errors.Is(err, host.ErrConfigRejected) {
		t.Fatalf("got %v, want the canary to reject it", err)
	}
	if g.vms[0].RootID() != root {
		t.Fatal("a rejected configuration must not reach the workers")
	}
	if !strings.Contains(g.logText(), "tollgate: invalid configuration: rules[0]") {
		t.Errorf("the canary's log lines name the problem:\n%s", g.logText())
	}
	if got := g.admittedRun("r", "alice", 3); got != 1 {
		t.Errorf("%d admitted after the rejected push, want the 1 token left", got)
	}
}

// Changing key_table.max_keys moves every bucket to another slot (the slot is the owner hash
// modulo max_keys), so each key starts again with a full bucket, as documented: resizing the
// table is a reset of the buckets.
func TestReconfigureMaxKeysStartsBucketsAfresh(t *testing.T) {
	t.Parallel()
	rule := ruleJSON("r", `{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}`)
	g := newRigWith(t, host.Envoy133, `{"rules": [`+rule+`], "key_table": {"max_keys": 1000}}`, 1, rigOptions{secret: [2]uint64{3, 5}})
	g.admittedRun("r", "alice", 4)
	g.reconfigure(`{"rules": [` + rule + `], "key_table": {"max_keys": 1001}}`)
	if got := g.admittedRun("r", "alice", 4); got != 3 {
		t.Fatalf("%d admitted right after the push, want a fresh bucket's 3", got)
	}
}

// After a push, the new configuration's Gate holds the worker's memory of rejected buckets: a
// key found over its limit is rejected again without a read of shared data, by the new
// configuration as by the one it replaced.
func TestReconfigureKeepsRememberingRejections(t *testing.T) {
	t.Parallel()
	config := func(capacity string) string {
		return `{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
		  "limits": [{"capacity": ` + capacity + `, "refill_tokens": 1, "refill_interval": "24h"}]}]}`
	}
	g := newRig(t, host.Envoy139, config("1"), 1)
	vm := g.vms[0]
	alice := [2]string{"x-api-key", "alice"}
	// rejectedReads sends two requests of alice, both to be rejected, and returns how many
	// reads of shared data the second made.
	rejectedReads := func(when string) int64 {
		for i := range 2 {
			before := g.host.SharedData().Stats().Gets
			if status := g.request(vm, alice).Status; status != 429 {
				t.Fatalf("%s, request %d: %d, want 429", when, i, status)
			}
			if i == 1 {
				return g.host.SharedData().Stats().Gets - before
			}
		}
		return -1
	}
	if status := g.request(vm, alice).Status; status != 200 {
		t.Fatalf("first request: %d", status)
	}
	if reads := rejectedReads("before the push"); reads != 0 {
		t.Errorf("before the push, a repeated rejection read shared data %d time(s), want none", reads)
	}
	g.reconfigure(config("1")) // the same limit: alice's bucket is still empty
	if reads := rejectedReads("after the push"); reads != 0 {
		t.Errorf("after the push, a repeated rejection read shared data %d time(s), want none", reads)
	}
}
