package e2e

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// A flood of distinct keys a hundred times the key table's size, as from a client minting a new
// API key per request: the shared data never holds more than the table's slots (plus its secret
// and the overflow bucket), and a well-behaved key that keeps sending at three times its rate is
// admitted exactly its limit the whole time. make test floods a table of 1,000 slots with 100,000
// keys; make soak (TOLLGATE_SOAK=1) a table of 10,000 slots with 1,000,000.
func TestKeyFloodIsBoundedAndSparesWellBehavedKeys(t *testing.T) {
	t.Parallel()
	const (
		steps   = 100
		workers = 4
	)
	maxKeys := 1_000
	if os.Getenv("TOLLGATE_SOAK") == "1" {
		maxKeys = 10_000
	}
	floodPerStep := maxKeys // a hundred times the table over the steps
	// when_full at its default, overflow: flood keys that find no free slot share one overflow
	// bucket and cannot touch the well-behaved key's bucket.
	config := `{"key_table": {"max_keys": ` + strconv.Itoa(maxKeys) + `},
	  "rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	    "limits": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "100ms"}]}]}`
	g := newRig(t, host.Envoy133, config, workers)
	good := httpReq("GET", "/", peer, "x-api-key", "well-behaved")
	admitted := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for step := 0; step < steps; step++ {
		g.at(time.Duration(step) * 100 * time.Millisecond)
		// Three requests per refill interval: one token comes per step after the initial 10.
		for i := 0; i < 3; i++ {
			if resp := g.send(g.vms[i%workers], good, nil); resp.Status == 200 {
				admitted++
			}
		}
		keys := make([]string, floodPerStep)
		for i := range keys {
			keys[i] = strconv.FormatUint(rng.Uint64(), 36)
		}
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(vm *host.VM, part []string) {
				defer wg.Done()
				for _, k := range part {
					resp, err := vm.Do(httpReq("GET", "/", peer, "x-api-key", k), okUpstream)
					if err != nil || (resp.Status != 200 && resp.Status != 429) {
						t.Errorf("flood request: %v %v", resp, err)
						return
					}
				}
			}(g.vms[w], keys[w*floodPerStep/workers:(w+1)*floodPerStep/workers])
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if n := g.host.SharedData().Keys("tollgate"); n > maxKeys+2 {
			t.Fatalf("step %d: shared data holds %d keys, over the bound of %d slots, the secret and the overflow bucket", step, n, maxKeys)
		}
	}
	if want := 10 + steps - 1; admitted != want {
		t.Fatalf("the well-behaved key was admitted %d times over %d steps, want exactly %d (capacity 10 plus one token per step)", admitted, steps, want)
	}
	if g.counter("tollgate.key_table_full") == 0 {
		t.Error("the flood never found the table full: the test did not exercise the bound")
	}
	for _, vm := range g.vms {
		if err := vm.Err(); err != nil {
			t.Fatalf("a VM failed: %v", err)
		}
	}
	t.Logf("shared-data keys %d, key_table_full %d, linear memory %d pages", g.host.SharedData().Keys("tollgate"),
		g.counter("tollgate.key_table_full"), g.vms[0].Stats().MemoryPages)
}

// Hostile request shapes: a 64 KiB key, binary bytes, an empty value, thousands of headers. Each
// is answered, nothing traps, and the table stays bounded.
func TestHostileKeys(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy133, `{"key_table": {"max_keys": 64},
	  "rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	    "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`, 2)
	many := []string{"x-api-key", "many"}
	for i := 0; i < 5000; i++ {
		many = append(many, "x-h-"+strconv.Itoa(i), strings.Repeat("v", 20))
	}
	runPolicy(t, g, []policyStep{
		{name: "64 KiB key: longer than max_key_bytes, limited by its digest", req: httpReq("GET", "/", peer, "x-api-key", strings.Repeat("k", 64<<10)), status: 200},
		{name: "64 KiB key again", req: httpReq("GET", "/", peer, "x-api-key", strings.Repeat("k", 64<<10)), status: 200},
		{name: "64 KiB key, over its limit", req: httpReq("GET", "/", peer, "x-api-key", strings.Repeat("k", 64<<10)), status: 429},
		{name: "binary bytes", req: httpReq("GET", "/", peer, "x-api-key", "\x00\xff\xfe\x01bin"), status: 200},
		{name: "binary bytes again", req: httpReq("GET", "/", peer, "x-api-key", "\x00\xff\xfe\x01bin"), status: 200},
		{name: "binary bytes limited", req: httpReq("GET", "/", peer, "x-api-key", "\x00\xff\xfe\x01bin"), status: 429},
		{name: "empty value: missing", req: httpReq("GET", "/", peer, "x-api-key", ""), status: 401},
		{name: "5000 headers", req: httpReq("GET", "/", peer, many...), status: 200},
	})
	for i := 0; i < 1000; i++ {
		g.send(g.vms[i%2], httpReq("GET", "/", peer, "x-api-key", strings.Repeat("x", i%1000+1)), nil)
	}
	if n := g.host.SharedData().Keys("tollgate"); n > 64+2 {
		t.Fatalf("%d shared-data keys for 64 slots, the secret and the overflow bucket", n)
	}
	for _, vm := range g.vms {
		if err := vm.Err(); err != nil {
			t.Fatalf("a VM failed: %v", err)
		}
	}
}
