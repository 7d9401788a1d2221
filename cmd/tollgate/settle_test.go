package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// The refills are an hour long: no token comes back while the test runs, however slow the
// machine, so every count below is exact.
const outcomeServeConfig = `{"rules": [
  {"name": "failed-logins", "match": {"path": {"exact": "/login"}}, "key": [{"client_ip": {}}],
   "limits": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"}],
   "count": {"statuses": ["401", "403"]}},
  {"name": "api", "match": {"path": {"prefix": "/api/"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 3, "refill_tokens": 3, "refill_interval": "1h"}],
   "refund": {"statuses": ["5xx"]}}
]}`

func TestCheckDescribesCountAndRefund(t *testing.T) {
	file := writeFile(t, "outcome.json", outcomeServeConfig)
	code, stdout, stderr := runCLI("", "check", file)
	for _, want := range []string{
		file + ": rule failed-logins: charges only the requests whose response status is 401, 403 (a request in flight holds its charge until its response)",
		file + ": rule api: gives the charge back when the response status is 5xx",
	} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("exit %d stdout %q stderr %q; want %q", code, stdout, stderr, want)
		}
	}
	bad := writeFile(t, "bad.json", `{"rules": [{"name": "r", "key": [{"client_ip": {}}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}], "count": {"statuses": [401, "4xx"]}}]}`)
	code, _, stderr = runCLI("", "check", bad)
	if want := bad + `: rules[0].count.statuses[0]: got the number 401, want a string: quote the status, e.g. "401"`; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d stderr %q; want exit 1 and %q", code, stderr, want)
	}
}

// Through tollgate serve and the demo upstream, which answers the status a request asks for:
// successful logins are never charged, two failures and then every login is 429 before the
// upstream; four upstream failures of the api cost nothing, and the whole quota of 3 is then
// still there.
func TestServeCountAndRefund(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	demo := demoHandler()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		demo.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)
	stop := make(chan os.Signal, 1)
	file := writeFile(t, "outcome.json", outcomeServeConfig)
	addr, _, exit := startServe(t, []string{"--config", file, "--wasm", builtModule(t), "--upstream", upstream.URL}, stop)
	defer func() {
		stop <- syscall.SIGTERM
		if code := <-exit; code != 0 {
			t.Errorf("exit %d after a clean stop", code)
		}
	}()
	send := func(path string, status int, upstreamReached bool) {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-api-key", "k1")
		before := reached.Load()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status || (reached.Load() > before) != upstreamReached {
			t.Fatalf("%s: status %d (body %q), reached the upstream %v; want %d, %v",
				path, resp.StatusCode, body, reached.Load() > before, status, upstreamReached)
		}
		if status == 429 && resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: a 429 without Retry-After", path)
		}
	}

	for range 3 {
		send("/login?status=200", 200, true)
	}
	send("/login?status=401", 401, true)
	send("/login?status=200", 200, true)
	send("/login?status=403", 403, true)
	send("/login?status=200", 429, false)
	send("/login?status=401", 429, false)

	for _, status := range []int{500, 503, 502, 504} {
		send("/api/x?status="+strconv.Itoa(status), status, true)
	}
	for range 3 {
		send("/api/x?status=200", 200, true)
	}
	send("/api/x?status=200", 429, false)
}

func TestCheckDescribesUsage(t *testing.T) {
	for usage, want := range map[string]string{
		`{"source": "openai", "reserve": 500, "unknown": 1000}`: "rule r: charges what the response reports (openai total tokens), reserving 500 when a request is admitted; a response whose usage cannot be read is charged 1000",
		`{"source": "anthropic", "count": "output"}`:            "rule r: charges what the response reports (anthropic output tokens), reserving 1",
		`{"source": "header", "header": "X-Usage"}`:             "(the response header or trailer x-usage)",
		`{"source": "response_bytes", "unknown": 0}`:            "(the response body's bytes), reserving 1 when a request is admitted; a response whose usage cannot be read is charged 0",
	} {
		file := writeFile(t, "usage.json", `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}],
		  "limits": [{"capacity": 1000, "refill_tokens": 10, "refill_interval": "1s"}], "usage": `+usage+`}]}`)
		code, stdout, stderr := runCLI("", "check", file)
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("%s: exit %d stdout %q stderr %q; want %q", usage, code, stdout, stderr, want)
		}
	}
}
