package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// examples/llm's scenario through tollgate serve and the demo upstream playing the model: a JSON
// completion of 700 tokens, a streamed one of 1,200, and the third request of the key is 429
// before the upstream, with Retry-After the time until its reserve is back. The example's
// per-minute refill becomes a daily one here, so that no token comes back while the test runs,
// however slow the machine: every figure below is exact.
func TestServeChargesTheLLMExampleUsage(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "llm", "tollgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(example), `"refill_interval": "1m"`, `"refill_interval": "24h"`, 1)
	if cfg == string(example) {
		t.Fatal("examples/llm/tollgate.json has no per-minute refill to slow down")
	}
	reached := 0
	demo := demoHandler()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		if got := r.Header.Get("accept-encoding"); got != "" {
			t.Errorf("the upstream got accept-encoding %q: a rule reading the body needs it uncompressed", got)
		}
		demo.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)
	stop := make(chan os.Signal, 1)
	addr, stderr, exit := startServe(t, []string{"--config", writeFile(t, "llm.json", cfg), "--wasm", builtModule(t), "--upstream", upstream.URL}, stop)
	defer func() {
		stop <- syscall.SIGTERM
		if code := <-exit; code != 0 {
			t.Errorf("exit %d after a clean stop", code)
		}
	}()
	post := func(body string, headers ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-api-key", "team-a")
		req.Header.Set("accept-encoding", "gzip")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultTransport.RoundTrip(req) // no transparent gzip: see what was sent
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(data)
	}
	resp, body := post(`{"model": "demo"}`, "x-demo-prompt-tokens", "100", "x-demo-completion-tokens", "600")
	if resp.StatusCode != 200 || !strings.Contains(body, `"total_tokens":700`) || resp.Header.Get("x-ratelimit-remaining") != "1500" {
		t.Fatalf("first: %d remaining %q %q; want 200, 1500 left after the reserve, and the usage", resp.StatusCode, resp.Header.Get("x-ratelimit-remaining"), body)
	}
	stderr.waitFor("wasm.tollgate_usage=700")
	resp, body = post(`{"model": "demo", "stream": true, "stream_options": {"include_usage": true}}`,
		"x-demo-prompt-tokens", "200", "x-demo-completion-tokens", "1000")
	if resp.StatusCode != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") || !strings.Contains(body, `"total_tokens":1200`) ||
		resp.Header.Get("x-ratelimit-remaining") != "800" {
		t.Fatalf("streamed: %d remaining %q %q; want 200, 800 left after the reserve, and every event", resp.StatusCode, resp.Header.Get("x-ratelimit-remaining"), body)
	}
	stderr.waitFor("wasm.tollgate_usage=1200")
	resp, _ = post(`{"model": "demo"}`)
	// 100 left, 500 to reserve: 400 tokens at 2,000 a day is 17,280 s, less the moments since.
	retry, _ := strconv.Atoi(resp.Header.Get("retry-after"))
	if resp.StatusCode != 429 || retry < 17000 || retry > 17280 || resp.Header.Get("x-ratelimit-remaining") != "100" {
		t.Fatalf("third: %d Retry-After %q remaining %q; want 429 after about 17280 s with 100 left",
			resp.StatusCode, resp.Header.Get("retry-after"), resp.Header.Get("x-ratelimit-remaining"))
	}
	if reached != 2 {
		t.Errorf("the upstream was reached %d times, want 2: a rejection is answered before it", reached)
	}
}
