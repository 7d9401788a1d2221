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

// httpLoad is one kind of load BenchmarkHTTP sends: every request of the measurement is of it.
type httpLoad struct {
	name   string
	config string
	status int // what the filtered gateway answers; the pass-through one always answers 200
	// key gives the key of request i of the measurement, among n; the warm-up sends each of the
	// 1,024 known keys once, admitted.
	key func(n int) func(i int) string
}

var httpLoads = []httpLoad{
	{name: "admitted-known", config: admitConfig, status: 200, key: knownHTTPKeys},
	// Every known key's only token is spent by the warm-up: every request of the load is over
	// its limit, as from clients that keep calling after their 429s.
	{name: "rejected", config: rejectConfig, status: 429, key: knownHTTPKeys},
	// Every request a key never seen: a flood of made-up keys.
	{name: "new-key", config: admitConfig, status: 200, key: func(n int) func(int) string {
		ks := keys("http-new", n)
		return func(i int) string { return ks[i] }
	}},
	// Every request without its key header: a flood of clients that send none, refused with 401.
	{name: "missing-key", config: admitConfig, status: 401, key: func(int) func(int) string {
		return func(int) string { return "" }
	}},
}

// knownHTTPKeys cycles through the known keys the warm-up sent.
func knownHTTPKeys(int) func(int) string {
	ks := keys("http", knownKeys)
	return func(i int) string { return ks[i%knownKeys] }
}

// BenchmarkHTTP measures requests per second through the gateway of `tollgate serve` (2 worker
// VMs, 1,024 known keys) and through the same gateway with the filter disabled
// (gateway.NewPassThrough, `tollgate serve --no-filter`), in the same run: the load alternates
// between the two in blocks of the same requests. The loads: admitted-known (the admit-all
// rule), rejected (one token a day, spent by the warm-up: every request answered 429), new-key
// (every request a key never seen) and missing-key (no request with its key: every one 401).
// Everything runs on loopback in this process: the demo upstream, the gateways and 8
// closed-loop clients, so they share the machine's cores and the figures are relative. ns/op and
// req/s are the filtered gateway's; passthrough-req/s the baseline's; filter/passthrough the
// throughput ratio. Every request has a 5 s timeout.
func BenchmarkHTTP(b *testing.B) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "text/plain")
		io.WriteString(w, "ok\n")
	}))
	defer upstream.Close()
	upstreamURL, _ := url.Parse(upstream.URL)
	plain := httptest.NewServer(gateway.NewPassThrough(upstreamURL, nil))
	defer plain.Close()
	for _, l := range httpLoads {
		b.Run(l.name, func(b *testing.B) { benchmarkHTTPLoad(b, l, upstreamURL, plain.URL) })
	}
}

func benchmarkHTTPLoad(b *testing.B, l httpLoad, upstream *url.URL, plain string) {
	opts := hostOptions(l.config)
	opts.CompilationCache = cache
	h, err := host.New(context.Background(), tollgateModule(b), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	gw, err := gateway.New(context.Background(), h, 2, upstream, nil)
	if err != nil {
		b.Fatal(err)
	}
	filtered := httptest.NewServer(gw)
	defer filtered.Close()
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: httpClients, MaxConnsPerHost: httpClients},
	}
	defer client.CloseIdleConnections()
	// Warm up both: connections, the keys, the VMs.
	warm := knownHTTPKeys(knownKeys)
	sendLoad(b, client, filtered.URL, 200, warm, 0, knownKeys)
	sendLoad(b, client, plain, 200, warm, 0, knownKeys)

	key := l.key(b.N)
	const httpBlock = 512
	var plainTime time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(httpBlock, b.N-done)
		sendLoad(b, client, filtered.URL, l.status, key, done, done+n)
		b.StopTimer()
		plainTime += sendLoad(b, client, plain, 200, key, done, done+n)
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

// sendLoad sends requests from..to-1, each with its key, to base from httpClients closed-loop
// goroutines, fails the benchmark on a status other than status, and returns how long it took.
func sendLoad(b *testing.B, client *http.Client, base string, status int, key func(int) string, from, to int) time.Duration {
	return closedLoop(from, to, func(i int) bool {
		req, _ := http.NewRequest("GET", base+"/api/items", nil)
		if k := key(i); k != "" {
			req.Header.Set("x-api-key", k)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status {
			b.Errorf("key %q: status %d, want %d", key(i), resp.StatusCode, status)
			return false
		}
		return true
	})
}

// closedLoop runs send for i from..to-1 from httpClients closed-loop clients, client c taking
// from+c, from+c+httpClients, …; a client stops when send returns false. It returns how long
// they took together.
func closedLoop(from, to int, send func(i int) bool) time.Duration {
	var wg sync.WaitGroup
	began := time.Now()
	for c := 0; c < httpClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from + c; i < to; i += httpClients {
				if !send(i) {
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(began)
}
