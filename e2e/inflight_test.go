package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// Concurrency limits through the real module, on several worker VMs sharing one store: a slot is
// taken when the request is admitted and given back when its stream ends, however it ends
// (response complete, reset before the response, reset after the response began); a rejected
// request's end frees nothing; a slot whose end never comes is free after its lease.

const inFlightConfig = `{"rules": [{"name": "uploads", "key": [{"header": "x-api-key"}],
  "limits": [{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "10s"}]}]}`

func inFlightRequest(key string) host.Request {
	return host.Request{
		Headers:       [][2]string{{":method", "POST"}, {":path", "/upload"}, {":authority", "example.test"}, {":scheme", "http"}, {"x-api-key", key}},
		SourceAddress: "192.0.2.10:40000",
		EndOfStream:   true,
	}
}

// startInFlight starts a stream and checks whether it was admitted (forwarded upstream) or
// answered 429 with Retry-After: 1.
func (g *rig) startInFlight(vm *host.VM, key string, admitted bool) *host.Stream {
	g.t.Helper()
	s, d, err := vm.StartStream(inFlightRequest(key))
	if err != nil {
		g.t.Fatalf("start: %v\nlogs:\n%s", err, g.logText())
	}
	switch {
	case admitted && !d.Continue:
		g.t.Fatalf("key %s on vm %d: answered %d, want admitted", key, vm.ID(), d.Reply.Status)
	case !admitted && (d.Continue || d.Reply == nil || d.Reply.Status != 429 || d.Reply.Header("retry-after") != "1"):
		g.t.Fatalf("key %s on vm %d: continue %v reply %+v, want 429 with Retry-After 1", key, vm.ID(), d.Continue, d.Reply)
	}
	return s
}

// completeInFlight ends an admitted stream with the upstream's whole response.
func (g *rig) completeInFlight(s *host.Stream) {
	g.t.Helper()
	if _, err := s.ResponseHeaders(200, [][2]string{{"content-length", "0"}}, true); err != nil {
		g.t.Fatal(err)
	}
	g.endInFlight(s)
}

func (g *rig) endInFlight(s *host.Stream) {
	g.t.Helper()
	if err := s.Finish(); err != nil {
		g.t.Fatal(err)
	}
}

func TestInFlightSlotsAcrossWorkers(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRig(t, p, inFlightConfig, 3)
			vm := g.vms
			g.at(0)
			a1 := g.startInFlight(vm[0], "alice", true)
			a2 := g.startInFlight(vm[1], "alice", true)
			g.endInFlight(g.startInFlight(vm[2], "alice", false)) // the rejection's end frees nothing
			g.endInFlight(g.startInFlight(vm[0], "alice", false))
			b1 := g.startInFlight(vm[2], "bob", true) // another key, its own slots
			g.completeInFlight(a1)                    // response complete
			a3 := g.startInFlight(vm[2], "alice", true)
			g.startInFlight(vm[1], "alice", false)
			g.endInFlight(a2) // reset before any response
			a4 := g.startInFlight(vm[0], "alice", true)
			if _, err := a3.ResponseHeaders(200, nil, false); err != nil {
				t.Fatal(err)
			}
			g.endInFlight(a3) // reset while the response body was streaming
			a5 := g.startInFlight(vm[1], "alice", true)
			g.startInFlight(vm[2], "alice", false)
			g.completeInFlight(a4)
			g.completeInFlight(a5)
			g.completeInFlight(b1)
			g.completeInFlight(g.startInFlight(vm[0], "alice", true))
			g.completeInFlight(g.startInFlight(vm[1], "alice", true))
			want := map[string]int64{
				"tollgate.rule.uploads.admitted": 8, "tollgate.rule.uploads.limited": 4,
				"tollgate.rule.uploads.in_flight_limited": 4,
			}
			for name, v := range want {
				if got := g.counter(name); got != v {
					t.Errorf("%s = %d, want %d", name, got, v)
				}
			}
		})
	}
}

// A stream whose end never comes (its worker VM died, the callback was lost) holds its slot
// until the lease period after the one it was admitted in has passed: from lease to 2 × lease.
func TestInFlightSlotFreedAfterLease(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRig(t, p, inFlightConfig, 2)
			vm := g.vms
			// monotonicStart is a multiple of the lease: periods start at 0 s, 10 s, 20 s...
			g.at(3 * time.Second)
			g.startInFlight(vm[0], "alice", true) // never ends
			g.startInFlight(vm[0], "alice", true) // never ends
			for _, at := range []time.Duration{3 * time.Second, 9 * time.Second, 10 * time.Second, 19*time.Second + 999*time.Millisecond} {
				g.at(at)
				g.endInFlight(g.startInFlight(vm[1], "alice", false))
			}
			g.at(20 * time.Second)
			g.completeInFlight(g.startInFlight(vm[1], "alice", true))
			g.completeInFlight(g.startInFlight(vm[1], "alice", true))
			s1, s2 := g.startInFlight(vm[1], "alice", true), g.startInFlight(vm[0], "alice", true)
			g.startInFlight(vm[1], "alice", false)
			g.completeInFlight(s1)
			g.completeInFlight(s2)
		})
	}
}

// All or nothing with a rate limit in the same rule: a request the full slots reject takes no
// token, and one the bucket rejects takes no slot.
func TestInFlightWithARateLimit(t *testing.T) {
	t.Parallel()
	config := `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}], "limits": [
	  {"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"},
	  {"algorithm": "concurrency", "max_in_flight": 1, "slot_timeout": "1m"}]}]}`
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRig(t, p, config, 2)
			vm := g.vms
			g.at(0)
			s := g.startInFlight(vm[0], "k", true)
			g.endInFlight(g.startInFlight(vm[1], "k", false)) // the slot is taken: 429, Retry-After 1
			g.completeInFlight(s)
			g.completeInFlight(g.startInFlight(vm[1], "k", true)) // the bucket kept its second token
			// The bucket is empty now: its own 429 (an hour), and the slot stays free.
			_, d, err := vm[0].StartStream(inFlightRequest("k"))
			if err != nil || d.Reply == nil || d.Reply.Header("retry-after") != "3600" {
				t.Fatalf("third: %v %+v, want 429 with Retry-After 3600", err, d.Reply)
			}
			if got := g.counter("tollgate.rule.r.in_flight_limited"); got != 1 {
				t.Errorf("in_flight_limited = %d, want 1", got)
			}
			if got := g.counter("tollgate.rule.r.limited"); got != 2 {
				t.Errorf("limited = %d, want 2", got)
			}
		})
	}
}

// A request its global limit rejects gives its slot back at once, and only once: with one
// request in flight and max_in_flight 2, after a global rejection exactly one more is admitted.
// The same for a request whose client goes away while the service is asked.
func TestInFlightSlotOfAGlobalRejection(t *testing.T) {
	t.Parallel()
	config := `{"rules": [{"name": "g", "key": [{"header": "x-api-key"}],
	  "limits": [{"algorithm": "concurrency", "max_in_flight": 2, "slot_timeout": "1m"}],
	  "global": {"cluster": "rls", "domain": "tollgate", "timeout": "60s"}}]}`
	rls := startScriptedRLS(t)
	g := newGlobalRig(t, host.Envoy139, config, map[string]string{"rls": rls.addr})
	vm := g.vms[0]
	rls.set(answerOK)
	first := g.startInFlight(vm, "k", true) // in flight until the end of the test
	rls.set(answerOverLimit(time.Second))
	_, d, err := vm.StartStream(inFlightRequest("k"))
	if err != nil || d.Reply == nil || d.Reply.Status != 429 {
		t.Fatalf("global rejection: %+v %v, want 429", d.Reply, err)
	}
	// Its client goes away while the service is asked: the slot comes back too.
	held := make(chan struct{}, 1)
	rls.set(func(ctx context.Context, _ *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		held <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-held
		cancel()
	}()
	s, _, err := vm.StartStreamContext(ctx, inFlightRequest("k"))
	if !errors.Is(err, host.ErrStreamReset) {
		t.Fatalf("got %v, want the stream reset while held", err)
	}
	g.endInFlight(s)
	rls.set(answerOK)
	second := g.startInFlight(vm, "k", true)
	g.startInFlight(vm, "k", false) // two in flight: first and second
	g.completeInFlight(second)
	g.completeInFlight(first)
	g.checkHealthy()
}
