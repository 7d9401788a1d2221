package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// The poll_oneoff soak (make soak; TOLLGATE_SOAK=1). Envoy 1.33 to 1.38 answer WASI poll_oneoff
// with ENOSYS, and Go's runtime throws on that, trapping the VM, if it ever polls: it does so
// at the end of a garbage collection once its netpoller is initialised (a timer does that).
// This sends at least a million requests through the product module in the host's Envoy
// 1.33–1.38 profile, over thousands of keys, enough for a great many collections, and
// reports whether the VMs survive, how often poll_oneoff was called, and the linear memory before
// and after. The same load through the fault build (internal/plugin/faults_on.go) reads the runtime's
// collection count, which the product module does not expose.

const soakRequests = 1_000_000

const soakConfig = `{"rules": [
  {"name": "api-key", "match": {"path": {"prefix": "/api/"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 20, "refill_tokens": 10, "refill_interval": "1s"},
              {"algorithm": "fixed_window", "capacity": 1000, "window": "1m"}]},
  {"name": "per-ip", "key": [{"client_ip": {}}],
   "limits": [{"algorithm": "sliding_window", "capacity": 1000, "window": "10s"}]},
  {"name": "login", "match": {"path": {"exact": "/login"}, "methods": ["POST"]}, "key": [{"header": "x-user"}],
   "limits": [{"capacity": 5, "refill_tokens": 5, "refill_interval": "1m"}]}],
  "client_ip": {"xff_num_trusted_hops": 1},
  "rate_limit_headers": "draft"}`

type soakResult struct {
	requests              int64
	statuses              map[int]int64
	elapsed               time.Duration
	pagesBefore, pagesMid []uint32
	pagesAfter            []uint32
	pollOneoff            []int64
	gcBefore, gcAfter     []int64
	sharedKeys            int
}

func TestSoakPollOneoff(t *testing.T) {
	if os.Getenv("TOLLGATE_SOAK") != "1" {
		t.Skip("the soak runs with make soak (TOLLGATE_SOAK=1)")
	}
	for _, c := range []struct {
		name string
		wasm []byte
	}{{"product module", module(t)}, {"fault build, counting collections", faultModule(t)}} {
		t.Run(c.name, func(t *testing.T) {
			r := runSoak(t, c.wasm, c.name != "product module")
			t.Logf("%s, %v profile: %d requests in %v (%.0f/s) on 2 worker VMs; statuses %v",
				c.name, host.Envoy133, r.requests, r.elapsed.Round(time.Millisecond), float64(r.requests)/r.elapsed.Seconds(), r.statuses)
			t.Logf("  poll_oneoff calls per VM: %v; linear memory (64 KiB pages) per VM: %v at start, %v after 10%%, %v at the end; %d shared-data keys",
				r.pollOneoff, r.pagesBefore, r.pagesMid, r.pagesAfter, r.sharedKeys)
			if r.gcAfter != nil {
				t.Logf("  garbage collections per VM: %v before, %v after", r.gcBefore, r.gcAfter)
			}
		})
	}
}

func runSoak(t *testing.T, wasm []byte, countGC bool) soakResult {
	g := newRigWith(t, host.Envoy133, soakConfig, 2, rigOptions{wasm: wasm})
	res := soakResult{statuses: map[int]int64{}}
	gcCount := func(vm *host.VM) int64 {
		g.send(vm, httpReq("GET", "/healthz", peer, "x-tollgate-fault", "gcstats"), nil)
		line := g.lastLog("tollgate_faults: gc ")
		n, err := strconv.ParseInt(strings.TrimPrefix(line, "tollgate_faults: gc "), 10, 64)
		if err != nil {
			t.Fatalf("no collection count in %q", line)
		}
		return n
	}
	for _, vm := range g.vms {
		res.pagesBefore = append(res.pagesBefore, vm.Stats().MemoryPages)
		if countGC {
			res.gcBefore = append(res.gcBefore, gcCount(vm))
		}
	}
	perWorker := soakRequests / len(g.vms)
	statuses := make([]map[int]int64, len(g.vms))
	mid := make([]uint32, len(g.vms))
	errs := make([]error, len(g.vms))
	began := time.Now()
	var wg sync.WaitGroup
	for w, vm := range g.vms {
		statuses[w] = map[int]int64{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for i := 0; i < perWorker; i++ {
				if i%64 == 0 {
					g.clock.Advance(time.Millisecond)
				}
				if i == perWorker/10 {
					mid[w] = vm.Stats().MemoryPages
				}
				// About 11,000 buckets over the run, well within the default 100,000 slots: the
				// requests are decided, not turned away by a full key table.
				ip := fmt.Sprintf("10.0.%d.%d", rng.IntN(8), rng.IntN(250))
				var req host.Request
				switch rng.IntN(4) {
				case 0, 1:
					req = httpReq("GET", "/api/items?page="+strconv.Itoa(i), peer, "x-api-key", "key-"+strconv.Itoa(rng.IntN(4000)), "x-forwarded-for", ip)
				case 2:
					req = httpReq("POST", "/login", peer, "x-user", "user-"+strconv.Itoa(rng.IntN(1000)), "x-forwarded-for", ip)
				default:
					req = httpReq("GET", "/static/app.js", peer, "x-forwarded-for", ip+", 192.0.2.1")
				}
				resp, err := vm.Do(req, okUpstream)
				if err != nil {
					errs[w] = fmt.Errorf("request %d: %w", i, err)
					return
				}
				statuses[w][resp.Status]++
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(began)
	for w, err := range errs {
		if err != nil {
			t.Fatalf("VM %d after %d requests: %v\nlogs:\n%s", w+1, statuses[w], err, g.logText())
		}
	}
	for w, vm := range g.vms {
		for s, n := range statuses[w] {
			res.statuses[s] += n
			res.requests += n
		}
		if err := vm.Err(); err != nil {
			t.Fatalf("VM %d failed: %v", vm.ID(), err)
		}
		st := vm.Stats()
		res.pagesAfter = append(res.pagesAfter, st.MemoryPages)
		res.pollOneoff = append(res.pollOneoff, st.PollOneoff)
		if countGC {
			res.gcAfter = append(res.gcAfter, gcCount(vm))
		}
	}
	res.pagesMid = mid
	res.sharedKeys = g.host.SharedData().Keys("tollgate")
	if v := g.counter("tollgate.internal_errors"); v != 0 {
		t.Errorf("tollgate.internal_errors = %d", v)
	}
	return res
}
