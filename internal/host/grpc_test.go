package host

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// echoServer is a gRPC server for any method: Call echoes the message, Fail fails with
// PERMISSION_DENIED, Block waits until the call ends (cancelled, or its deadline passed), Gate
// echoes and GateFail fails once the test closes gate.
type echoServer struct {
	addr      string
	calls     atomic.Int64
	cancelled atomic.Int64
	metadata  atomic.Value // metadata.MD of the last call
	gate      chan struct{}
	// blocked receives a value when a Block call arrives, ended its context's error when it ends.
	blocked chan struct{}
	ended   chan error
}

func startEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{addr: ln.Addr().String(), gate: make(chan struct{}), blocked: make(chan struct{}, 16), ended: make(chan error, 16)}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		e.calls.Add(1)
		md, _ := metadata.FromIncomingContext(stream.Context())
		e.metadata.Store(md)
		var in []byte
		if err := stream.RecvMsg(&in); err != nil {
			return err
		}
		method, _ := grpc.MethodFromServerStream(stream)
		switch method {
		case "/test.Echo/Fail":
			return status.Error(codes.PermissionDenied, "not you")
		case "/test.Echo/Gate":
			<-e.gate
		case "/test.Echo/GateFail":
			<-e.gate
			return status.Error(codes.PermissionDenied, "not you")
		case "/test.Echo/Block":
			e.blocked <- struct{}{}
			<-stream.Context().Done()
			if errors.Is(stream.Context().Err(), context.Canceled) {
				e.cancelled.Add(1)
			}
			e.ended <- stream.Context().Err()
			return stream.Context().Err()
		}
		out := append([]byte("echo "), in...)
		return stream.SendMsg(&out)
	}))
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return e
}

func grpcProbeVM(t *testing.T, mode string, clusters map[string]string) (*VM, *logSink) {
	t.Helper()
	logs := &logSink{}
	h, err := New(context.Background(), testModule(t, "probe"), Options{PluginConfig: []byte(mode), Log: logs.add,
		CompilationCache: cache, GrpcClusters: clusters})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return vm, logs
}

func pathRequest(path string) Request {
	return Request{Headers: [][2]string{{":method", "GET"}, {":path", path}, {":authority", "a"}}, SourceAddress: "198.51.100.7:1234", EndOfStream: true}
}

// A request held for a call goes on when the callback continues it, with the headers the
// callback added; tokens are Envoy's gRPC call ids, 5, 9, 13, … per VM.
func TestGrpcCallHoldsAndContinuesTheRequest(t *testing.T) {
	echo := startEchoServer(t)
	vm, logs := grpcProbeVM(t, "grpc:Call", map[string]string{"rls": echo.addr})
	for i, token := range []string{"5", "9", "13"} {
		var upstreamHeaders [][2]string
		resp, err := vm.Do(pathRequest("/p"+token), func(h [][2]string) (*Response, error) {
			upstreamHeaders = h
			return &Response{Status: 200}, nil
		})
		if err != nil {
			t.Fatalf("request %d: %v\n%v", i, err, logs.entries)
		}
		if resp.Status != 200 || headerOrEmpty(upstreamHeaders, "x-echo") != "echo /p"+token || headerOrEmpty(upstreamHeaders, "x-token") != token {
			t.Fatalf("request %d: status %d, upstream headers %q", i, resp.Status, upstreamHeaders)
		}
	}
	if md, _ := echo.metadata.Load().(metadata.MD); len(md.Get("x-probe")) != 1 {
		t.Fatalf("the call's initial metadata did not arrive: %v", md)
	}
	if n := vm.PendingCalls(); n != 0 {
		t.Fatalf("%d calls still pending", n)
	}
}

func headerOrEmpty(headers [][2]string, name string) string {
	v, _ := hostcore.HeaderValue(headers, name)
	return v
}

// A failed call reaches proxy_on_grpc_close with the status, and its message through
// proxy_get_status; a local reply sent from the callback goes out after it returns.
func TestGrpcFailureReachesTheCloseCallback(t *testing.T) {
	echo := startEchoServer(t)
	vm, _ := grpcProbeVM(t, "grpc:Fail", map[string]string{"rls": echo.addr})
	resp, err := vm.Do(pathRequest("/"), upstream200(new(int)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 502 || resp.Header("x-status") != "7" || resp.Header("x-message") != "not you" {
		t.Fatalf("got %d %q, want 502 with status 7 (PERMISSION_DENIED) and its message", resp.Status, resp.Headers)
	}
}

// Envoy's own timeout reaches the module as UNAVAILABLE, "upstream request timeout". The service
// never answers (Block), so the call can only end by its timeout of 30 ms.
func TestGrpcTimeout(t *testing.T) {
	echo := startEchoServer(t)
	vm, _ := grpcProbeVM(t, "grpc:Block:30", map[string]string{"rls": echo.addr})
	resp, err := vm.Do(pathRequest("/"), upstream200(new(int)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 502 || resp.Header("x-status") != "14" || resp.Header("x-message") != "upstream request timeout" {
		t.Fatalf("got %d %q, want 502 with status 14 and Envoy's timeout message", resp.Status, resp.Headers)
	}
}

// Nothing listening: UNAVAILABLE, as Envoy reports a cluster without a healthy host.
func TestGrpcUnreachableService(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	vm, _ := grpcProbeVM(t, "grpc:Call", map[string]string{"rls": addr})
	resp, err := vm.Do(pathRequest("/"), upstream200(new(int)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 502 || resp.Header("x-status") != "14" {
		t.Fatalf("got %d %q, want 502 with status 14", resp.Status, resp.Headers)
	}
}

// An unknown cluster fails the call at once (Envoy: ParseFailure); nothing is held.
func TestGrpcUnknownCluster(t *testing.T) {
	vm, _ := grpcProbeVM(t, "grpc:Call:100:nowhere", map[string]string{"rls": "127.0.0.1:1"})
	resp, err := vm.Do(pathRequest("/"), upstream200(new(int)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 500 || resp.Header("x-error") == "" {
		t.Fatalf("got %d %q, want the probe's 500 naming the error", resp.Status, resp.Headers)
	}
	if vm.PendingCalls() != 0 {
		t.Fatal("a call that failed to start is pending")
	}
}

// A cancelled call is forgotten: no callback, nothing pending.
func TestGrpcCancel(t *testing.T) {
	echo := startEchoServer(t)
	vm, _ := grpcProbeVM(t, "grpc:Cancel", map[string]string{"rls": echo.addr})
	resp, err := vm.Do(pathRequest("/"), upstream200(new(int)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || resp.Header("x-pending") != "0" || vm.PendingCalls() != 0 {
		t.Fatalf("got %d %q, %d pending; want nothing pending after the cancel", resp.Status, resp.Headers, vm.PendingCalls())
	}
}

// A client that goes away while its request is held resets the stream; the stream's end
// (proxy_on_delete) is where the module cancels what it waited for, and then nothing is left.
// The call has no timeout (0), and the client goes away once the service holds the call.
func TestStreamResetWhileHeld(t *testing.T) {
	echo := startEchoServer(t)
	vm, _ := grpcProbeVM(t, "grpc:Block:0", map[string]string{"rls": echo.addr})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-echo.blocked
		cancel()
	}()
	s, _, err := vm.StartStreamContext(ctx, pathRequest("/"))
	if !errors.Is(err, ErrStreamReset) {
		t.Fatalf("got %v, want ErrStreamReset", err)
	}
	if vm.PendingCalls() != 1 {
		t.Fatalf("%d calls pending before the stream ends, want 1", vm.PendingCalls())
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	if vm.PendingCalls() != 0 {
		t.Fatalf("%d calls pending after the stream ended: the module's call leaked", vm.PendingCalls())
	}
	if err := <-echo.ended; !errors.Is(err, context.Canceled) || echo.cancelled.Load() != 1 {
		t.Fatalf("the service saw the call end with %v, want it cancelled", err)
	}
	if err := vm.Err(); err != nil {
		t.Fatalf("the VM failed: %v", err)
	}
}

// A VM closed while a request is held ends the wait with an error instead of leaving it hanging.
// The call has no timeout (0): only the close can end the wait.
func TestCloseEndsHeldRequests(t *testing.T) {
	echo := startEchoServer(t)
	vm, _ := grpcProbeVM(t, "grpc:Block:0", map[string]string{"rls": echo.addr})
	done := make(chan error, 1)
	go func() {
		_, _, err := vm.StartStream(pathRequest("/"))
		done <- err
	}()
	<-echo.blocked // the module made the call, so the request is held
	_ = vm.Close(context.Background())
	if err := <-done; !errors.Is(err, ErrVMFailed) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("got %v, want ErrVMFailed naming the close", err)
	}
}

// proxy_grpc_call's service may be a serialized GrpcService or a cluster name; an unknown name is
// ParseFailure, a GrpcService without a target BadArgument.
func TestGrpcTarget(t *testing.T) {
	h := &Host{opts: Options{GrpcClusters: map[string]string{"rls": "127.0.0.1:8081"}}}
	// envoy_grpc {cluster_name: "rls"}: field 1 (message) holding field 1 (string).
	envoyGrpc := []byte{0x0a, 0x05, 0x0a, 0x03, 'r', 'l', 's'}
	for _, tt := range []struct {
		service []byte
		address string
		status  wire.Status
	}{
		{[]byte("rls"), "127.0.0.1:8081", wire.StatusOK},
		{envoyGrpc, "127.0.0.1:8081", wire.StatusOK},
		{[]byte("ratelimit"), "", wire.StatusParseFailure},
		{nil, "", wire.StatusBadArgument}, // empty bytes are an empty GrpcService
		{[]byte{0x0a, 0x06, 0x0a, 0x04, 'n', 'o', 'n', 'e'}, "", wire.StatusInternalFailure},
	} {
		address, st := h.grpcTarget(tt.service)
		if address != tt.address || st != tt.status {
			t.Errorf("%q: got %q %d, want %q %d", tt.service, address, st, tt.address, tt.status)
		}
	}
}
