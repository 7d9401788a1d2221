package bench

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// BenchmarkWorkers runs 1, 2 and 4 worker VMs of one host, one goroutine each, against one shared
// store, as Envoy's worker threads do: on distinct keys (each worker its own 1,024 keys) and on one
// hot key that every worker updates. ns/op is wall time per request over all workers, req/s the
// throughput, retries/op the compare-and-swap retries per request (sets refused with CasMismatch
// because another worker wrote the key in between). The machine's core count bounds the scaling:
// with 2 cores, 4 workers share them.
func BenchmarkWorkers(b *testing.B) {
	for _, keyMode := range []string{"distinct", "hot"} {
		for _, workers := range []int{1, 2, 4} {
			b.Run(keyMode+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				clock := host.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), monotonicStart)
				shared := host.NewSharedData()
				seedSecret(shared)
				opts := hostOptions(admitConfig)
				opts.Clock, opts.CompilationCache, opts.SharedData = clock, cache, shared
				h, err := host.New(context.Background(), tollgateModule(b), opts)
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close(context.Background())
				rigs := make([]*rig, workers)
				keyOf := make([]func(int) string, workers)
				for w := range rigs {
					vm, err := h.NewVM(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					rigs[w] = &rig{host: h, vm: vm, clock: clock, req: newRequest(), shared: h.SharedData()}
					if keyMode == "hot" {
						keyOf[w] = func(int) string { return "hot" }
						rigs[w].expect(b, "hot", 200)
						continue
					}
					ks := keys("worker-"+strconv.Itoa(w), knownKeys)
					for _, k := range ks {
						rigs[w].expect(b, k, 200)
					}
					keyOf[w] = func(i int) string { return ks[i%knownKeys] }
				}
				mismatches := h.SharedData().CASMismatches()
				var wg sync.WaitGroup
				start := make(chan struct{})
				for w := range rigs {
					n := b.N / workers
					if w < b.N%workers {
						n++
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for i := 0; i < n; i++ {
							if status := rigs[w].do(b, keyOf[w](i)); status != 200 {
								b.Errorf("status %d", status)
								return
							}
						}
					}()
				}
				b.ReportAllocs()
				b.ResetTimer()
				close(start)
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
				b.ReportMetric(float64(h.SharedData().CASMismatches()-mismatches)/float64(b.N), "retries/op")
			})
		}
	}
}
