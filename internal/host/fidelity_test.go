package host

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// The host fails where Envoy fails: each test drives the probe module into one thing Envoy
// mishandles or answers differently than a lenient host would, with the upstream source that
// says so.

// probeHost loads the probe module with mode as its configuration; adjust changes the options.
func probeHost(t *testing.T, mode string, adjust func(*Options)) (*Host, *logSink) {
	t.Helper()
	logs := &logSink{}
	opts := Options{PluginConfig: []byte(mode), Log: logs.add, CompilationCache: cache}
	if adjust != nil {
		adjust(&opts)
	}
	h, err := New(context.Background(), testModule(t, "probe"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h, logs
}

func startProbe(t *testing.T, mode string, adjust func(*Options)) (*VM, *Host, *logSink) {
	t.Helper()
	h, logs := probeHost(t, mode, adjust)
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return vm, h, logs
}

// envoy source/extensions/common/wasm/context.cc continueStream queues continueDecoding until the
// callback returns; source/common/http/filter_manager.cc commonContinue asserts that the filter
// was stopped ("Attempting to continue iteration while the IterationState is already Continue").
// Continuing inside the stream's own request-headers callback, or after the request went on, is
// reported as a misuse by the call that ran the callback.
func TestContinueOfARequestThatIsNotStoppedIsAMisuse(t *testing.T) {
	for _, c := range []struct{ mode, want string }{
		{"continue-in-headers", "inside the stream's own proxy_on_request_headers"},
		{"continue-late", "for a request that is not stopped"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			vm, h, _ := startProbe(t, c.mode, nil)
			calls := 0
			_, err := vm.Do(getRoot, upstream200(&calls))
			if !errors.Is(err, ErrMisuse) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrMisuse %q", err, c.want)
			}
			if len(h.Misuses()) != 1 {
				t.Fatalf("Misuses() = %v, want the one misuse", h.Misuses())
			}
		})
	}
}

// Envoy context.cc sendLocalResponse needs the stream's decoder callbacks: from a root context it
// answers Ok and sends nothing (the request would wait for a timeout).
func TestLocalReplyWithoutAStreamIsAMisuse(t *testing.T) {
	h, _ := probeHost(t, "reply-in-configure", nil)
	_, err := h.NewVM(context.Background())
	if !errors.Is(err, ErrMisuse) || !strings.Contains(err.Error(), "without a stream context") {
		t.Fatalf("got %v, want ErrMisuse for a local reply without a stream", err)
	}
}

// A second local reply finds the response started: envoy source/common/http/filter_manager.cc
// sendLocalReply can only reset the stream.
func TestSecondLocalReplyIsAMisuse(t *testing.T) {
	vm, _, _ := startProbe(t, "reply-twice", nil)
	calls := 0
	if _, err := vm.Do(getRoot, upstream200(&calls)); !errors.Is(err, ErrMisuse) || !strings.Contains(err.Error(), "after the response started") {
		t.Fatalf("got %v, want ErrMisuse for a reply after the response started", err)
	}
}

// A call answered after the response went out, whose callback answers the stream: Envoy can only
// reset it. The second call is held by the service until the response has passed.
func TestLocalReplyAfterTheResponseStartedIsAMisuse(t *testing.T) {
	echo := startEchoServer(t)
	vm, h, _ := startProbe(t, "grpc-pair:Call:GateFail", func(o *Options) { o.GrpcClusters = map[string]string{"rls": echo.addr} })
	s, d, err := vm.StartStream(getRoot)
	if err != nil || !d.Continue {
		t.Fatalf("the first answer must continue the request: %+v %v", d, err)
	}
	if _, err := s.ResponseHeaders(200, nil, true); err != nil {
		t.Fatal(err)
	}
	close(echo.gate)
	deadline := time.Now().Add(5 * time.Second)
	for vm.PendingCalls() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Finish(); !errors.Is(err, ErrMisuse) || !strings.Contains(err.Error(), "after the response started") {
		t.Fatalf("got %v, want ErrMisuse for a reply after the response started", err)
	}
	if len(h.Misuses()) != 1 {
		t.Fatalf("Misuses() = %v", h.Misuses())
	}
}

// Envoy context.cc continueStream drops the request header map at once: a header added after the
// continue, in the same callback, is refused (BadArgument) and never reaches the upstream.
func TestRequestHeadersAreGoneOnceContinued(t *testing.T) {
	echo := startEchoServer(t)
	vm, _, logs := startProbe(t, "grpc-late:Call", func(o *Options) { o.GrpcClusters = map[string]string{"rls": echo.addr} })
	var upstream [][2]string
	_, err := vm.Do(pathRequest("/p"), func(h [][2]string) (*Response, error) {
		upstream = h
		return &Response{Status: 200}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := headerOrEmpty(upstream, "x-echo"); v != "" || !logs.contains("probe: late x-echo: error status returned by host: bad argument") {
		t.Fatalf("x-echo %q reached the upstream; want it refused after the continue", v)
	}
}

// Envoy runs a callback's deferred actions in order (cpp-host addAfterVmCallAction): a continue
// and then a local reply send the request upstream and replace its response; a reply and then a
// continue answer alone (the reply ends the request before the continue runs).
func TestContinueAndLocalReplyRunInOrder(t *testing.T) {
	echo := startEchoServer(t)
	for _, c := range []struct {
		mode      string
		upstreams int
	}{
		{"grpc-continue-reply:Call", 1},
		{"grpc-reply-continue:Call", 0},
	} {
		t.Run(c.mode, func(t *testing.T) {
			vm, _, _ := startProbe(t, c.mode, func(o *Options) { o.GrpcClusters = map[string]string{"rls": echo.addr} })
			calls := 0
			resp, err := vm.Do(getRoot, upstream200(&calls))
			if err != nil {
				t.Fatal(err)
			}
			if calls != c.upstreams || resp.Status != 418 || string(resp.Body) != "teapot" {
				t.Fatalf("%d upstream calls, response %+v; want %d and the local 418", calls, resp, c.upstreams)
			}
		})
	}
}

// Envoy context.cc sendLocalResponse replaces each whitespace character of the details with '_'
// (StringUtil::replaceAllEmptySpace, source/common/common/utility.cc), without collapsing runs.
func TestResponseCodeDetailsAsEnvoyRewritesThem(t *testing.T) {
	vm, _, _ := startProbe(t, "details", nil)
	calls := 0
	resp, err := vm.Do(getRoot, upstream200(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Details != "_a_b__c_" {
		t.Fatalf("details %q, want %q", resp.Details, "_a_b__c_")
	}
}

// Local replies as envoy source/common/http/utility.cc prepareLocalReply shapes them: a gRPC
// request gets a trailers-only 200 (grpc-status from the module's grpc_status, else mapped from
// the HTTP status by source/common/grpc/status.cc), grpc-web is not gRPC, and HEAD gets no body.
func TestLocalReplyShapes(t *testing.T) {
	req := func(method, contentType string) Request {
		r := Request{Headers: [][2]string{{":method", method}, {":path", "/"}, {":authority", "a"}}, EndOfStream: true}
		if contentType != "" {
			r.Headers = append(r.Headers, [2]string{"content-type", contentType})
		}
		return r
	}
	steps := []struct {
		name   string
		mode   string
		req    Request
		status int
		want   map[string]string // headers; "" means absent
		body   string
	}{
		{"gRPC, the module's status", "reply-grpc:8", req("POST", "application/grpc"), 200,
			map[string]string{"content-type": "application/grpc", "grpc-status": "8", "grpc-message": "Too Many Requests: wait 100%25%0A",
				"retry-after": "1", "content-length": ""}, ""},
		{"gRPC with a suffix", "reply-grpc:16", req("POST", "application/grpc+proto"), 200,
			map[string]string{"grpc-status": "16"}, ""},
		{"gRPC, no status: 429 maps to UNAVAILABLE", "reply-grpc:-1", req("POST", "application/grpc"), 200,
			map[string]string{"grpc-status": "14"}, ""},
		{"gRPC-Web is not gRPC", "reply-grpc:8", req("POST", "application/grpc-web"), 429,
			map[string]string{"content-type": "text/plain", "grpc-status": "", "content-length": "29"}, "Too Many Requests: wait 100%\n"},
		{"plain HTTP", "reply-grpc:8", req("GET", ""), 429,
			map[string]string{"grpc-status": "", "content-length": "29", "retry-after": "1"}, "Too Many Requests: wait 100%\n"},
		{"HEAD: no body, the length kept", "reply-continue", req("HEAD", ""), 418,
			map[string]string{"content-length": "6", "content-type": "text/plain", "x-probe": "yes"}, ""},
		{"no body: no length, no type", "details", req("GET", ""), 418,
			map[string]string{"content-length": "", "content-type": ""}, ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			vm, _, _ := startProbe(t, st.mode, nil)
			calls := 0
			resp, err := vm.Do(st.req, upstream200(&calls))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != st.status || string(resp.Body) != st.body || !resp.LocalReply {
				t.Fatalf("status %d body %q, want %d %q", resp.Status, resp.Body, st.status, st.body)
			}
			for name, want := range st.want {
				got, present := hostcore.HeaderValue(resp.Headers, name)
				if (want == "") == present || got != want {
					t.Errorf("%s = %q (present %v), want %q", name, got, present, want)
				}
			}
		})
	}
}

// A cluster without a healthy host, or a GrpcService naming a cluster Envoy does not know: envoy
// source/common/grpc/async_client_impl.cc sendRaw returns nullptr once the stream was reset while
// it started, so context.cc grpcCall answers InternalFailure without writing the token, and
// onGrpcCloseWrapper, deferred until the callback returns, still calls the root context's
// proxy_on_grpc_close(root, token, 14).
func TestGrpcCallThatCannotStartFailsAtOnceAndClosesLater(t *testing.T) {
	for _, c := range []struct{ name, cluster string }{
		{"no healthy host", "sick"},
		// envoy_grpc {cluster_name: "zz"}, serialized: Envoy reads it as a GrpcService.
		{"unknown cluster in a GrpcService", "\x0a\x04\x0a\x02zz"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var events []TraceEvent
			vm, _, _ := startProbe(t, "grpc:Call:1000:"+c.cluster, func(o *Options) {
				o.GrpcClusters = map[string]string{"sick": "127.0.0.1:1"}
				o.GrpcUnhealthyClusters = []string{"sick"}
				o.Trace = func(e TraceEvent) {
					mu.Lock()
					defer mu.Unlock()
					if e.Name == "env.proxy_grpc_call" || (e.Callback && e.Depth == 0) {
						events = append(events, e)
					}
				}
			})
			root := vm.RootID()
			mu.Lock()
			events = nil
			mu.Unlock()
			calls := 0
			resp, err := vm.Do(getRoot, upstream200(&calls))
			if err != nil || resp.Status != 500 || !strings.Contains(resp.Header("x-error"), "internal failure") {
				t.Fatalf("got %+v %v, want the probe's 500 for a failed call", resp, err)
			}
			mu.Lock()
			defer mu.Unlock()
			var names []string
			for _, e := range events {
				names = append(names, e.Name)
			}
			want := "proxy_on_context_create proxy_on_request_headers env.proxy_grpc_call proxy_on_grpc_close proxy_on_response_headers proxy_on_delete"
			if got := strings.Join(names, " "); got != want {
				t.Fatalf("crossings %s\nwant      %s", got, want)
			}
			if call := events[2]; call.Result != uint32(wire.StatusInternalFailure) {
				t.Fatalf("proxy_grpc_call returned %d, want InternalFailure", call.Result)
			}
			if close := events[3]; len(close.Args) != 3 || close.Args[0] != uint64(root) || close.Args[1] != 5 || close.Args[2] != 14 {
				t.Fatalf("proxy_on_grpc_close%v, want (root %d, token 5, status 14)", close.Args, root)
			}
		})
	}
}

// The call belongs to the root context of the stream that made it (cpp-host src/exports.cc
// grpc_call: contextOrEffectiveContext()->root_context()), and its answer goes there, even when a
// configuration push gave the VM a newer root context meanwhile.
func TestGrpcAnswerGoesToTheRootContextThatOwnsTheCall(t *testing.T) {
	echo := startEchoServer(t)
	var mu sync.Mutex
	var receive []uint64
	h, _ := probeHost(t, "grpc:Gate", func(o *Options) {
		o.GrpcClusters = map[string]string{"rls": echo.addr}
		o.Trace = func(e TraceEvent) {
			if e.Name == "proxy_on_grpc_receive" {
				mu.Lock()
				receive = e.Args
				mu.Unlock()
			}
		}
	})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	oldRoot := vm.RootID()
	done := make(chan error, 1)
	go func() {
		_, d, err := vm.StartStream(getRoot)
		if err == nil && !d.Continue {
			err = errors.New("the request did not continue")
		}
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for vm.PendingCalls() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.Reconfigure(context.Background(), []byte("grpc:Gate")); err != nil {
		t.Fatal(err)
	}
	if vm.RootID() == oldRoot {
		t.Fatal("the push did not create a new root context")
	}
	close(echo.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(receive) == 0 || receive[0] != uint64(oldRoot) {
		t.Fatalf("proxy_on_grpc_receive%v, want the old root context %d first", receive, oldRoot)
	}
}

// Shared data of a vm_id lives as long as a base VM holding it (cpp-host src/vm_id_handle.cc,
// src/shared_data.cc deleteByVmId): here, as long as one of the hosts sharing the store is open.
func TestSharedDataGoesWithTheLastHostOfItsVMID(t *testing.T) {
	store := NewSharedData()
	open := func() *Host {
		h, err := New(context.Background(), testModule(t, "probe"), Options{VMID: "v", SharedData: store, CompilationCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b := open(), open()
	store.Set("v", "k", []byte("1"), 0)
	store.Set("other", "k", []byte("1"), 0)
	a.Close(context.Background())
	if store.Keys("v") != 1 {
		t.Fatal("the data went while another host of its vm_id was open")
	}
	b.Close(context.Background())
	b.Close(context.Background()) // a second close changes nothing
	if store.Keys("v") != 0 || store.Keys("other") != 1 {
		t.Fatalf("after the last host of vm_id v closed: %d keys of v (want 0), %d of other (want 1)", store.Keys("v"), store.Keys("other"))
	}
}

// growModule is a minimal proxy-wasm module, written out by hand: one page of memory, the ABI
// marker, malloc, and grow(pages), which returns memory.grow's result.
func growModule() []byte {
	section := func(id byte, content ...byte) []byte { return append([]byte{id, byte(len(content))}, content...) }
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	var exports []byte
	exports = append(exports, 4)
	exports = append(append(exports, name("memory")...), 0x02, 0)
	exports = append(append(exports, name("proxy_abi_version_0_2_1")...), 0x00, 0)
	exports = append(append(exports, name("malloc")...), 0x00, 1)
	exports = append(append(exports, name("grow")...), 0x00, 2)
	wasm := []byte{0x00, 'a', 's', 'm', 1, 0, 0, 0}
	wasm = append(wasm, section(1, 2, 0x60, 0, 0, 0x60, 1, 0x7f, 1, 0x7f)...) // () -> (), (i32) -> i32
	wasm = append(wasm, section(3, 3, 0, 1, 1)...)
	wasm = append(wasm, section(5, 1, 0, 1)...) // memory, at least one page, no maximum
	wasm = append(wasm, section(7, exports...)...)
	wasm = append(wasm, section(10, 3,
		2, 0, 0x0b, // marker: nothing
		5, 0, 0x41, 0x80, 0x08, 0x0b, // malloc: 1024
		6, 0, 0x20, 0, 0x40, 0, 0x0b, // grow: memory.grow(local 0)
	)...)
	return wasm
}

// V8 in cpp-host runs with --wasm_max_mem_pages set to 1 GiB of pages (src/v8/v8.cc,
// include/proxy-wasm/limits.h): a module cannot grow its memory past 16384 pages.
func TestMemoryCeilingIsV8s(t *testing.T) {
	h, err := New(context.Background(), growModule(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := vm.CallExport("grow", maxMemoryPages) // 1 + 16384 pages
	if err != nil {
		t.Fatal(err)
	}
	if int32(res[0]) != -1 {
		t.Fatalf("memory.grow past 16384 pages returned %d, want -1", int32(res[0]))
	}
	if pages := vm.Stats().MemoryPages; pages != 1 {
		t.Fatalf("memory is %d pages, want 1", pages)
	}
}

// The WASI functions answer what cpp-host's answer (src/exports.cc), stubs included: a lenient
// host that answered ENOSYS or a character device would let a module pass here and fail in Envoy.
func TestWASIStubsAnswerAsCppHost(t *testing.T) {
	vm, _, _ := startProbe(t, "", func(o *Options) { o.Profile = Envoy139 })
	funcs := map[string]hostFunc{}
	for _, f := range wasiFuncs() {
		funcs[f.name] = f
	}
	vm.mu.Lock()
	defer vm.mu.Unlock()
	buf, st := vm.allocate(64)
	if st != wire.StatusOK {
		t.Fatal(st)
	}
	steps := []struct {
		name string
		args []uint64
		want uint64
	}{
		{"fd_seek", []uint64{1, 0, 0, uint64(buf)}, errnoSuccess},
		{"fd_close", []uint64{3}, errnoSuccess},
		{"fd_read", []uint64{0, 0, 0, uint64(buf)}, errnoNosys},
		{"fd_fdstat_set_flags", []uint64{1, 0}, errnoNosys},
		{"fd_advise", []uint64{7, 0, 0, 0}, errnoSuccess},
		{"fd_allocate", []uint64{1, 0, 0}, errnoSuccess},
		{"fd_allocate", []uint64{7, 0, 0}, errnoBadf},
		{"fd_datasync", []uint64{2}, errnoSuccess},
		{"fd_fdstat_set_rights", []uint64{5, 0, 0}, errnoBadf},
		{"fd_filestat_get", []uint64{1, uint64(buf)}, errnoBadf},
		{"fd_pread", []uint64{1, 0, 0, 0, uint64(buf)}, errnoNosys},
		{"fd_readdir", []uint64{3, 0, 0, 0, uint64(buf)}, errnoNotdir},
		{"fd_renumber", []uint64{1, 2}, errnoNotsup},
		{"fd_renumber", []uint64{1, 5}, errnoBadf},
		{"fd_sync", []uint64{9}, errnoBadf},
		{"fd_tell", []uint64{1, uint64(buf)}, errnoSuccess},
		{"path_filestat_get", []uint64{3, 0, 0, 0, uint64(buf)}, errnoNotsup},
		{"path_open", []uint64{3, 0, 0, 0, 0, 0, 0, 0, uint64(buf)}, errnoNoent},
		{"path_readlink", []uint64{3, 0, 0, 0, 0, uint64(buf)}, errnoNotsup},
		{"sock_accept", []uint64{3, 0, uint64(buf)}, errnoNotsup},
		{"sock_recv", []uint64{3, 0, 0, 0, uint64(buf), uint64(buf) + 8}, errnoNotsup},
		{"sock_shutdown", []uint64{3, 0}, errnoNotsup},
		{"clock_res_get", []uint64{2, uint64(buf)}, errnoNotsup},
	}
	for _, st := range steps {
		stack := make([]uint64, 10)
		copy(stack, st.args)
		funcs[st.name].fn(vm, stack)
		if stack[0] != st.want {
			t.Errorf("%s%v = %d, want %d", st.name, st.args, stack[0], st.want)
		}
	}
	// fd_fdstat_get: file type 0 (cpp-host zeroes all but the write right).
	stack := []uint64{1, uint64(buf)}
	funcs["fd_fdstat_get"].fn(vm, stack)
	stat, _ := vm.read(buf, 24)
	if stack[0] != errnoSuccess || stat[0] != 0 || binary.LittleEndian.Uint64(stat[8:]) != 64 {
		t.Fatalf("fd_fdstat_get = %d, stat %v; want 0 with file type 0 and rights 64", stack[0], stat)
	}
}

// Envoy's failure_policy (source/extensions/common/wasm/wasm.cc): after a runtime error FAIL_CLOSED
// keeps failing, FAIL_OPEN lets requests through without the module, FAIL_RELOAD loads a new VM
// for a new stream once the backoff has passed, and shared data survives the reload.
func TestFailurePolicies(t *testing.T) {
	request := func(path string) Request {
		return Request{Headers: [][2]string{{":method", "GET"}, {":path", path}, {":authority", "a"}}, EndOfStream: true}
	}
	type step struct {
		at   time.Duration
		path string
		want string // x-hits of the answer, "upstream", or "failed"
	}
	cases := []struct {
		policy FailurePolicy
		steps  []step
	}{
		{FailClosed, []step{{0, "/", "1"}, {0, "/trap", "failed"}, {0, "/", "failed"}, {time.Hour, "/", "failed"}}},
		{FailOpen, []step{{0, "/", "1"}, {0, "/trap", "failed"}, {0, "/", "upstream"}, {time.Hour, "/", "upstream"}}},
		{FailReload, []step{
			{0, "/", "1"}, {0, "/", "2"},
			{500 * time.Millisecond, "/trap", "failed"},
			{900 * time.Millisecond, "/", "failed"}, // within the backoff of the load at 0
			{1000 * time.Millisecond, "/", "3"},     // reloaded; the count in shared data survived
			{1000 * time.Millisecond, "/trap", "failed"},
			{1999 * time.Millisecond, "/", "failed"},
			{2000 * time.Millisecond, "/", "4"},
		}},
	}
	for _, c := range cases {
		t.Run([]string{"FailClosed", "FailOpen", "FailReload"}[c.policy], func(t *testing.T) {
			clock := NewManualClock(time.Unix(1e9, 0), int64(time.Hour))
			vm, _, _ := startProbe(t, "count-or-trap", func(o *Options) {
				o.FailurePolicy, o.Clock, o.ReloadBackoff = c.policy, clock, time.Second
			})
			start := clock.Monotonic()
			for i, st := range c.steps {
				clock.SetMonotonic(start + int64(st.at))
				calls := 0
				resp, err := vm.Do(request(st.path), upstream200(&calls))
				got := "failed"
				switch {
				case err != nil && !errors.Is(err, ErrVMFailed):
					t.Fatalf("step %d: %v", i, err)
				case err != nil:
				case calls == 1:
					got = "upstream"
				default:
					got = resp.Header("x-hits")
				}
				if got != st.want {
					t.Fatalf("step %d (%v %s): got %s, want %s (err %v)", i, st.at, st.path, got, st.want, err)
				}
			}
			if c.policy == FailReload && vm.Generation() != 2 {
				t.Fatalf("generation %d, want 2 reloads", vm.Generation())
			}
		})
	}
}

// Every end of a stream reaches the module as proxy_on_delete (envoy
// source/extensions/common/wasm/context.cc Context::onDestroy, run from the connection manager's
// doDeferredStreamDestroy on every path): a complete response, a reset before the response or
// while it streams, and the module's own local reply, which first passes through
// proxy_on_response_headers as Envoy's encoder chain sends it.
func TestEveryStreamEndDeletesTheContext(t *testing.T) {
	for _, c := range []struct {
		name, mode string
		end        func(*Stream) error
		want       string
	}{
		{"complete", "", func(s *Stream) error {
			if _, err := s.ResponseHeaders(200, nil, true); err != nil {
				return err
			}
			return s.Finish()
		}, "proxy_on_request_headers proxy_on_response_headers proxy_on_delete"},
		{"reset before the response", "", (*Stream).Finish, "proxy_on_request_headers proxy_on_delete"},
		{"reset during the response", "", func(s *Stream) error {
			if _, err := s.ResponseHeaders(200, nil, false); err != nil {
				return err
			}
			return s.Finish()
		}, "proxy_on_request_headers proxy_on_response_headers proxy_on_delete"},
		{"local reply", "details", (*Stream).Finish, "proxy_on_request_headers proxy_on_response_headers proxy_on_delete"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var names []string
			vm, _, _ := startProbe(t, c.mode, func(o *Options) {
				o.Trace = func(e TraceEvent) {
					mu.Lock()
					defer mu.Unlock()
					if e.Callback && e.Depth == 0 && e.Name != "proxy_on_memory_allocate" {
						names = append(names, e.Name)
					}
				}
			})
			mu.Lock()
			names = nil
			mu.Unlock()
			s, d, err := vm.StartStream(getRoot)
			if err != nil {
				t.Fatal(err)
			}
			if (d.Reply != nil) != (c.mode == "details") {
				t.Fatalf("decision %+v", d)
			}
			if err := c.end(s); err != nil {
				t.Fatal(err)
			}
			if err := s.Finish(); err != nil { // a second end changes nothing
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			got := strings.TrimPrefix(strings.Join(names, " "), "proxy_on_context_create ")
			if got != c.want {
				t.Fatalf("callbacks %s\nwant      %s", got, c.want)
			}
		})
	}
}
