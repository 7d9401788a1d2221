package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tollgate-proxy/tollgate/e2e/scenario"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// Global limits with a lease, through the real module on the host with two worker VMs, a manual
// clock and a scripted rate limit service: grants, spending across VMs, expiry by ttl and by the
// service's window, the remembered OVER_LIMIT, failures with waiting requests, and requests
// that cost more than what is left.

// leaseConfig has one rule, "lease", with a lease of up to 4 tokens for TTL; the request's cost
// is read from x-cost (default 1). The local limit never binds.
func leaseConfig(ttl, failureMode string) string {
	return `{"rules": [{"name": "lease", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1000, "refill_tokens": 1, "refill_interval": "1h"}],
	  "cost": {"header": "x-cost", "max": 10},
	  "global": {"cluster": "rls", "domain": "d", "timeout": "60s", "failure_mode": "` + failureMode + `",
	    "lease": {"max_tokens": 4, "ttl": "` + ttl + `"}}}]}`
}

// newLeaseRig is a rig with two VMs on the manual clock whose cluster "rls" is the scripted
// service.
func newLeaseRig(t *testing.T, profile host.Profile, config string, rls *scriptedRLS) *rig {
	t.Helper()
	return newRigWith(t, profile, config, 2, rigOptions{adjust: func(o *host.Options) {
		o.GrpcClusters = map[string]string{"rls": rls.addr}
	}})
}

// grant answers OK for a limit of 1000 per hour with the given time until the window resets.
func grant(reset time.Duration) func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return func(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
				Code:               rlsv3.RateLimitResponse_OK,
				CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1000, Unit: rlsv3.RateLimitResponse_RateLimit_HOUR},
				LimitRemaining:     500,
				DurationUntilReset: durationpb.New(reset),
			}}}, nil
	}
}

// hits lists the hits_addend of the calls the service got since the last call.
func hits(rls *scriptedRLS) []uint32 {
	var out []uint32
	for _, req := range rls.taken() {
		out = append(out, req.GetHitsAddend())
	}
	return out
}

func leaseStat(kind string) string { return globalStat("lease", kind) }

// leaseRequest sends one request of key with the given cost through vm.
func (g *rig) leaseRequest(vm *host.VM, key string, cost int) *host.Response {
	g.t.Helper()
	return g.request(vm, [2]string{"x-api-key", key}, [2]string{"x-cost", fmt.Sprint(cost)})
}

func (g *rig) wantCounters(want map[string]int64) {
	g.t.Helper()
	for name, value := range want {
		if got := g.counter(name); got != value {
			g.t.Errorf("%s = %d, want %d", name, got, value)
		}
	}
}

// The lease grows from 1 while the key stays busy (up to max_tokens 4); what a grant leaves
// after its request goes to the pool both VMs spend, without calls, exactly: every token the
// service granted is spent once or still in the pool.
func TestLeaseGrantIsSpentByEveryVM(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			rls := startScriptedRLS(t)
			rls.set(grant(time.Hour))
			g := newLeaseRig(t, p, leaseConfig("1s", "allow"), rls)
			var calls [][]uint32
			for i := 0; i < 13; i++ {
				g.at(time.Duration(i) * time.Millisecond)
				if resp := g.leaseRequest(g.vms[i%2], "alice", 1); resp.Status != 200 {
					t.Fatalf("request %d: %d %s", i, resp.Status, resp.Body)
				}
				calls = append(calls, hits(rls))
			}
			// 1 (a new lease asks the cost), 1 (size 1, doubled after: the pool ran dry at once),
			// 2 (1 left), then 4 each (3 left).
			want := "[[1] [1] [2] [] [4] [] [] [] [4] [] [] [] [4]]"
			if got := fmt.Sprint(calls); got != want {
				t.Fatalf("hits_addend per request: %s, want %s", got, want)
			}
			g.wantCounters(map[string]int64{
				// 16 tokens granted: 13 spent, 3 still in the pool.
				leaseStat("admitted"): 13, leaseStat("global_ok"): 6, leaseStat(scenario.GlobalLeaseRequests): 6,
				leaseStat(scenario.GlobalLeaseTokens): 16, leaseStat(scenario.GlobalLeaseServed): 7, leaseStat(scenario.GlobalLeaseExpired): 0,
			})
			g.checkHealthy()
		})
	}
}

// Unspent tokens expire at the ttl, and halve the next lease; tokens of a window the service
// said ends sooner expire at its end.
func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	rls.set(grant(time.Hour))
	g := newLeaseRig(t, host.Envoy139, leaseConfig("1s", "allow"), rls)
	steps := []struct {
		at   time.Duration
		vm   int
		hits string
	}{
		{0, 0, "[1]"}, {1 * time.Millisecond, 1, "[1]"}, {2 * time.Millisecond, 0, "[2]"}, // 1 left until 1002 ms; size 4
		{1001 * time.Millisecond, 1, "[]"},  // the last one
		{1002 * time.Millisecond, 0, "[4]"}, // 3 left until 2002 ms
		{2002 * time.Millisecond, 1, "[2]"}, // the 3 expire, the size halves to 2: 1 left until 3002 ms
		{2500 * time.Millisecond, 0, "[]"},  // the last one
		{2500 * time.Millisecond, 1, "[2]"}, // size 4 after this one; 1 left until the window's end
		{2500 * time.Millisecond, 0, "[]"},
		{2600 * time.Millisecond, 0, "[4]"}, // 3 left until the window's end at 2900 ms
		{2900 * time.Millisecond, 1, "[2]"}, // the 3 expire at the window's end, before the ttl
	}
	for i, s := range steps {
		if s.at == 2500*time.Millisecond {
			rls.set(grant(300 * time.Millisecond)) // from here, the service's window ends 300 ms after each call
		}
		g.at(s.at)
		if resp := g.leaseRequest(g.vms[s.vm], "bob", 1); resp.Status != 200 {
			t.Fatalf("step %d: %d", i, resp.Status)
		}
		if got := fmt.Sprint(hits(rls)); got != s.hits {
			t.Fatalf("step %d at %v: hits_addend %s, want %s", i, s.at, got, s.hits)
		}
	}
	g.wantCounters(map[string]int64{leaseStat(scenario.GlobalLeaseExpired): 6, leaseStat(scenario.GlobalLeaseTokens): 18})
	g.checkHealthy()
}

// OVER_LIMIT is remembered until the service's window resets: the key's requests on every VM
// are rejected without a call, with Retry-After counting down to the reset.
func TestLeaseRemembersOverLimit(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			rls := startScriptedRLS(t)
			rls.set(answerOverLimit(2300 * time.Millisecond))
			g := newLeaseRig(t, p, leaseConfig("1s", "allow"), rls)
			steps := []struct {
				at         time.Duration
				vm, status int
				retryAfter string
				calls      int
			}{
				{0, 0, 429, "3", 1},
				{time.Millisecond, 1, 429, "3", 0},
				{1500 * time.Millisecond, 0, 429, "1", 0},
				{2299 * time.Millisecond, 1, 429, "1", 0},
				{2300 * time.Millisecond, 0, 200, "", 1}, // reset: asks again, and the service relents
			}
			for i, s := range steps {
				if s.status == 200 {
					rls.set(grant(time.Hour))
				}
				g.at(s.at)
				resp := g.leaseRequest(g.vms[s.vm], "carol", 1)
				if resp.Status != s.status || resp.Header("retry-after") != s.retryAfter {
					t.Fatalf("step %d at %v: %d Retry-After %q, want %d %q", i, s.at, resp.Status, resp.Header("retry-after"), s.status, s.retryAfter)
				}
				if n := len(rls.taken()); n != s.calls {
					t.Fatalf("step %d: %d calls, want %d", i, n, s.calls)
				}
			}
			g.wantCounters(map[string]int64{
				leaseStat("limited"): 4, leaseStat("global_over_limit"): 1, leaseStat(scenario.GlobalOverLimitRemembered): 3,
				leaseStat("admitted"): 1,
			})
			g.checkHealthy()
		})
	}
}

// blockingRLS holds every call until release, then answers it with answer.
type blockingRLS struct {
	release chan struct{}
	arrived chan struct{}
}

func holdCalls(rls *scriptedRLS, answer func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)) *blockingRLS {
	b := &blockingRLS{release: make(chan struct{}), arrived: make(chan struct{}, 100)}
	rls.set(func(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		b.arrived <- struct{}{}
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return answer(ctx, req)
	})
	return b
}

// waitPaused waits until vm holds n streams: the requests started have reached the module and
// wait for the service.
func waitPaused(t *testing.T, vm *host.VM, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for vm.PausedStreams() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams paused, want %d", vm.PausedStreams(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// concurrent sends the requests (vm index, key) at once and returns their statuses, in order.
func (g *rig) concurrent(started func(), requests ...int) []int {
	statuses := make([]int, len(requests))
	var wg sync.WaitGroup
	for i, vm := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := g.vms[vm].Do(host.Request{
				Headers: [][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "a"}, {"x-api-key", "dave"},
					{"x-cost", "1"}},
				SourceAddress: "192.0.2.10:40000", EndOfStream: true,
			}, okUpstream)
			if err != nil {
				g.t.Errorf("request %d: %v", i, err)
				return
			}
			statuses[i] = resp.Status
		}()
	}
	started()
	wg.Wait()
	return statuses
}

// While one VM's lease request for a key is in flight, that VM's other requests of the key wait
// for it instead of sending their own; another VM sends its own. A failure releases all the
// waiting requests together, by the failure mode.
func TestLeaseWaitersAreReleasedTogether(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name   string
		status int
	}{{"deny", 503}, {"allow", 200}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			rls := startScriptedRLS(t)
			block := holdCalls(rls, func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
				return nil, status.Error(codes.Internal, "redis is gone")
			})
			g := newLeaseRig(t, host.Envoy139, leaseConfig("1s", mode.name), rls)
			statuses := g.concurrent(func() {
				waitPaused(t, g.vms[0], 3)
				waitPaused(t, g.vms[1], 1)
				<-block.arrived
				<-block.arrived
				close(block.release)
			}, 0, 0, 0, 1)
			want := fmt.Sprint([]int{mode.status, mode.status, mode.status, mode.status})
			if got := fmt.Sprint(statuses); got != want {
				t.Fatalf("statuses %s, want %s", got, want)
			}
			if n := len(rls.taken()); n != 2 {
				t.Fatalf("%d calls, want 2: one per VM", n)
			}
			g.wantCounters(map[string]int64{leaseStat("global_error"): 2, leaseStat(scenario.GlobalLeaseRequests): 2})
			g.checkHealthy()
		})
	}
}

// Requests that waited and that the grant did not cover ask again, once, for all of them.
func TestLeaseWaitersBeyondTheGrantAskTogether(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	block := holdCalls(rls, grant(time.Hour))
	g := newLeaseRig(t, host.Envoy139, leaseConfig("1s", "deny"), rls)
	statuses := g.concurrent(func() {
		waitPaused(t, g.vms[0], 3)
		<-block.arrived
		close(block.release)
	}, 0, 0, 0)
	if got := fmt.Sprint(statuses); got != "[200 200 200]" {
		t.Fatalf("statuses %s", got)
	}
	// The first lease asks 1 (a new lease); the two it did not cover ask 2 together.
	if got := fmt.Sprint(hits(rls)); got != "[1 2]" {
		t.Fatalf("hits_addend %s, want [1 2]", got)
	}
	g.checkHealthy()
}

// A request that costs more than what is left asks for what it needs; what is left stays for
// cheaper requests.
func TestLeaseCostLargerThanWhatIsLeft(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	rls.set(grant(time.Hour))
	g := newLeaseRig(t, host.Envoy139, leaseConfig("1s", "allow"), rls)
	steps := []struct {
		vm, cost int
		hits     string
	}{
		{0, 1, "[1]"}, {1, 1, "[1]"}, {0, 1, "[2]"}, {1, 1, "[]"}, {0, 1, "[4]"}, // 3 left
		{1, 5, "[5]"}, // more than 3 and more than max_tokens: its cost
		{0, 2, "[]"}, {1, 1, "[]"}, {0, 1, "[4]"},
	}
	for i, s := range steps {
		g.at(time.Duration(i) * time.Millisecond)
		if resp := g.leaseRequest(g.vms[s.vm], "erin", s.cost); resp.Status != 200 {
			t.Fatalf("step %d: %d", i, resp.Status)
		}
		if got := fmt.Sprint(hits(rls)); got != s.hits {
			t.Fatalf("step %d (cost %d): hits_addend %s, want %s", i, s.cost, got, s.hits)
		}
	}
	g.checkHealthy()
}

// A request whose client goes away while it waits for another request's lease request gets its
// local charge back; the lease request still serves the others.
func TestLeaseWaiterGoesAway(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	block := holdCalls(rls, grant(time.Hour))
	// Two requests fit in the local limit.
	config := `{"rules": [{"name": "lease", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}],
	  "global": {"cluster": "rls", "domain": "d", "timeout": "60s", "lease": {"max_tokens": 4}}}]}`
	g := newLeaseRig(t, host.Envoy139, config, rls)
	vm := g.vms[0]
	req := host.Request{Headers: [][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "a"}, {"x-api-key", "frank"}},
		SourceAddress: "192.0.2.10:40000", EndOfStream: true}
	first := make(chan int, 1)
	go func() {
		resp, err := vm.Do(req, okUpstream)
		if err != nil {
			t.Error(err)
			first <- 0
			return
		}
		first <- resp.Status
	}()
	<-block.arrived
	waitPaused(t, vm, 1)
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		s, _, err := vm.StartStreamContext(ctx, req)
		if s != nil {
			if ferr := s.Finish(); ferr != nil && err == nil {
				err = ferr
			}
		}
		gone <- err
	}()
	waitPaused(t, vm, 2)
	cancel()
	if err := <-gone; !errors.Is(err, host.ErrStreamReset) {
		t.Fatalf("the request that went away: %v", err)
	}
	close(block.release)
	if status := <-first; status != 200 {
		t.Fatalf("the first request: %d", status)
	}
	// The second request's local charge came back: one more fits, then the local limit rejects.
	if resp := g.leaseRequest(vm, "frank", 1); resp.Status != 200 {
		t.Fatalf("after the give-back: %d", resp.Status)
	}
	if resp := g.leaseRequest(vm, "frank", 1); resp.Status != 429 {
		t.Fatalf("the local limit: %d", resp.Status)
	}
	g.checkHealthy()
}
