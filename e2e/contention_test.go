package e2e

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// hotConfig is one hot key whose bucket never runs dry during the test, so every request writes
// the same shared-data value: the worst case for compare-and-swap.
const hotConfig = `{"rules": [{"name": "hot", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "1s"}]}],
  "rate_limit_headers": "x-ratelimit"}`

// The retry rate on one hot key with 2, 4 and 8 workers, measured from the host's count of CAS
// mismatches: each mismatch is one request decided again. However the workers interleave, every
// request is admitted and charged exactly once, no request runs out of retries, and the bucket
// ends exactly `requests` tokens lower.
func TestHotKeyCASRetryRate(t *testing.T) {
	t.Parallel()
	perWorker := 400
	if os.Getenv("TOLLGATE_SOAK") == "1" {
		perWorker = 25_000
	}
	for _, workers := range []int{2, 4, 8} {
		g := newRigWith(t, host.Envoy133, hotConfig, workers, rigOptions{})
		before := g.host.SharedData().Stats()
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]string, workers)
		for w, vm := range g.vms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < perWorker; i++ {
					resp, err := vm.Do(httpReq("GET", "/", peer, "x-api-key", "hot"), okUpstream)
					if err != nil || resp.Status != 200 {
						errs[w] = "request " + strconv.Itoa(i) + ": " + statusOrErr(resp, err)
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, e := range errs {
			if e != "" {
				t.Fatalf("%d workers: %s\nlogs:\n%s", workers, e, g.logText())
			}
		}
		stats := g.host.SharedData().Stats()
		requests := int64(workers * perWorker)
		mismatches := stats.Mismatches - before.Mismatches
		sets := stats.Sets - before.Sets
		// One more request reads what is left: exactly capacity - requests - 1.
		last := g.send(g.vms[0], httpReq("GET", "/", peer, "x-api-key", "hot"), nil)
		if want := strconv.FormatInt(1_000_000_000-requests-1, 10); last.Header("x-ratelimit-remaining") != want {
			t.Errorf("%d workers: %s tokens left, want %s: a request was charged twice or not at all",
				workers, last.Header("x-ratelimit-remaining"), want)
		}
		// One write per request: the key's first request creates its bucket with its row.
		if sets != requests {
			t.Errorf("%d workers: %d successful writes for %d requests of a new key", workers, sets, requests)
		}
		if v := g.counter("tollgate.rule.hot.admitted"); v != requests+1 {
			t.Errorf("%d workers: admitted counter %d, want %d", workers, v, requests+1)
		}
		if v := g.counter("tollgate.internal_errors"); v != 0 {
			t.Errorf("%d workers: %d requests ran out of retries", workers, v)
		}
		t.Logf("%d workers, %d requests on one key: %d CAS mismatches, retry rate %.2f%% (%.4f retries per request)",
			workers, requests, mismatches, 100*float64(mismatches)/float64(requests), float64(mismatches)/float64(requests))
	}
}

func statusOrErr(resp *host.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return "status " + strconv.Itoa(resp.Status) + ": " + string(resp.Body)
}

// When every write loses the compare-and-swap, the module gives up after a bounded number of
// attempts (admission.MaxAttempts, 16), applies failure_mode, counts each request in
// tollgate.internal_errors and logs the error once; when the contention ends it decides again.
func TestCASRetriesRunOutFailureMode(t *testing.T) {
	t.Parallel()
	const maxAttempts = 16
	for _, c := range []struct {
		mode   string
		status int
	}{{"allow", 200}, {"deny", 503}} {
		t.Run(c.mode, func(t *testing.T) {
			config := `{"failure_mode": "` + c.mode + `", "rules": [{"name": "r", "key": [{"header": "x-api-key"}],
			  "limits": [{"capacity": 5, "refill_tokens": 1, "refill_interval": "1s"}]}]}`
			g := newRigWith(t, host.Envoy133, config, 1, rigOptions{})
			store := g.host.SharedData()
			store.SetFault(func(op, key string) wire.Status {
				if op == "set" && strings.HasPrefix(key, rowPrefix) {
					return wire.StatusCasMismatch
				}
				return wire.StatusOK
			})
			before := store.Stats()
			const requests = 6
			for i := 0; i < requests; i++ {
				resp := g.send(g.vms[0], httpReq("GET", "/", peer, "x-api-key", "alice"), nil)
				if resp.Status != c.status {
					t.Fatalf("request %d: status %d, want %d (failure_mode %s)", i, resp.Status, c.status, c.mode)
				}
				if c.mode == "deny" && (!resp.LocalReply || !strings.Contains(string(resp.Body), "rate limiter failed")) {
					t.Fatalf("request %d: %+v, want the module's 503", i, resp)
				}
			}
			after := store.Stats()
			if writes := after.Faults - before.Faults; writes != requests*maxAttempts {
				t.Errorf("%d writes refused for %d requests, want %d: retries must stop at %d attempts", writes, requests, requests*maxAttempts, maxAttempts)
			}
			if v := g.counter("tollgate.internal_errors"); v != requests {
				t.Errorf("tollgate.internal_errors = %d, want %d", v, requests)
			}
			if n := g.countLogs("stayed contended for 16 attempts"); n != 1 {
				t.Errorf("%d log lines for the same error, want 1:\n%s", n, g.logText())
			}
			if !strings.Contains(g.lastLog("tollgate: shared data stayed contended"), "(failure_mode "+c.mode+")") {
				t.Errorf("the log line must name the failure mode:\n%s", g.logText())
			}
			store.SetFault(nil)
			for i := 0; i < 5; i++ {
				if resp := g.send(g.vms[0], httpReq("GET", "/", peer, "x-api-key", "alice"), nil); resp.Status != 200 {
					t.Fatalf("after the contention, request %d: status %d; the failed attempts must not have charged the bucket", i, resp.Status)
				}
			}
			if resp := g.send(g.vms[0], httpReq("GET", "/", peer, "x-api-key", "alice"), nil); resp.Status != 429 {
				t.Fatalf("the sixth request: status %d, want 429", resp.Status)
			}
			if v := g.counter("tollgate.internal_errors"); v != requests {
				t.Errorf("tollgate.internal_errors = %d after recovery, want %d", v, requests)
			}
		})
	}
}

// BenchmarkHotKeyContention: requests per second on one hot key with 1, 2, 4 and 8 worker VMs,
// and the CAS retries each request cost (host SharedData.Stats mismatches per request).
func BenchmarkHotKeyContention(b *testing.B) {
	for _, workers := range []int{1, 2, 4, 8} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			g := newRigWith(b, host.Envoy133, hotConfig, workers, rigOptions{})
			before := g.host.SharedData().Stats().Mismatches
			b.ResetTimer()
			var wg sync.WaitGroup
			for w, vm := range g.vms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += workers {
						if _, err := vm.Do(httpReq("GET", "/", peer, "x-api-key", "hot"), okUpstream); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(g.host.SharedData().Stats().Mismatches-before)/float64(b.N), "retries/op")
		})
	}
}
