package e2e

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// What clients see of Tollgate's local replies, through the real module in a host that shapes
// local replies as Envoy does (internal/hostcore localreply.go): gRPC clients get a trailers-only
// 200 with a grpc-status chosen per reason, every reply carries a response code details token,
// and a HEAD request gets no body.

const grpcConfig = `{"rules": [{"name": "api", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}],
  "cost": {"header": "x-cost", "max": 1}}]RESPONSE}`

func grpcReq(key string, headers ...string) host.Request {
	h := append([]string{"content-type", "application/grpc"}, headers...)
	if key != "" {
		h = append(h, "x-api-key", key)
	}
	return httpReq("POST", "/pkg.Service/Method", peer, h...)
}

func TestLocalRepliesToGrpcAndHTTPClients(t *testing.T) {
	t.Parallel()
	type want struct {
		status  int
		details string
		headers map[string]string // "" means absent
		body    string            // the whole body
	}
	steps := []struct {
		name     string
		response string // the configuration's response object, if any
		req      host.Request
		want     want
	}{
		{"gRPC, admitted", "", grpcReq("a"), want{200, "", map[string]string{"grpc-status": ""}, "ok\n"}},
		{"gRPC, limited: RESOURCE_EXHAUSTED", "", grpcReq("a"), want{200, "tollgate_rate_limited",
			map[string]string{"content-type": "application/grpc", "grpc-status": "8", "retry-after": "3600",
				"grpc-message": "Too Many Requests: retry after 3600 s", "content-length": ""}, ""}},
		{"gRPC, missing key: UNAUTHENTICATED", "", grpcReq(""), want{200, "tollgate_missing_key",
			map[string]string{"grpc-status": "16", "grpc-message": "Unauthorized: the request has no header x-api-key (rate limit rule api)"}, ""}},
		{"gRPC, invalid cost: INVALID_ARGUMENT", "", grpcReq("b", "x-cost", "two"), want{200, "tollgate_invalid_cost",
			map[string]string{"grpc-status": "3"}, ""}},
		{"gRPC with a codec suffix", "", grpcReq("a", "content-type", "application/grpc+proto"), want{200, "tollgate_rate_limited",
			map[string]string{"grpc-status": "8"}, ""}},
		{"HTTP, limited: no gRPC status", "", httpReq("GET", "/", peer, "x-api-key", "a"), want{429, "tollgate_rate_limited",
			map[string]string{"grpc-status": "", "content-type": "text/plain; charset=utf-8", "content-length": "38", "retry-after": "3600"},
			"Too Many Requests: retry after 3600 s\n"}},
		{"HEAD, limited: no body", "", httpReq("HEAD", "/", peer, "x-api-key", "a"), want{429, "tollgate_rate_limited",
			map[string]string{"content-length": "38", "retry-after": "3600"}, ""}},
		{"gRPC-Web is HTTP to Envoy", "", httpReq("POST", "/", peer, "content-type", "application/grpc-web", "x-api-key", "a"),
			want{429, "tollgate_rate_limited", map[string]string{"grpc-status": ""}, "Too Many Requests: retry after 3600 s\n"}},
		{"response.grpc_status", `, "response": {"grpc_status": 14}`, grpcReq("a"), want{200, "tollgate_rate_limited",
			map[string]string{"grpc-status": "14"}, ""}},
	}
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			rigs := map[string]*rig{}
			for i, st := range steps {
				g := rigs[st.response]
				if g == nil {
					g = newRig(t, p, strings.Replace(grpcConfig, "RESPONSE", st.response, 1), 1)
					rigs[st.response] = g
					// Use up key a's one token.
					if resp := g.send(g.vms[0], grpcReq("a"), nil); resp.Status != 200 || resp.LocalReply {
						t.Fatalf("the first request of a must be admitted: %+v", resp)
					}
					if st.name == "gRPC, admitted" {
						continue
					}
				}
				resp := g.send(g.vms[0], st.req, nil)
				w := st.want
				if resp.Status != w.status || resp.Details != w.details || string(resp.Body) != w.body {
					t.Fatalf("step %d (%s): status %d details %q body %q; want %d %q %q", i, st.name,
						resp.Status, resp.Details, resp.Body, w.status, w.details, w.body)
				}
				for name, want := range w.headers {
					if got := resp.Header(name); got != want {
						t.Fatalf("step %d (%s): %s = %q, want %q; headers %q", i, st.name, name, got, want, resp.Headers)
					}
				}
			}
			for _, g := range rigs {
				if m := g.host.Misuses(); len(m) != 0 {
					t.Fatalf("misuses: %v", m)
				}
			}
		})
	}
}

// Internal errors with failure_mode deny answer 503 with their own details; a gRPC client gets
// UNAVAILABLE, Envoy's mapping of 503, which is what a retry should follow.
func TestFailureDeniedReplies(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy139, `{"failure_mode": "deny", "rules": [{"name": "by-ip", "key": [{"client_ip": {}}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`, 1)
	g.host.SetPropertyFault(func(path []string) wire.Status { return wire.StatusInternalFailure })
	for _, c := range []struct {
		req         host.Request
		status      int
		grpcStatus  string
		bodyOrEmpty string
	}{
		{httpReq("GET", "/", peer), 503, "", "Service Unavailable: the rate limiter failed\n"},
		{httpReq("POST", "/", peer, "content-type", "application/grpc"), 200, "14", ""},
	} {
		resp := g.send(g.vms[0], c.req, nil)
		if resp.Status != c.status || resp.Details != "tollgate_failure_denied" || resp.Header("grpc-status") != c.grpcStatus ||
			string(resp.Body) != c.bodyOrEmpty {
			t.Fatalf("got %d %q grpc-status %q body %q", resp.Status, resp.Details, resp.Header("grpc-status"), resp.Body)
		}
	}
}

// The rate limit service's OVER_LIMIT and its failure with failure_mode deny, to a gRPC client.
func TestGlobalRepliesToGrpcClients(t *testing.T) {
	t.Parallel()
	rls := startScriptedRLS(t)
	g := newGlobalRig(t, host.Envoy139, failureModesConfig("60s"), map[string]string{"rls": rls.addr})
	grpc := func(path string) host.Request {
		return httpReq("POST", path, peer, "content-type", "application/grpc", "x-api-key", "k")
	}
	rls.set(answerOverLimit(5 * time.Second))
	resp := g.send(g.vms[0], grpc("/open"), nil)
	if resp.Status != 200 || resp.Details != "tollgate_global_rate_limited" || resp.Header("grpc-status") != "8" || resp.Header("retry-after") != "5" {
		t.Fatalf("over limit: %d %q grpc-status %q retry-after %q", resp.Status, resp.Details, resp.Header("grpc-status"), resp.Header("retry-after"))
	}
	rls.set(func(ctx context.Context, _ *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		return nil, errors.New("down")
	})
	resp = g.send(g.vms[0], grpc("/closed"), nil)
	if resp.Status != 200 || resp.Details != "tollgate_global_failure_denied" || resp.Header("grpc-status") != "14" {
		t.Fatalf("service failed, deny: %d %q grpc-status %q", resp.Status, resp.Details, resp.Header("grpc-status"))
	}
	g.checkHealthy()
}

// Every global call fails to start (a cluster without a healthy host: Envoy's proxy_grpc_call
// answers InternalFailure and later closes the token it never returned) and failure_mode allow:
// the request is decided in its own callback and continued once, by returning Continue. With
// deny it gets 503.
func TestGlobalClusterWithoutHealthyHosts(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRigWith(t, p, failureModesConfig("60s"), 1, rigOptions{adjust: func(o *host.Options) {
				o.GrpcClusters = map[string]string{"rls": "127.0.0.1:1"}
				o.GrpcUnhealthyClusters = []string{"rls"}
			}})
			calls := 0
			upstream := func(h [][2]string) (*host.Response, error) { calls++; return okUpstream(h) }
			for i := 0; i < 3; i++ {
				if resp := g.send(g.vms[0], httpReq("GET", "/open", peer, "x-api-key", "k"), upstream); resp.Status != 200 || calls != i+1 {
					t.Fatalf("allow, request %d: status %d after %d upstream calls", i, resp.Status, calls)
				}
			}
			resp := g.send(g.vms[0], httpReq("GET", "/closed", peer, "x-api-key", "k"), upstream)
			if resp.Status != 503 || resp.Details != "tollgate_global_failure_denied" || calls != 3 {
				t.Fatalf("deny: status %d details %q after %d upstream calls", resp.Status, resp.Details, calls)
			}
			if m := g.host.Misuses(); len(m) != 0 {
				t.Fatalf("misuses: %v", m)
			}
			for name, want := range map[string]int64{
				globalStat("open", "admitted"): 3, globalStat("open", "global_error"): 3,
				globalStat("closed", "global_error"): 1, "tollgate.internal_errors": 0,
			} {
				if got := g.counter(name); got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
			if err := g.vms[0].Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A host without the plugin_name property (a proxy-wasm host other than Envoy): the plugin
// starts, warns once, and namespaces its keys by plugin_root_id, or by a fixed name without one.
func TestKeysWithoutPluginName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ rootID, namespace string }{{"edge", "edge"}, {"", "tollgate"}} {
		t.Run("root id "+strconv.Quote(c.rootID), func(t *testing.T) {
			g := newRigWith(t, host.Envoy139, failureConfig("allow"), 0, rigOptions{adjust: func(o *host.Options) {
				o.PluginName, o.RootID = "", c.rootID
			}})
			g.host.SetPropertyFault(func(path []string) wire.Status {
				if path[0] == "plugin_name" || (path[0] == "plugin_root_id" && c.rootID == "") {
					return wire.StatusNotFound
				}
				return wire.StatusOK
			})
			vm := g.addVM()
			g.addVM()
			for i, want := range []int{200, 200, 200, 429} {
				if s := g.send(vm, keyReq("k"), nil).Status; s != want {
					t.Fatalf("request %d: %d, want %d", i, s, want)
				}
			}
			if n := g.countLogs("the host has no plugin_name property; the shared-data keys are namespaced by"); n != 2 {
				t.Errorf("%d warnings for two VMs, want one each:\n%s", n, g.logText())
			}
			prefix := "tollgate/v2/" + c.namespace + "/"
			for key := range g.host.SharedData().Entries("tollgate") {
				if !strings.HasPrefix(key, prefix) {
					t.Errorf("key %q is not under %q", key, prefix)
				}
			}
		})
	}
}

// A VM that trapped, under each of Envoy's failure policies, with the real module (its fault
// build traps on "x-tollgate-fault: trap"): FAIL_RELOAD loads a new VM after the backoff, and the
// buckets, in shared data, survive it; FAIL_OPEN lets requests through unlimited; FAIL_CLOSED
// fails them.
func TestFailurePolicyAfterATrap(t *testing.T) {
	t.Parallel()
	type step struct {
		at   time.Duration
		req  host.Request
		want string // a status, or "failed"
	}
	const config = `{"rules": [{"name": "api", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1h"}]}]}`
	alice, trap := keyReq("alice"), faultReq("trap")
	cases := []struct {
		policy host.FailurePolicy
		steps  []step
	}{
		{host.FailReload, []step{
			{0, alice, "200"}, {0, alice, "200"},
			{100 * time.Millisecond, trap, "failed"},
			{900 * time.Millisecond, alice, "failed"}, // the backoff runs from the load at 0
			{time.Second, alice, "200"},               // a new VM: the bucket kept its one token
			{time.Second, alice, "429"},
		}},
		// Capacity 3 with one token taken: four more requests pass only without the module.
		{host.FailOpen, []step{{0, alice, "200"}, {0, trap, "failed"}, {0, alice, "200"}, {0, alice, "200"}, {0, alice, "200"}, {0, alice, "200"}}},
		{host.FailClosed, []step{{0, alice, "200"}, {0, trap, "failed"}, {time.Hour, alice, "failed"}}},
	}
	for _, c := range cases {
		t.Run([]string{"FAIL_CLOSED", "FAIL_OPEN", "FAIL_RELOAD"}[c.policy], func(t *testing.T) {
			g := newRigWith(t, host.Envoy139, config, 1, rigOptions{wasm: faultModule(t), adjust: func(o *host.Options) {
				o.FailurePolicy, o.ReloadBackoff = c.policy, time.Second
			}})
			vm := g.vms[0]
			for i, st := range c.steps {
				g.at(st.at)
				calls := 0
				resp, err := vm.Do(st.req, func(h [][2]string) (*host.Response, error) { calls++; return okUpstream(h) })
				var got string
				switch {
				case errors.Is(err, host.ErrVMFailed):
					got = "failed"
				case err != nil:
					t.Fatalf("step %d: %v", i, err)
				default:
					got = strconv.Itoa(resp.Status)
				}
				if got != st.want {
					t.Fatalf("step %d at %v: got %s, want %s (calls %d)\nlogs:\n%s", i, st.at, got, st.want, calls, g.logText())
				}
			}
			if c.policy == host.FailReload && vm.Generation() != 1 {
				t.Fatalf("generation %d, want one reload", vm.Generation())
			}
		})
	}
}
