package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/tollgate-proxy/tollgate/e2e/scenario"
)

// The operator endpoint of the real module through tollgate serve on two workers (requests go to
// them in turn), driven by the operator commands. The tests run one after the other, before the
// package's parallel tests: several servers at once would load the machine under the tests that
// measure real time (delay_test.go). Buckets refill once a day: nothing here
// depends on time. The admin listener's /stats fires the module's ticks, which merge each
// worker's top offenders into shared data.

const serveOperatorToken = "s3cret-for-serve"

// operatorServe starts tollgate serve with a per-key rule of capacity tokens and the operator
// endpoint for cidrs; it returns the listener's and the admin's URLs and the token file.
func operatorServe(t *testing.T, capacity int, cidrs, extraTop string, upstream http.Handler) (front, admin, tokenFile string) {
	t.Helper()
	sum := sha256.Sum256([]byte(serveOperatorToken))
	config := writeFile(t, "operator.json", `{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": `+strconv.Itoa(capacity)+`, "refill_tokens": 1, "refill_interval": "24h"}]}],
	  "operator": {"path_prefix": "/.tollgate/", "client_cidrs": `+cidrs+`, "token_sha256": ["`+hex.EncodeToString(sum[:])+`"]}`+extraTop+`}`)
	server := httptest.NewServer(upstream)
	t.Cleanup(server.Close)
	stop := make(chan os.Signal, 1)
	addr, stdout, _, exit := startServeWatched(t, []string{"--config", config, "--upstream", server.URL, "--wasm", builtModule(t),
		"--workers", "2", "--admin", "127.0.0.1:0"}, stop)
	t.Cleanup(func() {
		stop <- syscall.SIGTERM
		<-exit
	})
	_, rest, _ := strings.Cut(stdout.waitFor("metrics on http://"), "metrics on http://")
	adminAddr, _, _ := strings.Cut(rest, "/stats")
	return "http://" + addr, "http://" + adminAddr, writeFile(t, "token", serveOperatorToken+"\n")
}

// keyedStatus sends a request for key and returns its status.
func keyedStatus(t *testing.T, front, key string, extra ...[2]string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", front+"/things", nil)
	req.Header.Set("x-api-key", key)
	for _, h := range extra {
		req.Header.Set(h[0], h[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func statuses(t *testing.T, front, key string, n int) string {
	var got []string
	for range n {
		got = append(got, strconv.Itoa(keyedStatus(t, front, key)))
	}
	return strings.Join(got, " ")
}

// tick fires the module's ticks through the admin listener, and returns its /stats.
func tick(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get(admin + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	stats, _ := io.ReadAll(resp.Body)
	return string(stats)
}

// TestServeOperatorEndpoint: who is limited, a key's state and its reset, through the commands;
// the reset is seen by both workers at once (each has ticked since it last rejected alice, so
// neither answers her from its memory of rejected buckets); the endpoint's requests never reach
// the upstream.
func TestServeOperatorEndpoint(t *testing.T) {
	var upstreamHits atomic.Int64
	front, admin, token := operatorServe(t, 3, `["127.0.0.0/8", "::1"]`, "", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamHits.Add(1)
	}))
	if got := statuses(t, front, "alice", 5); got != "200 200 200 429 429" {
		t.Fatalf("alice: %s", got)
	}
	if got := statuses(t, front, "bob", 4); got != "200 200 200 429" {
		t.Fatalf("bob: %s", got)
	}
	tick(t, admin)
	cli := func(args ...string) (int, string, string) {
		return runCLI("", append(args, "--url", front, "--token-file", token)...)
	}
	code, stdout, stderr := cli("top")
	if code != 0 || !strings.Contains(stdout, "rule per-key: 3 rejection(s) in the last") || strings.Count(stdout, "key#") != 2 {
		t.Fatalf("top: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	var top topReply
	if _, out, _ := cli("top", "--json"); json.Unmarshal([]byte(out), &top) != nil || top.Rules[0].Keys[0].AtLeast != 2 {
		t.Fatalf("top --json: %q", out)
	}
	code, stdout, _ = cli("inspect", "--key", "alice")
	if want := "  limit 0 token_bucket: 0 of 3 token(s) left, next in "; code != 0 || !strings.Contains(stdout, want) ||
		!strings.Contains(stdout, "key#"+top.Rules[0].Keys[0].KeyHash) {
		t.Fatalf("inspect: exit %d %q, want %q and the top key's hash", code, stdout, want)
	}
	code, stdout, _ = cli("reset", "--key", "alice")
	if code != 0 || !strings.Contains(stdout, "limit 0 token_bucket: reset, 3 of 3 token(s) left") {
		t.Fatalf("reset: exit %d %q", code, stdout)
	}
	// Three more, on both workers, and not one more than that.
	if got := statuses(t, front, "alice", 5); got != "200 200 200 429 429" {
		t.Errorf("alice after the reset: %s", got)
	}
	if code, _, stderr := runCLI("", "top", "--url", front, "--token-file", writeFile(t, "wrong", "guess")); code != exitRefused ||
		!strings.Contains(stderr, "answered 401") {
		t.Errorf("a wrong token: exit %d %q", code, stderr)
	}
	if code, _, stderr := cli("inspect", "--key", "alice", "--rule", "nope"); code != exitNotFound || !strings.Contains(stderr, `no rule named "nope"`) {
		t.Errorf("an unknown rule: exit %d %q", code, stderr)
	}
	if code, _, stderr := cli("top", "--prefix", "/other/"); code != exitNoEndpoint || !strings.Contains(stderr, "something other than the operator endpoint") {
		t.Errorf("another prefix: exit %d %q", code, stderr)
	}
	stats := tick(t, admin)
	for _, name := range scenario.OperatorStats {
		if !strings.Contains(stats, name+": ") {
			t.Errorf("/stats has no %s:\n%s", name, stats)
		}
	}
	for _, want := range []string{"tollgate.operator.resets: 1\n", "tollgate.operator.unauthorized: 1\n", "tollgate.operator.answered: 4\n", "tollgate.operator.not_found: 1\n"} {
		if !strings.Contains(stats, want) {
			t.Errorf("/stats has no %q:\n%s", want, stats)
		}
	}
	// The upstream saw the 9 admitted requests and nothing else (the one to /other/top has no
	// key: the rule answered it 401).
	if n := upstreamHits.Load(); n != 9 {
		t.Errorf("the upstream saw %d requests, want 9", n)
	}
}

// TestServeOperatorPeerIsTheConnection: with x-forwarded-for trusted for client keys, the
// endpoint still takes the peer from the connection, so a client cannot claim an address in
// client_cidrs.
func TestServeOperatorPeerIsTheConnection(t *testing.T) {
	front, _, _ := operatorServe(t, 3, `["10.0.0.0/8"]`, `, "client_ip": {"xff_num_trusted_hops": 1}`, http.NotFoundHandler())
	req, _ := http.NewRequest("GET", front+"/.tollgate/top", nil)
	req.Header.Set("Authorization", "Bearer "+serveOperatorToken)
	req.Header.Set("X-Forwarded-For", "10.0.0.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get(operatorHeader) != "1" {
		t.Errorf("status %d, want 403 from the endpoint", resp.StatusCode)
	}
}

// TestServeOperatorResetUnderLoad: requests of a key race a reset on both workers, then more
// follow it, once both workers have ticked (the one that did not make the reset answers the key
// from its memory of rejected buckets until its tick). Before the reset the bucket is empty and
// nothing refills, so every admission takes a token the reset put back, and the requests after
// it are enough to take them all: exactly capacity requests are admitted, never more, and none
// is left.
func TestServeOperatorResetUnderLoad(t *testing.T) {
	const capacity, senders = 40, 8
	front, admin, token := operatorServe(t, capacity, `["127.0.0.0/8", "::1"]`, "", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range capacity {
		keyedStatus(t, front, "alice")
	}
	var admitted, answered atomic.Int64
	// wave sends each requests from every sender at once; answered reaching signalAt closes
	// signal (once).
	wave := func(each int, signalAt int64, signal chan struct{}) *sync.WaitGroup {
		var wg sync.WaitGroup
		var once sync.Once
		for range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if keyedStatus(t, front, "alice") == http.StatusOK {
						admitted.Add(1)
					}
					if answered.Add(1) == signalAt {
						once.Do(func() { close(signal) })
					}
				}
			}()
		}
		return &wg
	}
	halfway := make(chan struct{})
	during := wave(20, senders*20/4, halfway)
	<-halfway
	code, stdout, stderr := runCLI("", "reset", "--key", "alice", "--url", front, "--token-file", token)
	during.Wait()
	tick(t, admin)
	after := wave(capacity/senders+1, -1, nil)
	after.Wait()
	if code != 0 || !strings.Contains(stdout, "reset") {
		t.Fatalf("reset: exit %d %q %q", code, stdout, stderr)
	}
	_, out, _ := runCLI("", "inspect", "--key", "alice", "--json", "--url", front, "--token-file", token)
	var state keysReply
	if err := json.Unmarshal([]byte(out), &state); err != nil || len(state.Rules) != 1 {
		t.Fatalf("inspect: %q %v", out, err)
	}
	if got, left := admitted.Load(), state.Rules[0].Limits[0].Remaining; got != capacity || left != 0 {
		t.Errorf("%d admitted around and after the reset, %d tokens left; want %d and 0", got, left, capacity)
	}
}
