package e2e

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// The key table's figures through the real module, with several worker VMs and seeded secrets:
// how many keys are not admitted exactly their limit at ordinary load, what a flood of new keys
// leaves to the established ones, how many shared-data entries there are, and what a request
// costs in host calls. Nothing refills during a test (one token per hour, one clock instant), so
// a key with a bucket of its own is admitted exactly its capacity, whatever the order.

// keyTableRig runs one rule keyed by x-api-key with the given capacity and table size.
func keyTableRig(t *testing.T, maxKeys int, capacity int64, workers int, secret uint64) *rig {
	config := `{"key_table": {"max_keys": ` + strconv.Itoa(maxKeys) + `},
	  "rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	    "limits": [{"capacity": ` + strconv.FormatInt(capacity, 10) + `, "refill_tokens": 1, "refill_interval": "1h"}]}]}`
	return newRigWith(t, host.Envoy139, config, workers, rigOptions{secret: [2]uint64{secret, 0x7ab1e}})
}

func apiKeyReq(key string) host.Request { return httpReq("GET", "/", peer, "x-api-key", key) }

// sendAll sends each key's requests in rounds (every key once per round), the VMs taking turns,
// and returns how many of each key's requests were admitted.
func sendAll(t *testing.T, g *rig, keys []string, rounds int) []int {
	t.Helper()
	admitted := make([]int, len(keys))
	for r := 0; r < rounds; r++ {
		for k, key := range keys {
			switch resp := g.send(g.vms[(k+r)%len(g.vms)], apiKeyReq(key), nil); resp.Status {
			case 200:
				admitted[k]++
			case 429:
			default:
				t.Fatalf("%s: status %d: %s", key, resp.Status, resp.Body)
			}
		}
	}
	return admitted
}

// callCost is what a run of requests cost: host calls (every import, the Go runtime's WASI calls
// included) and the shared-data calls among them, per request.
type callCost struct{ hostCalls, gets, sets float64 }

func measure(g *rig, requests int, run func()) callCost {
	calls := func() (n int64) {
		for _, vm := range g.vms {
			n += vm.Stats().HostCalls
		}
		return n
	}
	before, stats := calls(), g.host.SharedData().Stats()
	run()
	after := g.host.SharedData().Stats()
	per := func(n int64) float64 { return float64(n) / float64(requests) }
	return callCost{per(calls() - before), per(after.Gets - stats.Gets), per(after.Sets - stats.Sets)}
}

func (c callCost) String() string {
	return strconv.FormatFloat(c.hostCalls, 'f', 2, 64) + " host calls (" + strconv.FormatFloat(c.gets, 'f', 2, 64) +
		" shared-data reads, " + strconv.FormatFloat(c.sets, 'f', 2, 64) + " writes) per request"
}

func keyNames(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	return keys
}

// entriesWithin checks that shared data holds at most the table's rows, the secret and the
// rule's overflow bucket.
func entriesWithin(t *testing.T, g *rig, maxKeys int) int {
	t.Helper()
	n := g.host.SharedData().Keys("tollgate")
	if rows := rowsOf(maxKeys); n > rows+2 {
		t.Errorf("%d shared-data entries, over %d rows, the secret and the overflow bucket", n, rows)
	}
	return n
}

// liveSlots counts the key table's slots holding a bucket.
func liveSlots(g *rig) int {
	live := 0
	for _, value := range g.slots() {
		if isLive(value) {
			live++
		}
	}
	return live
}

// At ordinary load every key keeps a bucket of its own: 2% of the table in use leaves at most
// 0.1% of keys without exactly their limit, 10% at most 1%, and no key ever gets more.
func TestOrdinaryLoadKeepsKeysExact(t *testing.T) {
	const (
		maxKeys  = 100_000
		capacity = 5
		requests = 8 // per key
	)
	for _, c := range []struct {
		active int
		atMost float64 // share of keys not admitted exactly capacity
		secret uint64
	}{
		{2_000, 0.001, 1}, {2_000, 0.001, 2}, {2_000, 0.001, 3},
		{10_000, 0.01, 1},
	} {
		g := keyTableRig(t, maxKeys, capacity, 2, c.secret)
		keys := keyNames("active-", c.active)
		var admitted []int
		cost := measure(g, c.active*requests, func() { admitted = sendAll(t, g, keys, requests) })
		notExact := 0
		for k, n := range admitted {
			if n > capacity {
				t.Fatalf("%d active keys: %s admitted %d times, capacity %d", c.active, keys[k], n, capacity)
			}
			if n != capacity {
				notExact++
			}
		}
		share := float64(notExact) / float64(c.active)
		entries := entriesWithin(t, g, maxKeys)
		t.Logf("%d active keys of %d slots (secret %d): %d not admitted exactly %d (%.3f%%), none over; %d shared-data entries, key_table_full %d; %v",
			c.active, maxKeys, c.secret, notExact, capacity, 100*share, entries, g.counter("tollgate.key_table_full"), cost)
		if share > c.atMost {
			t.Errorf("%d active keys: %.3f%% of keys not admitted exactly their limit, want at most %.1f%%", c.active, 100*share, 100*c.atMost)
		}
	}
}

// A flood of 1.5 × max_keys new keys, once each, takes every free slot and then throttles
// itself in the overflow bucket: the 500 established keys (capacity 10, 5 used) keep exactly
// their remaining 5.
func TestFloodSparesEstablishedKeys(t *testing.T) {
	const (
		maxKeys     = 100_000
		established = 500
		capacity    = 10
	)
	g := keyTableRig(t, maxKeys, capacity, 4, 42)
	keys := keyNames("established-", established)
	for k, n := range sendAll(t, g, keys, 5) {
		if n != 5 {
			t.Fatalf("%s admitted %d of its first 5 requests", keys[k], n)
		}
	}
	flood := keyNames("flood-", maxKeys*3/2)
	floodAdmitted := 0
	cost := measure(g, len(flood), func() {
		for _, n := range sendAll(t, g, flood, 1) {
			floodAdmitted += n
		}
	})
	exact := 0
	for k, n := range sendAll(t, g, keys, capacity) {
		if n > 5 {
			t.Fatalf("%s admitted %d more times after the flood, it had 5 tokens left", keys[k], n)
		}
		if n == 5 {
			exact++
		}
	}
	entries := entriesWithin(t, g, maxKeys)
	// Every flood key with a bucket of its own was admitted once; the overflow bucket admitted
	// the rest. A flood key that found a free slot once the overflow bucket's drawers were all
	// marked started from its state and was rejected, leaving no bucket.
	inSlots := liveSlots(g) - established
	t.Logf("flood of %d new keys over a table of %d: %d flood requests admitted, %d with a bucket of their own and %d from the overflow bucket; "+
		"key_table_full %d; %d of %d established keys got exactly their remaining 5, none more; %d shared-data entries; flood: %v",
		len(flood), maxKeys, floodAdmitted, inSlots, floodAdmitted-inSlots, g.counter("tollgate.key_table_full"), exact, established, entries, cost)
	if floodAdmitted < inSlots || floodAdmitted-inSlots > capacity {
		t.Errorf("%d flood requests admitted, %d flood keys have buckets of their own: the overflow bucket admitted more than its capacity %d, or a bucket admitted nothing",
			floodAdmitted, inSlots, capacity)
	}
	if exact*100 < established*99 {
		t.Errorf("%d of %d established keys got exactly their remaining tokens, want at least 99%%", exact, established)
	}
}

// A request of a known key reads its row and writes it (TestCrossingTrace pins every crossing);
// so does a new key, whether its row was never written (it creates the row with it) or has a
// free slot. A key whose row is full reads it and the overflow bucket, writes that, and writes
// its row again with the key's marks (a bucket of its own created meanwhile would not have seen
// the draw, and then fails its write, or this one fails). Only a new bucket whose row carries
// its key's marks reads the overflow bucket too, where it would start from.
func TestSharedDataCallsPerRequest(t *testing.T) {
	g := keyTableRig(t, 16, 3, 1, 9)
	vm := g.vms[0]
	for _, c := range []struct {
		name       string
		key        string
		gets, sets float64
	}{
		{"new key, row never written", "k0", 1, 1},
		{"known key", "k0", 1, 1},
	} {
		cost := measure(g, 1, func() { g.send(vm, apiKeyReq(c.key), nil) })
		if cost.gets != c.gets || cost.sets != c.sets {
			t.Errorf("%s: %v, want %v reads and %v writes", c.name, cost, c.gets, c.sets)
		}
		t.Logf("%s: %v", c.name, cost)
	}
	// New keys until one finds its row full: each costs one read and one write, whether it
	// creates its row or finds a slot in one written before; both happen on the way.
	fresh, placed := 0, 0
	drawer := ""
	for i := 1; drawer == ""; i++ {
		key := "k" + strconv.Itoa(i)
		full, rows := g.counter("tollgate.key_table_full"), len(g.rows())
		cost := measure(g, 1, func() { g.send(vm, apiKeyReq(key), nil) })
		if g.counter("tollgate.key_table_full") == full {
			if cost.gets != 1 || cost.sets != 1 {
				t.Fatalf("new key %s: %v, want 1 read and 1 write", key, cost)
			}
			if len(g.rows()) > rows {
				fresh++
			} else {
				placed++
			}
			continue
		}
		if cost.gets != 2 || cost.sets != 2 {
			t.Errorf("full row: %v, want 2 reads and 2 writes", cost)
		}
		t.Logf("full row: %v, after %d new keys created with their row and %d placed in a row written before", cost, fresh, placed)
		if fresh == 0 || placed == 0 {
			t.Errorf("%d new keys created with their row and %d placed in one: the table filled without both", fresh, placed)
		}
		drawer = key
	}
	// Two hours on every bucket is idle again (3 tokens, one an hour, one spent), so every slot is
	// free: the key that drew reads the overflow bucket before its bucket is written into its
	// row, which carries the key's marks (8 bytes after its slots); a key that never drew does
	// not, in that row or another.
	g.clock.Advance(2 * time.Hour)
	cost := measure(g, 1, func() { g.send(vm, apiKeyReq(drawer), nil) })
	if cost.gets != 2 || cost.sets != 1 {
		t.Errorf("the key that drew, an idle slot in its row: %v, want 2 reads and 1 write", cost)
	}
	t.Logf("the key that drew, an idle slot in its row: %v", cost)
	marked := ""
	for k, v := range g.rows() {
		if len(v)%slotSize == 8 {
			marked = k
		}
	}
	if marked == "" {
		t.Fatal("no row carries the marks of the key that drew")
	}
	for i := 0; ; i++ {
		before := string(g.rows()[marked])
		cost := measure(g, 1, func() { g.send(vm, apiKeyReq("never-drew-"+strconv.Itoa(i)), nil) })
		if cost.gets != 1 || cost.sets != 1 {
			t.Fatalf("new key never-drew-%d, an idle slot in its row: %v, want 1 read and 1 write", i, cost)
		}
		if string(g.rows()[marked]) != before { // it took a slot of the marked row
			t.Logf("a new key in the row the key that drew marked: %v", cost)
			break
		}
	}
}

// Placement under real parallelism: 8 worker VMs in goroutines of their own race on 40 keys
// over a table of 16 slots (two rows), so buckets are created, found idle and taken over, and
// rows raced for, all the time. The clock moves between rounds, never during one. Whatever the
// interleaving: after every round no owner has two live buckets, and no key was admitted more
// than its token bucket allows over any run of rounds (RFC 1363: capacity + rate × elapsed).
func TestPlacementUnderParallelWorkers(t *testing.T) {
	const (
		workers  = 8
		keys     = 40
		rounds   = 60
		capacity = 2
		every    = 20 * time.Millisecond // one token
	)
	config := `{"key_table": {"max_keys": 16, "when_full": "reject"},
	  "rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	    "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "20ms"}]}]}`
	g := newRigWith(t, host.Envoy139, config, workers, rigOptions{secret: [2]uint64{5, 8}})
	rng := rand.New(rand.NewPCG(3, 4))
	admitted := make([][]int, keys) // per key, per round
	instants := make([]int64, rounds)
	for k := range admitted {
		admitted[k] = make([]int, rounds)
	}
	for r := 0; r < rounds; r++ {
		g.clock.Advance(time.Duration(rng.Int64N(int64(50 * time.Millisecond))))
		instants[r] = g.clock.Monotonic()
		plans := make([][]int, workers)
		for w := range plans {
			for i := 0; i < 8; i++ {
				plans[w] = append(plans[w], rng.IntN(keys))
			}
		}
		got := make([][]int, workers)
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for w := range plans {
			got[w] = make([]int, keys)
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for _, k := range plans[w] {
					resp, err := g.vms[w].Do(apiKeyReq("key-"+strconv.Itoa(k)), okUpstream)
					switch {
					case err != nil:
						errs[w] = err
						return
					case resp.Status == 200:
						got[w][k]++
					case resp.Status != 429:
						errs[w] = fmt.Errorf("status %d: %s", resp.Status, resp.Body)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v\n%s", r, err, g.logText())
			}
		}
		for w := range got {
			for k, n := range got[w] {
				admitted[k][r] += n
			}
		}
		owners := map[uint64]string{}
		for slot, value := range g.slots() {
			if !isLive(value) {
				continue
			}
			if other, dup := owners[slotOwner(value)]; dup {
				t.Fatalf("round %d: owner %x has live buckets in %s and %s", r, slotOwner(value), other, slot)
			}
			owners[slotOwner(value)] = slot
		}
	}
	total := 0
	for k := range admitted {
		for a := 0; a < rounds; a++ {
			n := 0
			for b := a; b < rounds; b++ {
				n += admitted[k][b]
				if bound := int64(capacity) + (instants[b]-instants[a])/int64(every); int64(n) > bound {
					t.Fatalf("key %d: %d admitted from round %d to %d (%v), the bucket allows %d",
						k, n, a, b, time.Duration(instants[b]-instants[a]), bound)
				}
			}
			total += admitted[k][a]
		}
	}
	if v := g.counter("tollgate.internal_errors"); v != 0 {
		t.Errorf("%d requests ran out of retries", v)
	}
	t.Logf("%d requests, %d admitted; key_table_full %d; the workers caused %d CAS mismatches",
		workers*8*rounds, total, g.counter("tollgate.key_table_full"), g.host.SharedData().Stats().Mismatches)
}
