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
  "global": {"cluster": "rls", "domain": "tollgate", "entries": [{"key": "env", "value": "test"}], "timeout": "2s"}}],
  "rate_limit_headers": "x-ratelimit"}`

// OK lets the request go on; OVER_LIMIT answers 429 with Retry-After from duration_until_reset
// and the global limit in the rate-limit headers; and the request the service rejected gets back
// what the local limit charged.
func TestGlobalLimitAnswers(t *testing.T) {
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

const globalConfigFailureModes = `{"rules": [
  {"name": "open", "match": {"path": {"prefix": "/open"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1h"}],
   "global": {"cluster": "rls", "domain": "tollgate", "timeout": "40ms"}},
  {"name": "closed", "match": {"path": {"prefix": "/closed"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}],
   "global": {"cluster": "rls", "domain": "tollgate", "timeout": "40ms", "failure_mode": "deny"}}]}`

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
// answers 503 and gives back the local charge.
func TestGlobalFailureModes(t *testing.T) {
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			rls := startScriptedRLS(t)
			g := newGlobalRig(t, p, globalConfigFailureModes, map[string]string{"rls": rls.addr})
			vm := g.vms[0]
			steps := []struct {
				name   string
				answer func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
			}{
				{"error", func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
					return nil, status.Error(codes.Internal, "redis is gone")
				}},
				{"timeout", func(ctx context.Context, _ *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
					select {
					case <-time.After(time.Second):
					case <-ctx.Done():
					}
					return answerOK(ctx, nil)
				}},
				{"unknown code", func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
					return &rlsv3.RateLimitResponse{}, nil
				}},
			}
			for _, s := range steps {
				rls.set(s.answer)
				start := time.Now()
				if resp := g.get(vm, "/open", "k"); resp.Status != 200 {
					t.Fatalf("%s, failure_mode allow: got %d", s.name, resp.Status)
				}
				if took := time.Since(start); took > 500*time.Millisecond {
					t.Fatalf("%s: the request was held %v with a timeout of 40ms", s.name, took)
				}
				// closed has room for one request: a 503 must give it back each time.
				resp := g.get(vm, "/closed", "k")
				if resp.Status != 503 || !strings.Contains(string(resp.Body), "the global rate limit service failed (rate limit rule closed)") {
					t.Fatalf("%s, failure_mode deny: got %d %q", s.name, resp.Status, resp.Body)
				}
			}
			rls.set(answerOK)
			if resp := g.get(vm, "/closed", "k"); resp.Status != 200 {
				t.Fatalf("after three 503s the one local token of closed is gone: got %d", resp.Status)
			}
			for name, want := range map[string]int64{
				globalStat("open", "admitted"): 3, globalStat("open", "global_error"): 2, globalStat("open", "global_timeout"): 1,
				globalStat("closed", "global_error"): 2, globalStat("closed", "global_timeout"): 1, globalStat("closed", "admitted"): 1,
				globalStat("closed", "limited"): 0, "tollgate.internal_errors": 0,
			} {
				if got := g.counter(name); got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
			g.checkHealthy()
		})
	}
}

// A cluster the proxy does not know fails the call at once: the failure mode applies, and
// nothing is held.
func TestGlobalUnknownCluster(t *testing.T) {
	g := newGlobalRig(t, host.Envoy139, globalConfigFailureModes, nil)
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
// counts it, and gives back the local charge.
func TestGlobalStreamEndsWhileHeld(t *testing.T) {
	rls := startScriptedRLS(t)
	released := make(chan struct{})
	defer close(released)
	rls.set(func(ctx context.Context, _ *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		select {
		case <-released:
		case <-ctx.Done():
		}
		return answerOK(ctx, nil)
	})
	config := strings.ReplaceAll(globalConfigFailureModes, `"timeout": "40ms", "failure_mode": "deny"`, `"timeout": "10s", "failure_mode": "deny"`)
	g := newGlobalRig(t, host.Envoy139, config, map[string]string{"rls": rls.addr})
	vm := g.vms[0]
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
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
// the call still out.
func TestGlobalTwoRules(t *testing.T) {
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
	   "global": {"cluster": "rls", "domain": "d", "timeout": "5s"}},
	  {"name": "fast", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 5, "refill_tokens": 1, "refill_interval": "1h"}],
	   "global": {"cluster": "rls", "domain": "d", "timeout": "5s"}}]}`, map[string]string{"rls": rls.addr})
	start := time.Now()
	resp := g.get(g.vms[0], "/", "k")
	if resp.Status != 429 || resp.Header("retry-after") != "1" || time.Since(start) > 2*time.Second {
		t.Fatalf("got %d retry-after %q after %v, want 429 at once", resp.Status, resp.Header("retry-after"), time.Since(start))
	}
	if got := g.counter(globalStat("fast", "limited")); got != 1 {
		t.Fatalf("fast limited = %d, want 1", got)
	}
	g.checkHealthy()
}

func ruleOf(req *rlsv3.RateLimitRequest) string {
	for _, e := range req.GetDescriptors()[0].GetEntries() {
		if e.GetKey() == "rule" {
			return e.GetValue()
		}
	}
	return ""
}
