package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// Panics through the real module: the filter built with -tags tollgate_faults panics where a
// request's x-tollgate-fault header says (internal/plugin/faults_on.go). Every exported callback recovers
// (internal/abi/callbacks_wasip1.go), so the VM never traps and serves the next request; a panic
// while deciding a request follows failure_mode and is counted and logged once.

func faultReq(point string) host.Request {
	return httpReq("GET", "/", peer, "x-api-key", "alice", "x-tollgate-fault", point)
}

func TestPanicWhileDecidingFollowsFailureMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"allow", "deny"} {
		t.Run(mode, func(t *testing.T) {
			g := newRigWith(t, host.Envoy133, failureConfig(mode), 1, rigOptions{wasm: faultModule(t)})
			vm := g.vms[0]
			upstreamCalls := 0
			upstream := func(h [][2]string) (*host.Response, error) {
				upstreamCalls++
				for _, kv := range h {
					if kv[0] == "x-tollgate-shadow-limited" {
						t.Errorf("the client's shadow marker reached the upstream: %q", h)
					}
				}
				return okUpstream(h)
			}
			for i := 0; i < 3; i++ {
				// The marker a client sent: the panic comes before the plugin looks for it.
				req := faultReq("request")
				req.Headers = append(req.Headers, [2]string{"x-tollgate-shadow-limited", "api"})
				resp := g.send(vm, req, upstream)
				if resp.Status != wantStatus(mode) {
					t.Fatalf("panicking request %d: status %d, want %d", i, resp.Status, wantStatus(mode))
				}
				if mode == "deny" && (!resp.LocalReply || upstreamCalls != 0) {
					t.Fatalf("deny: the request must be answered by the module, not forwarded: %+v", resp)
				}
				if mode == "allow" && upstreamCalls != i+1 {
					t.Fatalf("allow: the request must continue upstream")
				}
			}
			if err := vm.Err(); err != nil {
				t.Fatalf("the VM trapped: %v", err)
			}
			if v := g.counter("tollgate.internal_errors"); v != 3 {
				t.Errorf("tollgate.internal_errors = %d, want 3", v)
			}
			if n := g.countLogs("recovered panic while deciding a request"); n != 1 {
				t.Errorf("%d log lines for three panics, want 1:\n%s", n, g.logText())
			}
			// The next requests are decided normally; the panicking ones charged nothing.
			for i, want := range []int{200, 200, 200, 429} {
				if s := g.send(vm, keyReq("alice"), nil).Status; s != want {
					t.Fatalf("after the panics, request %d: %d, want %d", i, s, want)
				}
			}
		})
	}
}

// A panic in the response phase is recovered by the ABI layer: the response goes out, the VM
// keeps serving.
func TestPanicInResponsePhaseIsRecovered(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, failureConfig("deny"), 1, rigOptions{wasm: faultModule(t)})
	vm := g.vms[0]
	resp := g.send(vm, faultReq("response"), nil)
	if resp.Status != 200 || string(resp.Body) != "ok\n" {
		t.Fatalf("the upstream response must go out unchanged: %+v", resp)
	}
	if !strings.Contains(g.logText(), "recovered panic in proxy_on_response_headers: tollgate_faults: forced panic in OnHttpResponseHeaders") {
		t.Errorf("the recovered panic was not logged:\n%s", g.logText())
	}
	for i, want := range []int{200, 200, 429} {
		if s := g.send(vm, keyReq("alice"), nil).Status; s != want {
			t.Fatalf("after the panic, request %d: %d, want %d", i, s, want)
		}
	}
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
}

// A panic while creating the stream's context is recovered by the ABI layer: the VM keeps
// serving, and the stream, which then has no context, is let through.
func TestPanicCreatingTheStreamIsRecovered(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, failureConfig("allow"), 1, rigOptions{wasm: faultModule(t)})
	vm := g.vms[0]
	g.send(vm, faultReq("context"), nil) // arms the panic for the next stream
	if s := g.send(vm, keyReq("alice"), nil).Status; s != 200 {
		t.Fatalf("the stream whose context panicked: %d", s)
	}
	// The context is made when the request headers arrive, so the panic is that callback's.
	if !strings.Contains(g.logText(), "recovered panic in proxy_on_request_headers: tollgate_faults: forced panic in NewHttpContext") {
		t.Errorf("the recovered panic was not logged:\n%s", g.logText())
	}
	// Only the first request (which armed the fault) was charged.
	for i, want := range []int{200, 200, 429} {
		if s := g.send(vm, keyReq("alice"), nil).Status; s != want {
			t.Fatalf("after the panic, request %d: %d, want %d", i, s, want)
		}
	}
	if err := vm.Err(); err != nil {
		t.Fatal(err)
	}
}

// With failure_mode deny, a request whose stream context could not be created must not pass
// unlimited: a recovered panic follows the failure mode.
func TestPanicCreatingTheStreamFollowsFailureMode(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, failureConfig("deny"), 1, rigOptions{wasm: faultModule(t)})
	g.send(g.vms[0], faultReq("context"), nil)
	resp := g.send(g.vms[0], keyReq("alice"), nil)
	if resp.Status != 503 || g.counter("tollgate.internal_errors") != 1 {
		t.Fatalf("status %d (want 503), internal_errors %d (want 1)", resp.Status, g.counter("tollgate.internal_errors"))
	}
}

// The fault build is the product build plus the hooks: it loads in the minimum Envoy (host.New
// refuses anything else), imports everything the product does (its hooks use runtime/debug,
// which may add a WASI import or two), and its hooks do nothing to requests without the header.
func TestFaultModuleMatchesTheProduct(t *testing.T) {
	t.Parallel()
	imports := func(wasm []byte) map[string]bool {
		h, err := host.New(context.Background(), wasm, host.Options{Profile: minimumEnvoy, CompilationCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(context.Background())
		set := map[string]bool{}
		for _, name := range h.Imports() {
			set[name] = true
		}
		return set
	}
	product, faults := imports(module(t)), imports(faultModule(t))
	for name := range product {
		if !faults[name] {
			t.Errorf("the fault build lacks the product's import %s", name)
		}
	}
}
