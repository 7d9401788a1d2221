package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// on_limit delay through `tollgate serve`, in real time: concurrent requests of one key are
// held and reach the upstream paced by the bucket. A loaded machine can only make the requests
// later, so the test asserts counts and lower bounds on instants, never how soon anything
// happens.

// Capacity 1, one token per 200ms, max_delay 1s.
const pacedConfig = `{"rules": [{"name": "partner", "key": [{"authority": {}}],
  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "200ms"}],
  "on_limit": {"action": "delay", "max_delay": "1s"}}]}`

const tokenInterval = 200 * time.Millisecond

// arrivals records when the upstream saw each request.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) sorted() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]time.Time(nil), a.at...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// timedLog keeps the instant each line of the module's log was written.
type timedLog struct {
	mu    sync.Mutex
	lines []string
	at    []time.Time
}

func (l *timedLog) Write(p []byte) (int, error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.lines, l.at = append(l.lines, line), append(l.at, now)
	}
	return len(p), nil
}

// lastDecision is when the last decision line was written: every decision was made by then.
func (l *timedLog) lastDecision() (time.Time, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	n := 0
	for i, line := range l.lines {
		if strings.Contains(line, "tollgate: decision ") {
			last, n = l.at[i], n+1
		}
	}
	return last, n
}

// startPacedServe runs tollgate serve with pacedConfig and debug logs in front of an upstream
// that records arrivals.
func startPacedServe(t *testing.T) (addr string, seen *arrivals, log *timedLog) {
	t.Helper()
	seen, log = &arrivals{}, &timedLog{}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		seen.mu.Lock()
		seen.at = append(seen.at, now)
		seen.mu.Unlock()
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(upstream.Close)
	opts, ok := parseServeFlags([]string{"--listen", "127.0.0.1:0", "--config", writeFile(t, "paced.json", pacedConfig),
		"--wasm", builtModule(t), "--upstream", upstream.URL, "--workers", "2", "--log-level", "debug"}, io.Discard)
	if !ok {
		t.Fatal("flags refused")
	}
	stop := make(chan os.Signal, 1)
	opts.stop = stop
	stdout := newWatchedWriter()
	exit := make(chan int, 1)
	go func() { exit <- runServe(opts, stdout, log) }()
	line := stdout.waitFor("\n")
	_, rest, _ := strings.Cut(line, "listening on http://")
	addr, _, _ = strings.Cut(rest, ",")
	t.Cleanup(func() {
		stop <- syscall.SIGTERM
		if code := <-exit; code != 0 {
			t.Errorf("tollgate serve exited %d", code)
		}
	})
	return addr, seen, log
}

type answer struct {
	status     int
	retryAfter string
}

// burst sends n requests of one authority at once and returns their answers.
func burst(t *testing.T, addr string, n int) []answer {
	t.Helper()
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", "http://"+addr+"/v1/quotes", nil)
			req.Host = "api.partner.example"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answers[i] = answer{resp.StatusCode, resp.Header.Get("retry-after")}
		}()
	}
	wg.Wait()
	return answers
}

// Five at once: all admitted, and the upstream sees the k-th no earlier than k token intervals
// after the burst was sent (the tokens are due then, and a held request never goes on early).
func TestServePacesABurst(t *testing.T) {
	t.Parallel()
	addr, seen, _ := startPacedServe(t)
	sent := time.Now()
	for i, a := range burst(t, addr, 5) {
		if a.status != 200 {
			t.Fatalf("request %d: %d, want all five admitted (the fifth is due 800ms later, within max_delay 1s)", i, a.status)
		}
	}
	at := seen.sorted()
	if len(at) != 5 {
		t.Fatalf("the upstream saw %d requests, want 5", len(at))
	}
	gaps := make([]time.Duration, 0, 4)
	for k, a := range at {
		if early := sent.Add(time.Duration(k) * tokenInterval).Sub(a); early > 0 {
			t.Errorf("request %d reached the upstream %v after the burst was sent, %v before its token was due", k, a.Sub(sent), early)
		}
		if k > 0 {
			gaps = append(gaps, a.Sub(at[k-1]))
		}
	}
	t.Logf("gaps between arrivals at the upstream: %v (tokens every %v, resumed on a 10ms tick)", gaps, tokenInterval)
}

// Twelve at once: the bucket's token and five reservations up to max_delay are admitted, the
// rest answered 429. Decisions spread over S (bounded by the module's last decision line) can
// only admit more, at most S/200ms more: 1 + (S + 1s)/200ms tokens are due within the
// interval the admitted requests go on in.
func TestServeRejectsBeyondMaxDelay(t *testing.T) {
	t.Parallel()
	addr, seen, log := startPacedServe(t)
	sent := time.Now()
	answers := burst(t, addr, 12)
	last, decisions := log.lastDecision()
	if decisions < 12 {
		t.Fatalf("%d decision lines for 12 requests", decisions)
	}
	admitted, rejected := 0, 0
	for i, a := range answers {
		switch {
		case a.status == 200:
			admitted++
		case a.status == 429 && a.retryAfter != "" && a.retryAfter != "0":
			rejected++
		default:
			t.Fatalf("request %d: %+v, want 200, or 429 with Retry-After", i, a)
		}
	}
	spread := last.Sub(sent)
	most := 6 + int(spread/tokenInterval)
	if admitted < 6 || admitted > most || admitted+rejected != 12 {
		t.Fatalf("%d admitted, %d rejected; want 6 to %d admitted (decisions spread over %v), the rest 429",
			admitted, rejected, most, spread)
	}
	if got := len(seen.sorted()); got != admitted {
		t.Fatalf("the upstream saw %d requests, %d were admitted", got, admitted)
	}
	t.Logf("%d admitted, %d rejected at once; decisions spread over %v", admitted, rejected, spread)
}
