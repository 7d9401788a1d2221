package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// watchedWriter is an output stream a test can wait on: waitFor returns once a line containing s
// has been written, and the text up to it.
type watchedWriter struct {
	mu      sync.Mutex
	written sync.Cond
	buf     bytes.Buffer
}

func newWatchedWriter() *watchedWriter {
	w := &watchedWriter{}
	w.written.L = &w.mu
	return w
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.written.Broadcast()
	return len(p), nil
}

func (w *watchedWriter) waitFor(s string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !strings.Contains(w.buf.String(), s) {
		w.written.Wait()
	}
	return w.buf.String()
}

// blockingUpstream answers each request only once the test releases it, and says when one has
// arrived.
type blockingUpstream struct {
	*httptest.Server
	arrived chan struct{}
	release chan struct{}
}

func newBlockingUpstream(t *testing.T) *blockingUpstream {
	u := &blockingUpstream{arrived: make(chan struct{}, 16), release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.arrived <- struct{}{}
		select {
		case <-u.release:
			io.WriteString(w, "done\n")
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// startServe runs tollgate serve with the given flags and a stop channel in place of signals,
// and returns the address it listens on.
func startServe(t *testing.T, args []string, stop chan os.Signal) (addr string, stderr *watchedWriter, exit chan int) {
	t.Helper()
	addr, _, stderr, exit = startServeWatched(t, args, stop)
	return addr, stderr, exit
}

// startServeWatched is startServe that also returns its standard output, once the listening
// line has been written.
func startServeWatched(t *testing.T, args []string, stop chan os.Signal) (addr string, stdout, stderr *watchedWriter, exit chan int) {
	t.Helper()
	opts, ok := parseServeFlags(append([]string{"--listen", "127.0.0.1:0"}, args...), io.Discard)
	if !ok {
		t.Fatalf("flags %q refused", args)
	}
	opts.stop = stop
	stdout, stderr = newWatchedWriter(), newWatchedWriter()
	exit = make(chan int, 1)
	go func() { exit <- runServe(opts, stdout, stderr) }()
	line := stdout.waitFor("listening on")
	_, rest, _ := strings.Cut(line, "listening on http://")
	addr, _, _ = strings.Cut(rest, ",")
	return addr, stdout, stderr, exit
}

func TestServeFlagsForTimeouts(t *testing.T) {
	opts, ok := parseServeFlags([]string{"--no-filter", "--upstream", "http://127.0.0.1:1"}, io.Discard)
	if !ok || opts.upstreamTimeout != 15*time.Second || opts.drainTimeout != 20*time.Second {
		t.Fatalf("defaults: upstream timeout %s, drain timeout %s", opts.upstreamTimeout, opts.drainTimeout)
	}
	for _, tt := range []struct{ flag, value, want string }{
		{"--upstream-timeout", "0s", "--upstream-timeout 0s is out of range: use a duration from 1ms to 1h, e.g. 15s"},
		{"--upstream-timeout", "2h", "--upstream-timeout 2h0m0s is out of range"},
		{"--upstream-timeout", "fast", `invalid value "fast" for flag -upstream-timeout`},
		{"--drain-timeout", "-1s", "--drain-timeout -1s is out of range"},
	} {
		code, _, stderr := runCLI("", "serve", "--no-filter", "--upstream", "http://127.0.0.1:1", tt.flag, tt.value)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s %s: exit %d stderr %q; want exit 2 and %q", tt.flag, tt.value, code, stderr, tt.want)
		}
	}
}

// An upstream that does not answer within --upstream-timeout gets the client a 504.
func TestServeUpstreamTimeout(t *testing.T) {
	upstream := newBlockingUpstream(t)
	stop := make(chan os.Signal, 1)
	addr, _, exit := startServe(t, []string{"--no-filter", "--upstream", upstream.URL, "--upstream-timeout", "1ms"}, stop)
	resp, err := http.Get("http://" + addr + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	close(upstream.release)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "did not answer within 1ms") {
		t.Fatalf("status %d body %q, want 504", resp.StatusCode, body)
	}
	stop <- syscall.SIGTERM
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d after a clean stop", code)
	}
}

// SIGTERM waits for the requests in flight: one that finishes within --drain-timeout is answered
// and the exit is 0; one that does not is cut and the exit is 1.
func TestServeStopsGracefully(t *testing.T) {
	t.Run("drained", func(t *testing.T) {
		upstream := newBlockingUpstream(t)
		stop := make(chan os.Signal, 1)
		addr, stderr, exit := startServe(t, []string{"--no-filter", "--upstream", upstream.URL, "--drain-timeout", "1h"}, stop)
		answered := make(chan string, 1)
		go func() {
			resp, err := http.Get("http://" + addr + "/")
			if err != nil {
				answered <- err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answered <- resp.Status + " " + string(body)
		}()
		<-upstream.arrived
		stop <- syscall.SIGTERM
		stderr.waitFor("stopping; requests in flight have 1h0m0s to finish")
		close(upstream.release)
		if got := <-answered; got != "200 OK done\n" {
			t.Fatalf("the request in flight got %q", got)
		}
		if code := <-exit; code != 0 {
			t.Fatalf("exit %d after every request finished; stderr %q", code, stderr.waitFor(""))
		}
	})
	t.Run("cut", func(t *testing.T) {
		upstream := newBlockingUpstream(t)
		stop := make(chan os.Signal, 1)
		addr, stderr, exit := startServe(t, []string{"--no-filter", "--upstream", upstream.URL, "--drain-timeout", "1ms"}, stop)
		answered := make(chan error, 1)
		go func() {
			resp, err := http.Get("http://" + addr + "/")
			if err == nil {
				resp.Body.Close()
			}
			answered <- err
		}()
		<-upstream.arrived
		stop <- syscall.SIGTERM
		code := <-exit
		close(upstream.release)
		if code != 1 {
			t.Fatalf("exit %d after cutting a request, want 1", code)
		}
		if text := stderr.waitFor("were cut"); !strings.Contains(text, "tollgate serve: 1 request(s) still in flight after 1ms were cut") {
			t.Fatalf("stderr %q", text)
		}
		if err := <-answered; err == nil {
			t.Fatal("the cut request was answered")
		}
	})
}
