package e2e

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/gateway"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// The same module behind a real HTTP listener, as `tollgate serve` runs it: what a client sees.
func TestThroughHTTP(t *testing.T) {
	t.Parallel()
	var upstreamHits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamHits.Add(1)
		w.Header().Set("x-upstream", "yes")
		io.WriteString(w, "upstream saw key "+r.Header.Get("x-api-key")+"\n")
	}))
	defer upstream.Close()
	upstreamURL, _ := url.Parse(upstream.URL)

	clock := host.NewManualClock(time.Now(), monotonicStart)
	h, err := host.New(context.Background(), module(t), host.Options{
		PluginName: "tollgate", VMID: "tollgate", PluginConfig: []byte(seedConfig), Clock: clock, CompilationCache: cache,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	gw, err := gateway.New(context.Background(), h, 2, upstreamURL, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(gw)
	defer front.Close()

	get := func(key string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", front.URL+"/things?id=1", nil)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}

	steps := []struct {
		key, status, remaining, retryAfter, body string
	}{
		{"alice", "200", "2", "", "upstream saw key alice"},
		{"alice", "200", "1", "", "upstream saw key alice"},
		{"alice", "200", "0", "", "upstream saw key alice"},
		{"alice", "429", "0", "1", "Too Many Requests"},
		{"bob", "200", "2", "", "upstream saw key bob"},
		{"", "401", "", "", "no header x-api-key"},
	}
	for i, s := range steps {
		resp, body := get(s.key)
		got := []string{resp.Status[:3], resp.Header.Get("X-Ratelimit-Remaining"), resp.Header.Get("Retry-After")}
		want := []string{s.status, s.remaining, s.retryAfter}
		if strings.Join(got, " ") != strings.Join(want, " ") || !strings.Contains(body, s.body) {
			t.Fatalf("step %d key %q: got status/remaining/retry-after %q body %q; want %q body containing %q", i, s.key, got, body, want, s.body)
		}
		if s.status == "200" && resp.Header.Get("X-Upstream") != "yes" {
			t.Fatalf("step %d: the upstream's headers were lost", i)
		}
	}
	if err := h.Tick(context.Background()); err != nil { // the module hands its counts over on ticks
		t.Fatal(err)
	}
	admin := httptest.NewServer(gateway.AdminHandler(h.Metrics()))
	defer admin.Close()
	resp, err := http.Get(admin.URL + "/stats/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	prom, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`tollgate_rule_admitted{tollgate_rule="per-api-key"} 4`,
		`tollgate_rule_limited{tollgate_rule="per-api-key"} 1`,
		`tollgate_rule_missing_key{tollgate_rule="per-api-key"} 1`,
	} {
		if !strings.Contains(string(prom), want) {
			t.Errorf("/stats/prometheus lacks %q:\n%s", want, prom)
		}
	}
	if upstreamHits.Load() != 4 {
		t.Fatalf("the upstream saw %d requests, want 4: rejected requests must not reach it", upstreamHits.Load())
	}
}

// An admitted request whose upstream does not answer within the upstream timeout gets 504, and
// still counts as admitted: the module decided before the upstream was asked.
func TestUpstreamTimeoutThroughHTTP(t *testing.T) {
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer upstream.Close()
	defer close(release) // after the 504: the upstream never answers in time
	upstreamURL, _ := url.Parse(upstream.URL)
	h, err := host.New(context.Background(), module(t), host.Options{
		PluginName: "tollgate", VMID: "tollgate", PluginConfig: []byte(seedConfig), CompilationCache: cache,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	gw, err := gateway.New(context.Background(), h, 1, upstreamURL, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	gw.SetUpstreamTimeout(time.Millisecond)
	front := httptest.NewServer(gw)
	defer front.Close()
	req, _ := http.NewRequest("GET", front.URL+"/slow", nil)
	req.Header.Set("X-Api-Key", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "Gateway Timeout") {
		t.Fatalf("status %d body %q, want 504", resp.StatusCode, body)
	}
	if err := h.Tick(context.Background()); err != nil { // the module hands its counts over on ticks
		t.Fatal(err)
	}
	if n, _ := h.Metrics().Value("tollgate.rule.per-api-key.admitted"); n != 1 {
		t.Fatalf("admitted counter %d, want 1", n)
	}
}
