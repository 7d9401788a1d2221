package host

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// gRPC callouts with Envoy's semantics (envoy source/extensions/common/wasm/context.cc grpcCall,
// onGrpcReceiveWrapper, onGrpcCloseWrapper, grpcCancel; proxy-wasm-cpp-host src/exports.cc
// grpc_call, include/proxy-wasm/wasm.h nextGrpcCallId), on real gRPC connections:
//
//   - proxy_grpc_call's service is a serialized envoy.config.core.v3.GrpcService if it parses as
//     one, else a cluster name; an unknown cluster is ParseFailure. Clusters are mapped to
//     addresses by Options.GrpcClusters; one connection per cluster serves every VM of the host,
//     as Envoy's cluster manager pools them.
//   - The call belongs to the plugin's root context whichever context made it; tokens count per
//     VM 5, 9, 13, … (call ids have the low two bits 01). The call outlives the stream that made
//     it.
//   - The answer comes back on the VM's own thread, never inside another callback: on success
//     proxy_on_grpc_receive(root, token, size) with the message in buffer GRPC_CALL_MESSAGE (5),
//     on failure proxy_on_grpc_close(root, token, status) with the status message in
//     proxy_get_status. A unary call gets one of the two, never both.
//   - Envoy's own timeout reaches the module as status 14 (UNAVAILABLE) "upstream request
//     timeout": the async client's router answers a timed-out gRPC request with a local 504,
//     which gRPC maps to UNAVAILABLE. Timeout 0 means none.
//   - proxy_grpc_cancel (and proxy_grpc_close, for a unary call) forget the call: no callback.
//   - A stream the module stopped while a call it made is in flight stays paused until a callback
//     continues it (proxy_set_effective_context, then proxy_continue_stream) or answers it
//     (proxy_send_local_response); both take effect after that callback returns. The local
//     answer then passes through proxy_on_response_headers, as Envoy's encoder chain does.

// ErrStreamReset is returned by StartStreamContext when the context ends while the module holds
// the request: the client went away, and the stream is reset.
var ErrStreamReset = errors.New("the stream was reset while the module held it")

// grpcState is a VM's part of the gRPC emulation.
type grpcState struct {
	ids   hostcore.GrpcCallIDs
	calls map[uint32]*grpcCall // calls in flight
	// message is the response readable as GRPC_CALL_MESSAGE during proxy_on_grpc_receive.
	message    []byte
	hasMessage bool
	// status and statusMessage are what proxy_get_status reports: the last call's.
	status        uint32
	statusMessage string
	// paused are the streams stopped while a call they made is in flight, by context id.
	paused map[uint32]*pausedStream
}

type grpcCall struct {
	cancel context.CancelFunc
	stream *Stream // the stream current when the call was made, or nil
	// root is the root context that owns the call and gets its callback: the stream's parent,
	// even after a reconfiguration gave the VM a newer one (cpp-host src/exports.cc grpc_call
	// uses contextOrEffectiveContext()->root_context()).
	root uint32
}

type pausedStream struct {
	stream *Stream
	resume chan streamResult // buffered: settling never blocks
}

type streamResult struct {
	decision Decision
	err      error
}

// grpcConns are the host's connections, one per cluster.
type grpcConns struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (c *grpcConns) get(address string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.conns[address]; ok {
		return conn, nil
	}
	conn, err := grpc.NewClient(address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Reconnect quickly, as Envoy's connection pool does on the next request, so that a
		// service that comes back is used again within a second.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		return nil, err
	}
	if c.conns == nil {
		c.conns = map[string]*grpc.ClientConn{}
	}
	c.conns[address] = conn
	return conn, nil
}

func (c *grpcConns) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// GrpcClusters lists the clusters the host can call, sorted.
func (h *Host) GrpcClusters() []string {
	names := make([]string, 0, len(h.opts.GrpcClusters))
	for name := range h.opts.GrpcClusters {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// contextRoot is the root context of the context making a call: the current stream's, else the
// root context whose callback runs.
func (vm *VM) contextRoot() uint32 {
	if vm.current != nil {
		return vm.current.root
	}
	if vm.activeRoot != 0 {
		return vm.activeRoot
	}
	return vm.rootID
}

// grpcTarget resolves proxy_grpc_call's service argument to an address.
func (h *Host) grpcTarget(service []byte) (string, wire.Status) {
	var parsed corev3.GrpcService
	if err := proto.Unmarshal(service, &parsed); err == nil {
		switch {
		case parsed.GetEnvoyGrpc() != nil:
			address, ok := h.opts.GrpcClusters[parsed.GetEnvoyGrpc().GetClusterName()]
			if !ok {
				// Envoy creates the client without checking the cluster and fails the send.
				return "", wire.StatusInternalFailure
			}
			return address, wire.StatusOK
		case parsed.GetGoogleGrpc().GetTargetUri() != "":
			return parsed.GetGoogleGrpc().GetTargetUri(), wire.StatusOK
		}
		return "", wire.StatusBadArgument // no target: the client cannot be created
	}
	address, ok := h.opts.GrpcClusters[string(service)]
	if !ok {
		return "", hostcore.UnknownClusterStatus
	}
	return address, wire.StatusOK
}

// proxy_grpc_call(service, service_size, service_name, service_name_size, method, method_size,
// metadata, metadata_size, message, message_size, timeout_ms, token_ptr).
func proxyGrpcCall(vm *VM, stack []uint64) {
	arg := func(i int) ([]byte, bool) { return vm.read(uint32(stack[i]), uint32(stack[i+1])) }
	service, ok1 := arg(0)
	serviceName, ok2 := arg(2)
	method, ok3 := arg(4)
	rawMetadata, ok4 := arg(6)
	message, ok5 := arg(8)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	timeout, tokenPtr := time.Duration(uint32(stack[10]))*time.Millisecond, uint32(stack[11])
	address, st := vm.host.grpcTarget(service)
	root := vm.contextRoot()
	if st == wire.StatusInternalFailure || (st == wire.StatusOK && vm.host.unhealthy(service)) {
		// The call fails inside sendRaw (a GrpcService naming an unknown cluster, or a cluster
		// without a healthy host): the token is spent but never written, and the close arrives
		// once the current callback has returned.
		message := hostcore.GrpcNoHealthyUpstream
		if st == wire.StatusInternalFailure {
			message = hostcore.GrpcClusterNotAvailable
		}
		token := vm.nextGrpcToken()
		vm.afterCallback(func() { vm.closeUnsentCall(root, token, message) })
		ret(stack, wire.StatusInternalFailure)
		return
	}
	if st != wire.StatusOK {
		ret(stack, st)
		return
	}
	conn, err := vm.host.grpc.get(address)
	if err != nil {
		ret(stack, wire.StatusBadArgument)
		return
	}
	pairs, _ := hostcore.DecodePairs(rawMetadata) // malformed pairs are no metadata, as in cpp-host
	md := metadata.MD{}
	for _, p := range pairs {
		md.Append(hostcore.Lower(p[0]), p[1])
	}
	ctx, cancel := callContext(timeout)
	token := vm.nextGrpcToken()
	if vm.grpc.calls == nil {
		vm.grpc.calls = map[uint32]*grpcCall{}
	}
	vm.grpc.calls[token] = &grpcCall{cancel: cancel, stream: vm.current, root: root}
	go vm.runGrpcCall(metadata.NewOutgoingContext(ctx, md), token, conn, "/"+string(serviceName)+"/"+string(method), message)
	// cpp-host writes the token after the call has started.
	if !vm.writeU32(tokenPtr, token) {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	ret(stack, wire.StatusOK)
}

// nextGrpcToken hands out the next gRPC call id (hostcore.GrpcCallIDs).
func (vm *VM) nextGrpcToken() uint32 { return vm.grpc.ids.Next() }

// unhealthy reports whether service names a cluster of Options.GrpcUnhealthyClusters.
func (h *Host) unhealthy(service []byte) bool {
	cluster := string(service)
	var parsed corev3.GrpcService
	if err := proto.Unmarshal(service, &parsed); err == nil && parsed.GetEnvoyGrpc() != nil {
		cluster = parsed.GetEnvoyGrpc().GetClusterName()
	}
	for _, c := range h.opts.GrpcUnhealthyClusters {
		if c == cluster {
			return true
		}
	}
	return false
}

// closeUnsentCall delivers the close of a call that failed while proxy_grpc_call ran: UNAVAILABLE,
// with "no healthy upstream" (the router's answer for a cluster without a healthy host) or
// "Cluster not available" (source/common/grpc/async_client_impl.cc initialize).
func (vm *VM) closeUnsentCall(root, token uint32, message string) {
	current := vm.current
	vm.current = nil
	defer func() { vm.current = current }()
	vm.grpc.status, vm.grpc.statusMessage = hostcore.GrpcUnavailable, message
	err := vm.callAs(root, "proxy_on_grpc_close", 0, uint64(root), uint64(token), uint64(hostcore.GrpcUnavailable))
	vm.grpc.statusMessage = ""
	vm.current = nil
	vm.settlePaused(err)
}

// callContext bounds a call by its timeout; 0 is none.
func callContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(context.Background(), timeout)
	}
	return context.WithCancel(context.Background())
}

// rawCodec passes messages through as the module serialized them.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func (vm *VM) runGrpcCall(ctx context.Context, token uint32, conn *grpc.ClientConn, method string, message []byte) {
	var response []byte
	err := conn.Invoke(ctx, method, &message, &response, grpc.ForceCodec(rawCodec{}))
	switch {
	case err == nil:
		vm.deliverGrpc(token, 0, "", response)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded && nearDeadline(ctx):
		// The server may see the deadline (grpc-timeout) pass a moment before the client does
		// and reset the call; either way it is the call's timeout, which Envoy reports itself.
		vm.deliverGrpc(token, hostcore.GrpcUnavailable, hostcore.GrpcTimeoutMessage, nil)
	case errors.Is(ctx.Err(), context.Canceled):
		// Cancelled by the module or the host: nothing is delivered.
	default:
		s := status.Convert(err)
		vm.deliverGrpc(token, uint32(s.Code()), s.Message(), nil)
	}
}

// nearDeadline reports whether the call's deadline has (all but) passed.
func nearDeadline(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < 10*time.Millisecond
}

// deliverGrpc runs the callback of an answered call on the VM, then what the callback asked for
// the paused streams.
func (vm *VM) deliverGrpc(token, code uint32, message string, response []byte) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	call, ok := vm.grpc.calls[token]
	if !ok || vm.failed != nil {
		return
	}
	delete(vm.grpc.calls, token)
	call.cancel()
	var err error
	if code == 0 {
		vm.grpc.message, vm.grpc.hasMessage = response, true
		err = vm.callAs(call.root, "proxy_on_grpc_receive", 0, uint64(call.root), uint64(token), uint64(len(response)))
		vm.grpc.message, vm.grpc.hasMessage = nil, false
	} else {
		vm.grpc.status, vm.grpc.statusMessage = code, message
		err = vm.callAs(call.root, "proxy_on_grpc_close", 0, uint64(call.root), uint64(token), uint64(code))
		vm.grpc.statusMessage = ""
	}
	vm.settlePaused(err)
	vm.strandPaused()
}

// callAs runs a root context's callback; the effective context it sets lasts for the callback
// only.
func (vm *VM) callAs(root uint32, name string, def uint64, args ...uint64) error {
	saved := vm.activeRoot
	vm.activeRoot = root
	_, err := vm.call(name, def, args...)
	vm.activeRoot = saved
	vm.leaveRootCallback()
	return err
}

// leaveRootCallback ends what a root context's callback (a tick, a gRPC answer) made effective:
// the effective context, and a paused stream's headers, last for the callback only.
func (vm *VM) leaveRootCallback() {
	vm.current = nil
	for _, p := range vm.grpc.paused {
		p.stream.access = hostcore.MapAccess{}
	}
}

// settlePaused carries out what the last callback asked for the paused streams, as Envoy does
// once a callback returns, in the order it was asked: a local reply (passed through the response
// phase), continuing, or both (the request goes upstream, then the reply replaces the response).
// A failed VM ends them all with its error; a misuse is reported on the first stream settled.
func (vm *VM) settlePaused(err error) {
	for id, p := range vm.grpc.paused {
		s := p.stream
		var r streamResult
		switch {
		case err != nil:
			r.err = err
		case s.reply != nil:
			if s.continued && s.continuedFirst {
				r.decision = Decision{Continue: true, RequestHeaders: s.requestHeaders}
			}
			r.decision, r.err = s.sendReply(r.decision)
		case s.continued:
			r.decision = Decision{Continue: true, RequestHeaders: s.requestHeaders}
		default:
			continue
		}
		if r.err == nil {
			r.err = vm.takeMisuse()
		}
		delete(vm.grpc.paused, id)
		p.resume <- r
	}
}

// pause registers a stream the module stopped while something could resume it (canResume): any
// callback may continue it after selecting it with proxy_set_effective_context (Envoy keeps a
// stopped stream until something continues it); false if nothing could ever resume it.
func (vm *VM) pause(s *Stream) (chan streamResult, bool) {
	if !vm.canResume(s) {
		return nil, false
	}
	if vm.grpc.paused == nil {
		vm.grpc.paused = map[uint32]*pausedStream{}
	}
	p := &pausedStream{stream: s, resume: make(chan streamResult, 1)}
	vm.grpc.paused[s.id] = p
	return p.resume, true
}

// strandPaused ends the paused streams once nothing is left that could resume them (no call in
// flight, no timer): the module forgot them.
func (vm *VM) strandPaused() {
	for id, p := range vm.grpc.paused {
		if vm.canResume(p.stream) {
			continue
		}
		delete(vm.grpc.paused, id)
		p.resume <- streamResult{err: ErrStreamPaused}
	}
}

// unpause forgets a paused stream (it ended or was reset), ending its wait with ErrStreamReset;
// false if it was no longer paused.
func (vm *VM) unpause(s *Stream) bool {
	p, ok := vm.grpc.paused[s.id]
	if !ok {
		return false
	}
	delete(vm.grpc.paused, s.id)
	p.resume <- streamResult{err: ErrStreamReset}
	return true
}

// endGrpc cancels the calls in flight and ends the paused streams with err (the VM closes or
// failed).
func (vm *VM) endGrpc(err error) {
	for token, c := range vm.grpc.calls {
		c.cancel()
		delete(vm.grpc.calls, token)
	}
	vm.settlePaused(err)
}

// PausedStreams is the number of the VM's streams the module stopped and has not yet continued
// or answered.
func (vm *VM) PausedStreams() int {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return len(vm.grpc.paused)
}

// PendingCalls is the number of the VM's gRPC calls in flight: a module that forgets a call (a
// stream that ended without cancelling what it waited for) leaves it here until it completes.
func (vm *VM) PendingCalls() int {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return len(vm.grpc.calls)
}

// proxy_grpc_cancel(token) and, for a unary call, proxy_grpc_close(token): the call is
// forgotten and gets no callback. Stream ids (low bits 10) are never handed out here: NotFound.
func proxyGrpcCancel(vm *VM, stack []uint64) {
	token := uint32(stack[0])
	if st, isCall := hostcore.CancelStatus(token); !isCall {
		ret(stack, st)
		return
	}
	c, ok := vm.grpc.calls[token]
	if !ok {
		ret(stack, wire.StatusNotFound)
		return
	}
	delete(vm.grpc.calls, token)
	c.cancel()
	ret(stack, wire.StatusOK)
}

// proxy_get_status(code_ptr, message_ptr_ptr, message_size_ptr): the last call's status; its
// message only during proxy_on_grpc_close.
func proxyGetStatus(vm *VM, stack []uint64) {
	if !vm.writeU32(uint32(stack[0]), vm.grpc.status) {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	ret(stack, vm.copyOut([]byte(vm.grpc.statusMessage), uint32(stack[1]), uint32(stack[2])))
}

// StartStreamContext is StartStream for a request that may be held: when the module stops it
// while a gRPC call it made is in flight, it waits until a callback continues or answers it, or
// until ctx ends (then ErrStreamReset; Finish the stream as for any other).
func (vm *VM) StartStreamContext(ctx context.Context, req Request) (*Stream, Decision, error) {
	s, d, resume, err := vm.startStream(req)
	if resume == nil {
		return s, d, err
	}
	select {
	case r := <-resume:
		return s, r.decision, r.err
	case <-ctx.Done():
		vm.mu.Lock()
		stillPaused := vm.unpause(s)
		vm.mu.Unlock()
		if !stillPaused {
			r := <-resume // settled in the meantime
			return s, r.decision, r.err
		}
		return s, Decision{}, fmt.Errorf("%w: %w", ErrStreamReset, ctx.Err())
	}
}
