package abi

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// The dispatch both builds share: the callbacks Envoy calls (callbacks_wasip1.go,
// grpc_wasip1.go) and the native twin's (native_vm.go, grpc_native.go) keep their streams in the
// same table, treat a recovered panic the same way, and keep the same books of gRPC calls. Each
// build supplies vm (its contexts), calls (its pending gRPC calls by token), and
// proxyGrpcCancel and proxySetEffectiveContext: the host functions themselves in the wasip1
// build, the native host's answers in the native one.

// responseBodies is set once a plugin of the VM reads response bodies or trailers
// (ReadResponseBodies). Until then the body and trailer callbacks, which Envoy makes for every
// chunk of every response once a module exports them, return Continue at once: a module whose
// configuration reads no response pays one crossing per chunk and nothing more.
var responseBodies bool

// ReadResponseBodies makes the body and trailer callbacks reach the streams' contexts, for as
// long as the VM lives (another plugin of the same VM may need them).
func ReadResponseBodies() { responseBodies = true }

// responseHeaders is set once a plugin of the VM acts on response headers (ReadResponseHeaders).
// Until then the response headers callback returns Continue at once, as the body callbacks do
// before ReadResponseBodies: Envoy makes it for every response, a local reply's included, and a
// plugin that adds no header and settles nothing at the response would only be called to do
// nothing.
var responseHeaders bool

// ReadResponseHeaders makes the response headers callback reach the streams' contexts, for as
// long as the VM lives (another plugin of the same VM may need it).
func ReadResponseHeaders() { responseHeaders = true }

// streamTable maps stream context ids to their contexts. Envoy usually runs a stream's callbacks
// one after the other (create, request headers, response headers, delete), so the newest stream
// sits in a slot of its own and costs no map operation; when another stream is created while it
// is alive, it moves to the map.
type streamTable struct {
	id      uint32 // 0: the slot is empty (context ids start at 1)
	ctx     types.HttpContext
	spilled map[uint32]types.HttpContext
}

func (t *streamTable) add(id uint32, ctx types.HttpContext) {
	if t.id != 0 {
		t.spilled[t.id] = t.ctx
	}
	t.id, t.ctx = id, ctx
}

func (t *streamTable) get(id uint32) (types.HttpContext, bool) {
	if id != 0 && id == t.id {
		return t.ctx, true
	}
	ctx, ok := t.spilled[id]
	return ctx, ok
}

// remove deletes a stream and returns its context.
func (t *streamTable) remove(id uint32) (types.HttpContext, bool) {
	if id != 0 && id == t.id {
		ctx := t.ctx
		t.id, t.ctx = 0, nil
		return ctx, true
	}
	ctx, ok := t.spilled[id]
	if ok {
		delete(t.spilled, id)
	}
	return ctx, ok
}

// What both builds do with a panic a callback recovered: the wasip1 callbacks
// (callbacks_wasip1.go) and the native twin's (native_vm.go) log it the same way and ask the
// plugin the same questions.

// RequestPanicHandler is implemented by an HttpContext that answers a request whose
// OnHttpRequestHeaders panicked (after the panic is logged): without it the request continues.
type RequestPanicHandler interface {
	OnHttpRequestHeadersPanic() types.Action
}

// StreamLossHandler is implemented by a plugin context that wants to answer a stream whose
// context could not be created (NewHttpContext panicked): without it the stream continues.
type StreamLossHandler interface {
	OnHttpStreamLost() types.Action
}

// logRecovered logs a panic a callback recovered; the stream itself continues untouched unless
// the plugin says otherwise (RequestPanicHandler, StreamLossHandler).
func logRecovered(callback string, r any) {
	Log(LogLevelCritical, "tollgate: recovered panic in "+callback+": "+describePanic(r))
}

func describePanic(r any) string {
	switch v := r.(type) {
	case error:
		return v.Error()
	case string:
		return v
	default:
		return "non-error panic value"
	}
}

// SetEffectiveContext makes a stream the context of the hostcalls that follow, for the rest of
// the current callback: a root-context callback (a tick) continues or answers a held request
// this way. Envoy answers BadArgument for a context that is gone.
func SetEffectiveContext(contextID uint32) error {
	forgetRequestHeaders()
	return StatusError(proxySetEffectiveContext(contextID))
}

// pendingCall is a gRPC call waiting for its answer.
type pendingCall struct {
	stream   uint32
	callback GrpcCallback
}

// CancelGrpcCall cancels a pending call; its callback will not run.
func CancelGrpcCall(token uint32) error {
	if _, ok := calls[token]; !ok {
		return StatusError(wire.StatusNotFound)
	}
	delete(calls, token)
	return StatusError(proxyGrpcCancel(token))
}

// PendingGrpcCalls is the number of calls waiting for their answer.
func PendingGrpcCalls() int { return len(calls) }

// takeCall forgets a call being answered and makes its stream the effective context; false if
// the call is unknown (cancelled) or its stream is gone.
func takeCall(token uint32) (pendingCall, bool) {
	call, ok := calls[token]
	if !ok {
		return call, false
	}
	delete(calls, token)
	if call.stream == 0 {
		return call, true
	}
	if _, alive := vm.streams.get(call.stream); !alive || SetEffectiveContext(call.stream) != nil {
		return call, false
	}
	return call, true
}

// endStreamCalls cancels the calls of a stream being deleted and tells their callbacks.
func endStreamCalls(stream uint32) {
	for token, call := range calls {
		if call.stream != stream {
			continue
		}
		delete(calls, token)
		_ = proxyGrpcCancel(token)
		call.callback(GrpcStatusStreamEnded, "the request ended before the call was answered", nil)
	}
}
