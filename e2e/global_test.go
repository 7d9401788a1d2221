package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// These tests drive the module's global limits against a scripted rate limit service (Envoy's
// RateLimitService over real gRPC), for the outcomes a real service rarely produces on demand:
// errors, timeouts, a request that goes away while held. e2e/global runs the real
// envoyproxy/ratelimit on Redis.

// scriptedRLS answers ShouldRateLimit with whatever answer returns, and records the requests.
type scriptedRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	addr string

	mu       sync.Mutex
	requests []*rlsv3.RateLimitRequest
	answer   func(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
}

func (s *scriptedRLS) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	s.mu.Lock()
	s.requests = append(s.requests, proto.Clone(req).(*rlsv3.RateLimitRequest))
	answer := s.answer
	s.mu.Unlock()
	return answer(ctx, req)
}

func (s *scriptedRLS) set(answer func(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)) {
	s.mu.Lock()
	s.answer = answer
	s.mu.Unlock()
}

func (s *scriptedRLS) taken() []*rlsv3.RateLimitRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.requests
	s.requests = nil
	return out
}

func startScriptedRLS(t *testing.T) *scriptedRLS {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptedRLS{addr: ln.Addr().String()}
	s.set(answerOK)
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, s)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return s
}

func answerOK(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

// answerOverLimit says OVER_LIMIT for a limit of 10 per minute that resets in reset.
func answerOverLimit(reset time.Duration) func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
				Code:               rlsv3.RateLimitResponse_OVER_LIMIT,
				CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 10, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
				DurationUntilReset: durationpb.New(reset),
			}}}, nil
	}
}

// newGlobalRig is a rig on the system clock (the module measures its calls' time) whose cluster
// "rls" is the scripted service.
func newGlobalRig(t *testing.T, profile host.Profile, config string, clusters map[string]string) *rig {
	t.Helper()
	g := &rig{t: t}
	h, err := host.New(context.Background(), module(t), host.Options{
		Profile: profile, PluginName: "tollgate", RootID: "tollgate", VMID: "tollgate",
		PluginConfig: []byte(config), CompilationCache: cache, GrpcClusters: clusters,
		Log: func(e host.LogEntry) {
			g.mu.Lock()
			g.logs = append(g.logs, e)
			g.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatalf("load module: %v", err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	g.host = h
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatalf("start VM: %v\nlogs:\n%s", err, g.logText())
	}
	g.vms = append(g.vms, vm)
	return g
}

func (g *rig) checkHealthy() {
	g.t.Helper()
	for _, vm := range g.vms {
		if err := vm.Err(); err != nil {
			g.t.Fatalf("VM %d failed: %v\nlogs:\n%s", vm.ID(), err, g.logText())
		}
		if n := vm.PendingCalls(); n != 0 {
			g.t.Fatalf("VM %d has %d calls pending", vm.ID(), n)
		}
	}
}

func globalStat(rule, outcome string) string { return "tollgate.rule." + rule + "." + outcome }

const globalConfigOK = `{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1h"}],
  "cost": {"header": "x-cost", "max": 3},
  "global": {"cluster": "rls", "domain": "tollgate", "entries": [{"key": "env", "value": "test"}], "timeout": "60s"}}],
  "rate_limit_headers": "x-ratelimit"}`

// OK lets the request go on; OVER_LIMIT answers 429 with Retry-After from duration_until_reset
// and the global limit in the rate-limit headers; and the request the service rejected gets back
// what the local limit charged.
func TestGlobalLimitAnswers(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			rls := startScriptedRLS(t)
			g := newGlobalRig(t, p, globalConfigOK, map[string]string{"rls": rls.addr})
			vm := g.vms[0]

			resp := g.request(vm, [2]string{"x-api-key", "alice"}, [2]string{"x-cost", "2"})
			if resp.Status != 200 {
				t.Fatalf("OK from the service: got %d %s", resp.Status, resp.Body)
			}
			sent := rls.taken()
			if len(sent) != 1 {
				t.Fatalf("%d calls, want 1", len(sent))
			}
			req := sent[0]
			entries := req.GetDescriptors()[0].GetEntries()
			if req.GetDomain() != "tollgate" || req.GetHitsAddend() != 2 || len(req.GetDescriptors()) != 1 || len(entries) != 3 ||
				entries[0].GetKey() != "env" || entries[0].GetValue() != "test" ||
				entries[1].GetKey() != "rule" || entries[1].GetValue() != "per-key" || entries[2].GetKey() != "key" {
				t.Fatalf("the service got %v", req)
			}
			aliceKey := entries[2].GetValue()
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(aliceKey) || strings.Contains(aliceKey, "alice") {
				t.Fatalf("key entry %q: want a hash of the key", aliceKey)
			}

			rls.set(answerOverLimit(2300 * time.Millisecond))
			resp = g.request(vm, [2]string{"x-api-key", "alice"})
			want := map[string]string{"retry-after": "3", "x-ratelimit-limit": "10", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "3"}
			for name, value := range want {
				if resp.Header(name) != value {
					t.Errorf("%s: %q, want %q", name, resp.Header(name), value)
				}
			}
			if resp.Status != 429 || string(resp.Body) != "Too Many Requests: retry after 3 s\n" {
				t.Fatalf("OVER_LIMIT: got %d %q", resp.Status, resp.Body)
			}
			if again := rls.taken(); len(again) != 1 || again[0].GetDescriptors()[0].GetEntries()[2].GetValue() != aliceKey {
				t.Fatalf("the same key must send the same hash: %v", again)
			}

			// Give-back: bob's bucket holds 3; five global rejections take nothing from it.
			for i := 0; i < 5; i++ {
				if resp := g.request(vm, [2]string{"x-api-key", "bob"}); resp.Status != 429 {
					t.Fatalf("bob %d: %d", i, resp.Status)
				}
			}
			rls.set(answerOK)
			var statuses []int
			for i := 0; i < 4; i++ {
				statuses = append(statuses, g.request(vm, [2]string{"x-api-key", "bob"}).Status)
			}
			if fmt.Sprint(statuses) != "[200 200 200 429]" {
				t.Fatalf("after the service relents bob gets %v, want [200 200 200 429]: the rejected requests kept their local charge", statuses)
			}
			if n := len(rls.taken()); n != 5+3 {
				t.Fatalf("%d calls for bob, want 8: a request the local limit rejects is not sent", n)
			}
			for name, want := range map[string]int64{
				globalStat("per-key", "admitted"): 4, globalStat("per-key", "limited"): 7,
				globalStat("per-key", "global_ok"): 4, globalStat("per-key", "global_over_limit"): 6,
				globalStat("per-key", "global_error"): 0, globalStat("per-key", "global_timeout"): 0,
			} {
				if got := g.counter(name); got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
			g.checkHealthy()
		})
	}
}

// globalConfigFailureModes has a rule per failure mode, both with the same timeout (TIMEOUT).
const globalConfigFailureModes = `{"rules": [
  {"name": "open", "match": {"path": {"prefix": "/open"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1h"}],
   "global": {"cluster": "rls", "domain": "tollgate", "timeout": "TIMEOUT"}},
  {"name": "closed", "match": {"path": {"prefix": "/closed"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}],
   "global": {"cluster": "rls", "domain": "tollgate", "timeout": "TIMEOUT", "failure_mode": "deny"}}]}`

// failureModesConfig is globalConfigFailureModes with the given timeout.
func failureModesConfig(timeout string) string {
	return strings.ReplaceAll(globalConfigFailureModes, "TIMEOUT", timeout)
}

func (g *rig) get(vm *host.VM, path, key string) *host.Response {
	g.t.Helper()
	req := host.Request{
		Headers:       [][2]string{{":method", "GET"}, {":path", path}, {":authority", "example.test"}, {"x-api-key", key}},
		SourceAddress: "192.0.2.10:40000", EndOfStream: true,
	}
	resp, err := vm.Do(req, okUpstream)
	if err != nil {
		g.t.Fatalf("request: %v\nlogs:\n%s", err, g.logText())
	}
	return resp
}

// An error or a timeout follows the rule's failure mode: allow lets the request through, deny
// answers 503 and gives back the local charge. The service's answers are events, not races with
// the clock: an error comes back well within a timeout of a minute, and a service that never
// answers (it waits for the call to end) can only be ended by the timeout of 40ms.
func TestGlobalFailureModes(t *testing.T) {
	t.Parallel()
	steps := []struct {
		name, timeout string
		answer        func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
		counted       string // the counter of the outcome
	}{
		{"error", "60s", func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
			return nil, status.Error(codes.Internal, "redis is gone")
		}, "global_error"},
		{"unknown code", "60s", func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
			return &rlsv3.RateLimitResponse{}, nil
		}, "global_error"},
		{"timeout", "40ms", func(ctx context.Context, _ *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, "global_timeout"},
	}
	for _, p := range profiles {
		for _, s := range steps {
			t.Run(p.String()+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				rls := startScriptedRLS(t)
				g := newGlobalRig(t, p, failureModesConfig(s.timeout), map[string]string{"rls": rls.addr})
				vm := g.vms[0]
				rls.set(s.answer)
				if resp := g.get(vm, "/open", "k"); resp.Status != 200 {
					t.Fatalf("failure_mode allow: got %d", resp.Status)
				}
				// closed has room for one request: each 503 must give it back, or the second
				// request would be rejected locally (429) without asking the service.
				for i := 0; i < 2; i++ {
					resp := g.get(vm, "/closed", "k")
					if resp.Status != 503 || !strings.Contains(string(resp.Body), "the global rate limit service failed (rate limit rule closed)") {
						t.Fatalf("failure_mode deny, request %d: got %d %q", i, resp.Status, resp.Body)
					}
				}
				want := map[string]int64{
					globalStat("open", "admitted"): 1, globalStat("closed", "admitted"): 0, globalStat("closed", "limited"): 0,
					globalStat("open", "global_error"): 0, globalStat("open", "global_timeout"): 0,
					globalStat("closed", "global_error"): 0, globalStat("closed", "global_timeout"): 0,
					"tollgate.internal_errors": 0,
				}
				want[globalStat("open", s.counted)], want[globalStat("closed", s.counted)] = 1, 2
				for name, want := range want {
					if got := g.counter(name); got != want {
						t.Errorf("%s = %d, want %d", name, got, want)
					}
				}
				g.checkHealthy()
			})
		}
	}
}

// A cluster the proxy does not know fails the call at once: the failure mode applies, and
// nothing is held.
func TestGlobalUnknownCluster(t *testing.T) {
	t.Parallel()
	g := newGlobalRig(t, host.Envoy139, failureModesConfig("40ms"), nil)
	if resp := g.get(g.vms[0], "/open", "k"); resp.Status != 200 {
		t.Fatalf("allow: got %d", resp.Status)
	}
	if resp := g.get(g.vms[0], "/closed", "k"); resp.Status != 503 {
		t.Fatalf("deny: got %d", resp.Status)
	}
	if got := g.counter(globalStat("open", "global_error")); got != 1 {
		t.Fatalf("global_error = %d, want 1", got)
	}
	if !strings.Contains(g.logText(), `cannot call cluster "rls"`) {
		t.Fatalf("the failure is not logged:\n%s", g.logText())
	}
	g.checkHealthy()
}

// A request that goes away while it is held leaks nothing: its stream's end cancels the call,
// counts it, and gives back the local charge. The client goes away once the service holds the
// call.
func TestGlobalStreamEndsWhileHeld(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	held := make(chan struct{}, 1)
	rls.set(func(ctx context.Context, _ *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		held <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	g := newGlobalRig(t, host.Envoy139, failureModesConfig("60s"), map[string]string{"rls": rls.addr})
	vm := g.vms[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-held
		cancel()
	}()
	s, _, err := vm.StartStreamContext(ctx, host.Request{
		Headers:       [][2]string{{":method", "GET"}, {":path", "/closed"}, {":authority", "a"}, {"x-api-key", "k"}},
		SourceAddress: "192.0.2.10:40000", EndOfStream: true,
	})
	if !errors.Is(err, host.ErrStreamReset) {
		t.Fatalf("got %v, want the stream reset while held", err)
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := g.counter(globalStat("closed", "global_cancelled")); got != 1 {
		t.Fatalf("global_cancelled = %d, want 1", got)
	}
	g.checkHealthy()
	rls.set(answerOK)
	if resp := g.get(vm, "/closed", "k"); resp.Status != 200 {
		t.Fatalf("the abandoned request kept the only token: got %d", resp.Status)
	}
}

// Two rules with global limits send two calls; one OVER_LIMIT rejects the request and cancels
// the call still out. The other call's service never answers and its timeout is a minute: a
// module that waited for it would count a timeout, and leave the call pending until then.
func TestGlobalTwoRules(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	rls.set(func(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		if ruleOf(req) == "slow" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return answerOverLimit(time.Second)(ctx, req)
	})
	g := newGlobalRig(t, host.Envoy139, `{"rules": [
	  {"name": "slow", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 5, "refill_tokens": 1, "refill_interval": "1h"}],
	   "global": {"cluster": "rls", "domain": "d", "timeout": "60s"}},
	  {"name": "fast", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 5, "refill_tokens": 1, "refill_interval": "1h"}],
	   "global": {"cluster": "rls", "domain": "d", "timeout": "60s"}}]}`, map[string]string{"rls": rls.addr})
	resp := g.get(g.vms[0], "/", "k")
	if resp.Status != 429 || resp.Header("retry-after") != "1" {
		t.Fatalf("got %d retry-after %q, want 429 with fast's Retry-After", resp.Status, resp.Header("retry-after"))
	}
	for name, want := range map[string]int64{
		globalStat("fast", "limited"): 1, globalStat("fast", "global_over_limit"): 1,
		globalStat("slow", "global_timeout"): 0, globalStat("slow", "global_error"): 0, globalStat("slow", "global_ok"): 0,
	} {
		if got := g.counter(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	g.checkHealthy() // no call is left pending: slow's was cancelled
}

func ruleOf(req *rlsv3.RateLimitRequest) string {
	for _, e := range req.GetDescriptors()[0].GetEntries() {
		if e.GetKey() == "rule" {
			return e.GetValue()
		}
	}
	return ""
}
