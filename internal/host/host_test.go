package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

var cache = wazero.NewCompilationCache()

// testModule is testdata/<name> built with the same flags as the product module.
func testModule(t *testing.T, name string) []byte {
	t.Helper()
	return testbuild.Module(t, "./internal/host/testdata/"+name)
}

type logSink struct {
	mu      sync.Mutex
	entries []LogEntry
}

func (l *logSink) add(e LogEntry) { l.mu.Lock(); l.entries = append(l.entries, e); l.mu.Unlock() }

func (l *logSink) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.entries {
		if strings.Contains(e.Message, s) {
			return true
		}
	}
	return false
}

func probeVM(t *testing.T, profile Profile, mode string, env ...string) (*VM, *logSink, error) {
	t.Helper()
	logs := &logSink{}
	h, err := New(context.Background(), testModule(t, "probe"), Options{
		Profile: profile, PluginConfig: []byte(mode), Env: env, Log: logs.add,
		CompilationCache: cache,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	vm, err := h.NewVM(context.Background())
	return vm, logs, err
}

var getRoot = Request{Headers: [][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "a"}}, SourceAddress: "198.51.100.7:1234", EndOfStream: true}

func upstream200(upstreamCalls *int) Upstream {
	return func([][2]string) (*Response, error) {
		*upstreamCalls++
		return &Response{Status: 200}, nil
	}
}

func TestImportsOutsideTheProfileAreRefused(t *testing.T) {
	wasm := testModule(t, "fsimport")
	_, err := New(context.Background(), wasm, Options{Profile: Envoy133, CompilationCache: cache})
	if !errors.Is(err, ErrImports) || !strings.Contains(err.Error(), "wasi_snapshot_preview1.path_filestat_get") {
		t.Fatalf("Envoy133: got %v, want ErrImports naming path_filestat_get", err)
	}
	h, err := New(context.Background(), wasm, Options{Profile: Envoy139, CompilationCache: cache})
	if err != nil {
		t.Fatalf("Envoy139 provides path_filestat_get, got %v", err)
	}
	h.Close(context.Background())
}

func TestRestrictedCallDuringInitializeTraps(t *testing.T) {
	for _, p := range []Profile{Envoy133, Envoy139} {
		_, _, err := probeVM(t, p, "", "PROBE_CALL_IN_INIT=1")
		if !errors.Is(err, ErrVMFailed) || !strings.Contains(err.Error(), "restricted_callback: env.proxy_get_shared_data") {
			t.Errorf("%v: got %v, want a restricted_callback trap", p, err)
		}
	}
}

func TestRestrictedCallInsideTheAllocatorTraps(t *testing.T) {
	h, err := New(context.Background(), testModule(t, "allocrestricted"), Options{PluginConfig: []byte("x"), CompilationCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	_, err = h.NewVM(context.Background())
	if !errors.Is(err, ErrVMFailed) || !strings.Contains(err.Error(), "restricted_callback: env.proxy_set_tick_period_milliseconds called inside the allocator") {
		t.Fatalf("got %v, want a restricted_callback trap from the allocator", err)
	}
}

func TestRejectedConfigurationFailsStart(t *testing.T) {
	_, logs, err := probeVM(t, Envoy133, "reject")
	if err == nil || !strings.Contains(err.Error(), "proxy_on_configure returned false") {
		t.Fatalf("got %v", err)
	}
	if !logs.contains("probe: rejecting configuration") {
		t.Error("the module's log line is missing")
	}
}

// Go's runtime reaches poll_oneoff during a collection: Envoy up to 1.38 answers ENOSYS and the
// runtime throws, which traps the VM; 1.39 answers success.
func TestPollOneoffProfiles(t *testing.T) {
	vm, _, err := probeVM(t, Envoy133, "gc")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	if _, err := vm.Do(getRoot, upstream200(&calls)); !errors.Is(err, ErrVMFailed) {
		t.Fatalf("Envoy133: got %v, want the VM to fail", err)
	}
	if _, err := vm.Do(getRoot, upstream200(&calls)); !errors.Is(err, ErrVMFailed) {
		t.Fatalf("a failed VM must stay failed, got %v", err)
	}
	if vm.Stats().PollOneoff == 0 {
		t.Error("poll_oneoff was not called")
	}

	vm, _, err = probeVM(t, Envoy139, "gc")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if resp, err := vm.Do(getRoot, upstream200(&calls)); err != nil || resp.Status != 200 {
			t.Fatalf("Envoy139 request %d: %v %v", i, resp, err)
		}
	}
}

func TestRecoveredPanicKeepsTheVMServing(t *testing.T) {
	vm, logs, err := probeVM(t, Envoy133, "panic")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for i := 0; i < 2; i++ {
		resp, err := vm.Do(getRoot, upstream200(&calls))
		if err != nil || resp.Status != 200 {
			t.Fatalf("request %d: %v %v", i, resp, err)
		}
	}
	if !logs.contains("recovered panic in proxy_on_request_headers: probe panic") {
		t.Error("the recovered panic was not logged")
	}
}

func TestLocalReplyWinsOverContinue(t *testing.T) {
	vm, _, err := probeVM(t, Envoy133, "reply-continue")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	resp, err := vm.Do(getRoot, upstream200(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 0 || resp.Status != 418 || !resp.LocalReply || string(resp.Body) != "teapot" || resp.Header("x-probe") != "yes" {
		t.Fatalf("got %+v after %d upstream calls; want the local 418 and no upstream call", resp, calls)
	}
}

func TestPausedRequestWithoutReplyIsReported(t *testing.T) {
	vm, _, err := probeVM(t, Envoy133, "pause")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	if _, err := vm.Do(getRoot, upstream200(&calls)); !errors.Is(err, ErrStreamPaused) || calls != 0 {
		t.Fatalf("got %v after %d upstream calls", err, calls)
	}
}

func TestRequestHeadersAreGoneAfterTheRequestPhase(t *testing.T) {
	vm, _, err := probeVM(t, Envoy133, "late-request-read")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	resp, err := vm.Do(getRoot, upstream200(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header("x-late-read"); !strings.Contains(got, "bad argument") {
		t.Fatalf("x-late-read = %q, want a bad argument error", got)
	}
}

func TestMetricIDsAndIntegerProperties(t *testing.T) {
	vm, _, err := probeVM(t, Envoy133, "metric-ids")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	resp, err := vm.Do(getRoot, upstream200(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if ids, port := resp.Header("x-ids"), resp.Header("x-port"); ids != "4,5,8,6" || port != "1234" {
		t.Fatalf("metric ids %q (want 4,5,8,6), source.port %q (want 1234, from 8 bytes little-endian)", ids, port)
	}
}

func TestSourceAddressProperty(t *testing.T) {
	vm, _, err := probeVM(t, Envoy133, "echo-source")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	resp, err := vm.Do(getRoot, upstream200(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header("x-source"); got != "198.51.100.7:1234" {
		t.Fatalf("x-source = %q", got)
	}
}

// Every WASI function the host provides has the signature of the WASI specification, checked
// against wazero's own implementation of it.
func TestWASISignaturesMatchTheSpecification(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	compiled, err := wasi_snapshot_preview1.NewBuilder(r).Compile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defs := compiled.ExportedFunctions()
	for _, f := range wasiFuncs() {
		def, ok := defs[f.name]
		if !ok {
			t.Errorf("%s is not a WASI preview1 function", f.name)
			continue
		}
		if !slices.Equal(def.ParamTypes(), f.params) || !slices.Equal(def.ResultTypes(), f.results) {
			t.Errorf("%s: host %s, spec %s", f.name, signature(f.params, f.results), signature(def.ParamTypes(), def.ResultTypes()))
		}
	}
	if got := len(ProvidedImports(Envoy133, "0_2_1")) - len(envFuncs()); got != 2*18 {
		t.Errorf("Envoy133 provides %d WASI imports under two module names, want 36", got)
	}
	// cpp-host include/proxy-wasm/exports.h FOR_ALL_WASI_FUNCTIONS (94091cd and later): 45.
	if got := len(ProvidedImports(Envoy139, "0_2_1")) - len(envFuncs()); got != 2*45 {
		t.Errorf("Envoy139 provides %d WASI imports under two module names, want 90", got)
	}
	for _, p := range []Profile{Envoy133, Envoy139} {
		for _, name := range ProvidedImports(p, "0_2_1") {
			if strings.HasSuffix(name, ".proc_raise") {
				t.Errorf("%v provides %s; no cpp-host version registers it", p, name)
			}
		}
	}
}

func TestManualClockStepsWallOnly(t *testing.T) {
	c := NewManualClock(time.Unix(100, 0), 5)
	c.StepWall(-time.Hour)
	c.Advance(time.Second)
	if c.Monotonic() != 5+int64(time.Second) || c.Wall() != time.Unix(100, 0).Add(-time.Hour+time.Second).UnixNano() {
		t.Fatalf("wall %d mono %d", c.Wall(), c.Monotonic())
	}
}

func TestManualClockStepsMonotonic(t *testing.T) {
	c := NewManualClock(time.Unix(100, 0), 5)
	c.StepMonotonic(-10)
	if c.Monotonic() != -5 || c.Wall() != time.Unix(100, 0).UnixNano() {
		t.Fatalf("wall %d mono %d", c.Wall(), c.Monotonic())
	}
	c.SetMonotonic(1 << 62)
	if c.Monotonic() != 1<<62 {
		t.Fatalf("mono %d", c.Monotonic())
	}
}

func TestPropertyFault(t *testing.T) {
	vm, _, err := probeVM(t, Envoy133, "echo-source")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	vm.host.SetPropertyFault(func(path []string) wire.Status {
		paths = append(paths, strings.Join(path, "."))
		return wire.StatusSerializationFailed
	})
	calls := 0
	resp, err := vm.Do(getRoot, upstream200(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header("x-source"); !strings.HasPrefix(got, "error: ") || len(paths) != 1 || paths[0] != "source.address" {
		t.Fatalf("x-source = %q after lookups %q; want an error for source.address", got, paths)
	}
	vm.host.SetPropertyFault(nil)
	if resp, err = vm.Do(getRoot, upstream200(&calls)); err != nil || resp.Header("x-source") != "198.51.100.7:1234" {
		t.Fatalf("after removing the fault: %v %v", resp, err)
	}
}

// A pushed configuration: the canary must accept it; each VM gets a new root context for it,
// and the old root context ends once its open stream has finished.
func TestReconfigure(t *testing.T) {
	var mu sync.Mutex
	var events []string
	h, err := New(context.Background(), testModule(t, "probe"), Options{
		PluginConfig: []byte("echo-source"), CompilationCache: cache,
		Trace: func(e TraceEvent) {
			if e.Callback && e.Depth == 0 {
				mu.Lock()
				events = append(events, e.Name)
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	oldRoot := vm.RootID()
	open, d, err := vm.StartStream(getRoot) // a stream of the old configuration stays open
	if err != nil || d.Reply == nil || d.Reply.Header("x-source") == "" {
		t.Fatalf("old configuration: %+v %v", d, err)
	}

	if err := h.Reconfigure(context.Background(), []byte("reject")); !errors.Is(err, ErrConfigRejected) {
		t.Fatalf("a configuration the canary rejects: got %v", err)
	}
	if vm.RootID() != oldRoot {
		t.Fatal("a rejected configuration must change nothing")
	}

	mu.Lock()
	events = nil
	mu.Unlock()
	if err := h.Reconfigure(context.Background(), []byte("reply-continue")); err != nil {
		t.Fatal(err)
	}
	newRoot := vm.RootID()
	if newRoot == oldRoot {
		t.Fatal("the new configuration must get a new root context")
	}
	calls := 0
	resp, err := vm.Do(getRoot, upstream200(&calls))
	if err != nil || resp.Status != 418 {
		t.Fatalf("new configuration: %v %v", resp, err)
	}
	mu.Lock()
	doneBefore := strings.Count(strings.Join(events, " "), "proxy_on_done")
	mu.Unlock()
	if err := open.Finish(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(events, " ")
	mu.Unlock()
	// The canary: create, vm_start, configure, delete (the module exports no proxy_on_done or
	// proxy_on_log, which Envoy then skips). The worker: a new root context configured; the old
	// one ends only after its stream. The local reply's body passes through the body callback.
	if !strings.HasPrefix(got, "proxy_on_context_create proxy_on_vm_start proxy_on_configure proxy_on_delete "+
		"proxy_on_context_create proxy_on_vm_start proxy_on_configure ") {
		t.Fatalf("callbacks %s", got)
	}
	if after := strings.Count(got, "proxy_on_done"); after != doneBefore || !strings.HasSuffix(got,
		"proxy_on_response_headers proxy_on_response_body proxy_on_delete proxy_on_delete proxy_on_delete") {
		t.Fatalf("the old root context must end after its last stream: %s", got)
	}
	vm2, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := vm2.Do(getRoot, upstream200(&calls)); err != nil || resp.Status != 418 {
		t.Fatalf("a VM started after the push must get the new configuration: %v %v", resp, err)
	}
}
