package main

import (
	"io"
	"net/http"
	"os"
	"syscall"
	"testing"
)

// A concurrency limit through tollgate serve in real time, on two workers: with max_in_flight 2
// and an upstream the test holds, two requests of a key are admitted and wait upstream, the next
// three are answered 429 with Retry-After 1 at once, and once the first two have ended their
// slots are free again. Nothing here depends on timing: the held requests are known to be in
// flight when the upstream has seen them, a request wrongly admitted shows up at the upstream
// instead of answering, and the gateway ends a stream (proxy_on_delete) before the buffered
// response is flushed to the client, so a client that has read a whole response knows its slot
// was released.
func TestServeConcurrencyLimit(t *testing.T) {
	t.Parallel()
	config := writeFile(t, "inflight.json", `{"rules": [{"name": "uploads", "key": [{"header": "x-api-key"}],
	  "limits": [{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "30s"}]}]}`)
	upstream := newBlockingUpstream(t)
	stop := make(chan os.Signal, 1)
	addr, _, exit := startServe(t, []string{"--config", config, "--upstream", upstream.URL, "--wasm", builtModule(t), "--workers", "2"}, stop)

	type answer struct {
		status     int
		retryAfter string
		body       string
		err        error
	}
	send := func() chan answer {
		done := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest("POST", "http://"+addr+"/upload", nil)
			req.Header.Set("x-api-key", "alice")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- answer{err: err}
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(body)}
		}()
		return done
	}
	// Each request either answers (a rejection) or reaches the upstream (admitted, held there).
	admitted := func(a chan answer) {
		t.Helper()
		select {
		case <-upstream.arrived:
		case got := <-a:
			t.Fatalf("answered %+v, want admitted and held upstream", got)
		}
	}
	rejected := func(a chan answer) {
		t.Helper()
		select {
		case <-upstream.arrived:
			t.Fatal("admitted beyond max_in_flight")
		case got := <-a:
			if got.err != nil || got.status != http.StatusTooManyRequests || got.retryAfter != "1" {
				t.Fatalf("got %+v, want 429 with Retry-After: 1", got)
			}
		}
	}
	first, second := send(), send()
	admitted(first)
	admitted(second)
	for i := 0; i < 3; i++ {
		rejected(send())
	}
	close(upstream.release) // the first two end
	for _, a := range []chan answer{first, second} {
		if got := <-a; got.err != nil || got.status != http.StatusOK || got.body != "done\n" {
			t.Fatalf("a held request got %+v, want 200", got)
		}
	}
	// Both slots are free again: two more are admitted (the upstream answers at once now, so a
	// 200 is the proof; a rejection would be a 429).
	third, fourth := send(), send()
	for _, a := range []chan answer{third, fourth} {
		if got := <-a; got.err != nil || got.status != http.StatusOK || got.body != "done\n" {
			t.Fatalf("after the slots were released: %+v, want 200", got)
		}
	}
	stop <- syscall.SIGTERM
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d", code)
	}
}
