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

// streamTable maps stream context ids to their streams. Envoy usually runs a stream's callbacks
// one after the other (create, request headers, response headers, delete), so the newest stream
// sits in a slot of its own and costs no map operation; when another stream is created while it
// is alive, it moves to the map.
type streamTable struct {
	id      uint32 // 0: the slot is empty (context ids start at 1)
	slot    streamEntry
	spilled map[uint32]streamEntry
}

// streamEntry is a stream's entry. Its plugin makes its context when a callback first reaches the
// stream, not when Envoy creates it (proxy_on_context_create then runs no plugin code, which
// spares it a recover), and may let it go once its request is decided for good (ReleaseStream):
// the stream's later callbacks, its delete among them, then run nothing of the plugin's.
type streamEntry struct {
	parent uint32            // the plugin context's id
	ctx    types.HttpContext // nil until made, and once let go
	// done: the stream has no context and will get none (let go, or its plugin made none).
	done bool
}

// add enters a stream, with its context if it has one already (a spare), nil otherwise.
func (t *streamTable) add(id, parent uint32, ctx types.HttpContext) {
	if t.id != 0 {
		t.spilled[t.id] = t.slot
	}
	t.id, t.slot = id, streamEntry{parent: parent, ctx: ctx}
}

func (t *streamTable) get(id uint32) (streamEntry, bool) {
	if id != 0 && id == t.id {
		return t.slot, true
	}
	s, ok := t.spilled[id]
	return s, ok
}

// set replaces the entry of a stream in the table.
func (t *streamTable) set(id uint32, s streamEntry) {
	if id != 0 && id == t.id {
		t.slot = s
	} else if _, ok := t.spilled[id]; ok {
		t.spilled[id] = s
	}
}

// markDone makes a stream done, without a context, and returns its plugin's id.
func (t *streamTable) markDone(id uint32) (parent uint32) {
	if id != 0 && id == t.id {
		parent, t.slot = t.slot.parent, streamEntry{done: true}
	} else if s, ok := t.spilled[id]; ok {
		parent, t.spilled[id] = s.parent, streamEntry{done: true}
	}
	return parent
}

// remove deletes a stream and returns its entry.
func (t *streamTable) remove(id uint32) (streamEntry, bool) {
	if id != 0 && id == t.id {
		s := t.slot
		t.id, t.slot = 0, streamEntry{}
		return s, true
	}
	s, ok := t.spilled[id]
	if ok {
		delete(t.spilled, id)
	}
	return s, ok
}

// What ReleaseStream leaves for the request headers callback that runs it: letGo is set when the
// plugin let the stream go, which the callback then marks done when the plugin returns. spare is
// a context let go, kept for the next stream of the same plugin (spareParent): that stream gets
// it when it is created, instead of a new one from NewHttpContext.
var (
	letGo       bool
	spare       types.HttpContext
	spareParent uint32
)

// requestStream is the stream of the request headers callback running, or of the last one.
var requestStream uint32

// RequestStreamID is the id of the stream whose request headers callback is running: the id of a
// context that serves another stream than the one it was made for (ReleaseStream).
func RequestStreamID() uint32 { return requestStream }

// ReleaseStream, called during OnHttpRequestHeaders, tells the ABI that the request is decided
// for good and that nothing the plugin would do in the stream's later callbacks is left: when
// OnHttpRequestHeaders returns, the ABI lets the stream go, and its response headers, body and
// trailers callbacks and its delete run nothing of the plugin's (no OnHttpStreamDone). Then
// (released) either the ABI keeps the stream's context, as it is, for the next stream of the same
// plugin, which gets it without NewHttpContext (kept: the context then learns its stream's id from
// RequestStreamID), or the context is the plugin's again, as after OnHttpStreamDone. Called from
// any other callback, or from a plugin's answer to a panic, it does nothing (not released): the
// context is still its stream's. The plugin must return right after it.
func ReleaseStream() (released, kept bool) {
	if !requestHeadersRunning() {
		return false, false
	}
	letGo = true
	return true, spare == nil
}

// letStreamGo marks a stream done once its plugin let it go, and keeps its context as the spare
// if ReleaseStream said so.
func letStreamGo(t *streamTable, id uint32, ctx types.HttpContext) {
	letGo = false
	if parent := t.markDone(id); spare == nil {
		spare, spareParent = ctx, parent
	}
}

// takeSpare is the spare context if it is parent's, for a stream being created; nil otherwise.
func takeSpare(parent uint32) types.HttpContext {
	ctx := spare
	if ctx == nil || parent != spareParent {
		return nil
	}
	spare = nil
	return ctx
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
// the call is unknown (cancelled) or its stream is gone (or has no context: one let go made none).
func takeCall(token uint32) (pendingCall, bool) {
	call, ok := calls[token]
	if !ok {
		return call, false
	}
	delete(calls, token)
	if call.stream == 0 {
		return call, true
	}
	if s, _ := vm.streams.get(call.stream); s.ctx == nil || SetEffectiveContext(call.stream) != nil {
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
