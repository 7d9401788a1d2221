package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/gateway"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// httpClients is the load generator's concurrency: closed loop, keep-alive connections.
const httpClients = 8

// BenchmarkHTTP measures requests per second through the gateway of `tollgate serve` (2 worker
// VMs, the admit-all rule, 1,024 known keys) and through the same gateway with the filter
// disabled (gateway.NewPassThrough, `tollgate serve --no-filter`), in the same run: the load
// alternates between the two in blocks. Everything runs on loopback in this process: the demo
// upstream, the gateways and 8 closed-loop clients, so they share the machine's cores and the
// figures are relative. ns/op and req/s are the filtered gateway's; passthrough-req/s the
// baseline's; filter/passthrough the throughput ratio. Every request has a 5 s timeout.
func BenchmarkHTTP(b *testing.B) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "text/plain")
		io.WriteString(w, "ok\n")
	}))
	defer upstream.Close()
	upstreamURL, _ := url.Parse(upstream.URL)

	h, err := host.New(context.Background(), tollgateModule(b), host.Options{
		PluginName: "tollgate", RootID: "tollgate", VMID: "tollgate", PluginConfig: []byte(admitConfig),
		LogLevel: 2, CompilationCache: cache,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	gw, err := gateway.New(context.Background(), h, 2, upstreamURL, nil)
	if err != nil {
		b.Fatal(err)
	}
	filtered := httptest.NewServer(gw)
	defer filtered.Close()
	plain := httptest.NewServer(gateway.NewPassThrough(upstreamURL, nil))
	defer plain.Close()

	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: httpClients, MaxConnsPerHost: httpClients},
	}
	defer client.CloseIdleConnections()
	ks := keys("http", knownKeys)
	// load sends n requests to base from httpClients goroutines and returns how long it took.
	load := func(base string, n, offset int) time.Duration {
		var wg sync.WaitGroup
		began := time.Now()
		for c := 0; c < httpClients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < n; i += httpClients {
					req, _ := http.NewRequest("GET", base+"/api/items", nil)
					req.Header.Set("x-api-key", ks[(offset+i)%knownKeys])
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(began)
	}
	// Warm up both: connections, the keys, the VMs.
	load(filtered.URL, knownKeys, 0)
	load(plain.URL, knownKeys, 0)

	const httpBlock = 512
	var plainTime time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(httpBlock, b.N-done)
		load(filtered.URL, n, done)
		b.StopTimer()
		plainTime += load(plain.URL, n, done)
		b.StartTimer()
		done += n
	}
	b.StopTimer()
	filteredRPS := float64(b.N) / b.Elapsed().Seconds()
	plainRPS := float64(b.N) / plainTime.Seconds()
	b.ReportMetric(filteredRPS, "req/s")
	b.ReportMetric(plainRPS, "passthrough-req/s")
	b.ReportMetric(filteredRPS/plainRPS, "filter/passthrough")
}
