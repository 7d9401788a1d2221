package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
)

// tiersConfig has the shape of limits_by's documented example, with refills an hour away so that
// every count below is what the configuration allows however slowly the machine runs.
const tiersConfig = `{"rules": [
  {"name": "plans", "key": [{"header": "x-user"}],
   "limits_by": {"part": {"header": "x-plan"}, "default": "free",
     "tiers": {"free": [{"capacity": 10, "refill_tokens": 10, "refill_interval": "1h"}],
               "pro":  [{"capacity": 100, "refill_tokens": 100, "refill_interval": "1h"},
                        {"algorithm": "fixed_window", "capacity": 100000, "calendar": "month"}]}}}
]}`

// tollgate check accepts limits_by and warns, exit 0, when the tier is a plain request header.
func TestCheckWarnsOfAClientChosenTier(t *testing.T) {
	header := writeFile(t, "header.json", tiersConfig)
	code, stdout, stderr := runCLI("", "check", header)
	want := header + ": warning: rules[0].limits_by.part: the tier is read from the request header x-plan, which a client can send itself"
	tiers := header + `: rule plans: limits by tier from header x-plan: "free" (1 limit, the default), "pro" (2 limits)`
	if code != 0 || !strings.Contains(stdout, header+": valid: 1 rule(s)") || !strings.Contains(stdout, tiers) || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d stdout %q stderr %q; want exit 0, valid, and one line starting %q", code, stdout, stderr, want)
	}
	metadata := writeFile(t, "metadata.json", strings.Replace(tiersConfig, `{"header": "x-plan"}`,
		`{"attribute": ["metadata", "filter_metadata", "envoy.filters.http.jwt_authn", "jwt_payload", "plan"]}`, 1))
	if code, _, stderr := runCLI("", "check", metadata); code != 0 || stderr != "" {
		t.Fatalf("a tier from metadata: exit %d stderr %q, want 0 and no warning", code, stderr)
	}
	both := writeFile(t, "both.json", strings.Replace(tiersConfig, `"limits_by"`,
		`"limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}], "limits_by"`, 1))
	if code, _, stderr := runCLI("", "check", both); code != 1 || !strings.Contains(stderr, both+`: rules[0]: has both "limits" and "limits_by"`) {
		t.Fatalf("limits and limits_by: exit %d stderr %q", code, stderr)
	}
}

// Black box through tollgate serve and the real module: free 10, pro 100, a missing or unknown
// tier is free, and a user that spent free's 10 gets nothing more as pro.
func TestServeTiers(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	defer upstream.Close()
	stop := make(chan os.Signal, 1)
	addr, stderr, exit := startServe(t, []string{"--config", writeFile(t, "tiers.json", tiersConfig),
		"--upstream", upstream.URL, "--wasm", builtModule(t), "--workers", "2"}, stop)
	send := func(user, plan string) int {
		req, err := http.NewRequest("GET", "http://"+addr+"/api", nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.Header.Set("x-user", user)
		}
		if plan != "" {
			req.Header.Set("x-plan", plan)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// admitted sends n requests and counts the 200s; any other status must be 429.
	admitted := func(user, plan string, n int) int {
		count := 0
		for range n {
			switch status := send(user, plan); status {
			case http.StatusOK:
				count++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("%s %q: status %d", user, plan, status)
			}
		}
		return count
	}
	for _, c := range []struct {
		user, plan string
		sent, want int
	}{
		{"free-user", "", 12, 10},
		{"pro-user", "pro", 103, 100},
		{"gold-user", "gold", 12, 10}, // unknown: free
		{"free-user", "pro", 5, 0},    // the same bucket, still empty
		{"pro-user", "", 5, 0},
	} {
		if got := admitted(c.user, c.plan, c.sent); got != c.want {
			t.Errorf("%s with plan %q: %d of %d admitted, want %d", c.user, c.plan, got, c.sent, c.want)
		}
	}
	if status := send("", "pro"); status != http.StatusUnauthorized {
		t.Errorf("no user: status %d, want 401", status)
	}
	stop <- syscall.SIGTERM
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr.waitFor(""))
	}
}
