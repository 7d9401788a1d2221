package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Long quotas through tollgate serve, on the real clocks: a calendar month, a "7d" and a "1w"
// window, a "30d" window and a bucket of 100,000 tokens refilled one per "1d" are accepted, each
// admits its capacity and then answers 429 with a Retry-After of the long window. Only what
// cannot flake is asserted: counts, and waits bounded by the clocks read around the requests.
func TestServeEnforcesLongQuotas(t *testing.T) {
	t.Parallel()
	config := writeFile(t, "quotas.json", `{"rules": [
	  {"name": "monthly", "key": [{"header": "x-month"}], "missing_key": {"action": "allow"},
	   "limits": [{"algorithm": "fixed_window", "capacity": 3, "calendar": "month"}]},
	  {"name": "seven-days", "key": [{"header": "x-7d"}], "missing_key": {"action": "allow"},
	   "limits": [{"algorithm": "fixed_window", "capacity": 2, "window": "7d"}]},
	  {"name": "one-week", "key": [{"header": "x-1w"}], "missing_key": {"action": "allow"},
	   "limits": [{"algorithm": "fixed_window", "capacity": 2, "window": "1w"}]},
	  {"name": "thirty-days", "key": [{"header": "x-30d"}], "missing_key": {"action": "allow"},
	   "limits": [{"algorithm": "fixed_window", "capacity": 4, "window": "30d"}]},
	  {"name": "daily", "key": [{"header": "x-day"}], "missing_key": {"action": "allow"},
	   "cost": {"header": "x-cost", "max": 100000},
	   "limits": [{"capacity": 100000, "refill_tokens": 1, "refill_interval": "1d"}]}]}`)
	if code, stdout, stderr := runCLI("", "check", config); code != 0 {
		t.Fatalf("tollgate check: exit %d\n%s%s", code, stdout, stderr)
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	t.Cleanup(upstream.Close)
	stop := make(chan os.Signal, 1)
	addr, stderr, exit := startServe(t, []string{"--config", config, "--wasm", builtModule(t), "--upstream", upstream.URL, "--workers", "2"}, stop)
	send := func(headers ...string) (status int, retryAfter int64) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			if retryAfter, err = strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); err != nil {
				t.Fatalf("Retry-After %q: %v", resp.Header.Get("Retry-After"), err)
			}
		}
		return resp.StatusCode, retryAfter
	}
	// exhaust sends capacity requests that must pass, then one that must be limited, and returns
	// its Retry-After and the wall clock read just before and just after it.
	exhaust := func(name string, capacity int, headers ...string) (retryAfter int64, before, after time.Time) {
		t.Helper()
		for i := 0; i < capacity; i++ {
			if status, _ := send(headers...); status != 200 {
				t.Fatalf("%s: request %d of %d: status %d", name, i+1, capacity, status)
			}
		}
		before = time.Now()
		status, retryAfter := send(headers...)
		after = time.Now()
		if status != http.StatusTooManyRequests {
			t.Fatalf("%s: request %d: status %d, want 429", name, capacity+1, status)
		}
		return retryAfter, before, after
	}
	const day = 86400

	// The month ends at the next first of a month, 00:00 UTC.
	ra, before, after := exhaust("monthly", 3, "x-month", "alice")
	monthEnd := func(at time.Time) int64 {
		y, m, _ := at.UTC().Date()
		return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC).Unix()
	}
	if lo, hi := monthEnd(after)-after.Unix()-1, monthEnd(before)-before.Unix()+1; ra < lo || ra > hi || ra > 31*day {
		t.Errorf("monthly: Retry-After %d s, want the %d..%d s to the end of the month", ra, lo, hi)
	}
	for _, w := range []struct {
		name, header string
		capacity     int
		window       int64
	}{{"7d", "x-7d", 2, 7 * day}, {"1w", "x-1w", 2, 7 * day}, {"30d", "x-30d", 4, 30 * day}} {
		// Windows of a fixed length are aligned on the host's monotonic clock, which started
		// with this process: the first window has at most its whole length left, and at least
		// all but a day of it.
		if ra, _, _ := exhaust(w.name, w.capacity, w.header, "k"); ra > w.window || ra < w.window-day {
			t.Errorf("%s: Retry-After %d s, want at most %d s and more than %d s", w.name, ra, w.window, w.window-day)
		}
	}
	// 100,000 tokens at one a day: a burst of all of them, then a day for the next.
	start := time.Now()
	if status, _ := send("x-day", "d", "x-cost", "100000"); status != 200 {
		t.Fatalf("daily: 100,000 tokens at once: status %d", status)
	}
	status, ra := send("x-day", "d")
	elapsed := int64(time.Since(start)/time.Second) + 1
	if status != http.StatusTooManyRequests || ra > day || ra < day-elapsed {
		t.Errorf("daily: status %d Retry-After %d s, want 429 and a day less the %d s since the burst", status, ra, elapsed)
	}
	stop <- syscall.SIGTERM
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr.waitFor(""))
	}
}

// tollgate check names the field and the fix for long quotas out of range and calendar misuse.
func TestCheckLongQuotas(t *testing.T) {
	file := writeFile(t, "bad.json", `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [
	  {"capacity": 1, "refill_tokens": 1, "refill_interval": "400d"},
	  {"algorithm": "fixed_window", "capacity": 1, "calendar": "year"},
	  {"algorithm": "fixed_window", "capacity": 1, "calendar": "month", "window": "30d"},
	  {"algorithm": "sliding_window", "capacity": 1, "window": "1.5d"}]}]}`)
	code, _, stderr := runCLI("", "check", file)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, stderr)
	}
	for _, want := range []string{
		file + `: rules[0].limits[0].refill_interval: "400d" is longer than "366d": refill_interval is a duration from "1ms" to "366d" inclusive`,
		file + `: rules[0].limits[1].calendar: "year" is not a calendar: calendar is "day", "week" (from Monday) or "month"`,
		file + `: rules[0].limits[2].window: window and calendar are exclusive`,
		file + `: rules[0].limits[3].window: "1.5d" is not a valid duration (days and weeks are whole numbers: write "36h" rather than "1.5d")`,
	} {
		if !containsLine(stderr, want) {
			t.Errorf("stderr has no line starting with %q:\n%s", want, stderr)
		}
	}
	valid := writeFile(t, "valid.json", `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [
	  {"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "366d"},
	  {"algorithm": "fixed_window", "capacity": 100000, "calendar": "month"},
	  {"algorithm": "sliding_window", "capacity": 10, "window": "2w"}]}]}`)
	if code, _, stderr := runCLI("", "check", valid); code != 0 {
		t.Errorf("valid long quotas: exit %d; stderr %q", code, stderr)
	}
}

func containsLine(text, prefix string) bool {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}
