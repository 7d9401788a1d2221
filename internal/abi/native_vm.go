//go:build !wasip1

package abi

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// The native twin runs the plugin's Go code in-process, for unit tests: NativeVM is the
// module's side (the callbacks of callbacks_wasip1.go, as Go calls, with the same dispatch and
// the same panic recovery), and a NativeHost plays Envoy's side (the host calls). Package
// abitest is that host; Envoy always runs the wasip1 build, which the e2e suite drives through
// internal/host.

// NativeHost answers the native twin's host calls as Envoy would, with the ABI's statuses.
type NativeHost interface {
	Log(level LogLevel, msg string)
	LogLevel() LogLevel
	// PluginConfiguration is the plugin configuration; Envoy offers it during
	// proxy_on_configure only.
	PluginConfiguration() ([]byte, wire.Status)
	Property(path []string) ([]byte, wire.Status)
	// SetProperty is proxy_set_property: the stream's filter state "wasm.<path>".
	SetProperty(path string, value []byte) wire.Status
	// ResponseBody is proxy_get_buffer_bytes on the response body buffer.
	ResponseBody(start, size int) ([]byte, wire.Status)
	// The header-map calls address a map of the effective context.
	HeaderValue(m MapType, name string) (string, wire.Status)
	HeaderPairs(m MapType) ([]byte, wire.Status)
	AddHeader(m MapType, name, value string) wire.Status
	ReplaceHeader(m MapType, name, value string) wire.Status
	RemoveHeader(m MapType, name string) wire.Status
	SendLocalReply(status uint32, details string, headers [][2]string, body []byte, grpcStatus int32) wire.Status
	SharedData(key string) ([]byte, uint32, wire.Status)
	SetSharedData(key string, value []byte, cas uint32) wire.Status
	DefineMetric(kind MetricType, name string) (uint32, wire.Status)
	IncrementMetric(id uint32, delta int64) wire.Status
	RecordMetric(id uint32, value uint64) wire.Status
	Metric(id uint32) (uint64, wire.Status)
	SetTickPeriod(milliseconds uint32) wire.Status
	// Monotonic and Wall are the clocks, in nanoseconds (WASI clocks 1 and 0).
	Monotonic() int64
	Wall() int64
	GrpcCall(cluster, service, method string, metadata [][2]string, message []byte, timeoutMilliseconds uint32) (uint32, wire.Status)
	GrpcCancel(token uint32) wire.Status
	// ContinueRequest is proxy_continue_stream(HTTP_REQUEST) for the effective context.
	ContinueRequest() wire.Status
	SetEffectiveContext(contextID uint32) wire.Status
}

// NativeVM is one VM of the plugin in-process: its contexts, as the wasip1 build keeps them in
// its package state (its pending gRPC calls are package state here too, grpc_native.go). One
// runs at a time (the plugin's own package state is one VM's too).
type NativeVM struct {
	host    NativeHost
	root    types.VMContext
	plugins map[uint32]types.PluginContext
	streams streamTable
	// making is the plugin of a stream whose context is being made (streamContext), 0 otherwise.
	making uint32
	// inRequest is set while a request headers callback runs (ReleaseStream).
	inRequest bool
}

// registered is the VM context the plugin registered with SetVMContext.
var registered types.VMContext

// vm is the running NativeVM, the target of the host calls.
var vm *NativeVM

// SetVMContext registers the plugin's VM context, which StartNativeVM uses by default.
func SetVMContext(ctx types.VMContext) { registered = ctx }

// StartNativeVM makes a VM for host, running root (nil: the VM context the plugin registered),
// the target of every host call until Close. It panics if another one is running: tests that
// drive the plugin natively cannot run in parallel.
func StartNativeVM(host NativeHost, root types.VMContext) *NativeVM {
	if vm != nil {
		panic("abi: a native VM is already running; close it first (tests driving the plugin cannot run in parallel)")
	}
	if root == nil {
		root = registered
	}
	responseBodies, responseHeaders = false, false // a new VM's
	letGo, spare, spareParent, requestStream = false, nil, 0, 0
	vm = &NativeVM{host: host, root: root, plugins: map[uint32]types.PluginContext{},
		streams: streamTable{spilled: map[uint32]streamEntry{}}}
	calls = map[uint32]pendingCall{}
	return vm
}

// Close ends the VM: the host calls have no target any more.
func (v *NativeVM) Close() {
	if vm == v {
		vm, calls = nil, nil
	}
}

// nativeHost is the running VM's host.
func nativeHost() NativeHost {
	if vm == nil {
		panic("abi: a host call without a native VM (start one with package abitest)")
	}
	return vm.host
}

// recoverIn logs a panic a callback recovered, as the wasip1 callbacks do, and reports whether
// there was one.
func recoverIn(callback string, r any) bool {
	if r == nil {
		return false
	}
	logRecovered(callback, r)
	return true
}

// ContextCreate is proxy_on_context_create; parent 0 creates a root (plugin) context. A stream
// is only entered in the table: its context is made when a callback first reaches it.
func (v *NativeVM) ContextCreate(contextID, parentID uint32) {
	if parentID != 0 {
		v.streams.add(contextID, parentID, takeSpare(parentID))
		return
	}
	defer func() { recoverIn("proxy_on_context_create", recover()) }()
	if v.root != nil {
		v.plugins[contextID] = v.root.NewPluginContext(contextID)
	}
}

// streamContext is the context of the stream a callback reaches, made the first time (as the
// wasip1 build's findStream makes it); nil for a stream the table does not know, or one without
// a context. The stream is done until NewHttpContext returns one.
func (v *NativeVM) streamContext(id uint32) types.HttpContext {
	s, _ := v.streams.get(id)
	if s.ctx != nil || s.done || s.parent == 0 {
		return s.ctx
	}
	v.streams.set(id, streamEntry{parent: s.parent, done: true})
	plugin, ok := v.plugins[s.parent]
	if !ok {
		return nil
	}
	v.making = s.parent
	ctx := plugin.NewHttpContext(id)
	v.making = 0
	if ctx != nil {
		v.streams.set(id, streamEntry{parent: s.parent, ctx: ctx})
	}
	return ctx
}

// requestHeadersRunning is whether a request headers callback is running (ReleaseStream).
func requestHeadersRunning() bool { return vm != nil && vm.inRequest }

// VMStart is proxy_on_vm_start; false fails the VM.
func (v *NativeVM) VMStart(vmConfigurationSize int) (ok bool) {
	defer func() { recoverIn("proxy_on_vm_start", recover()) }()
	return v.root != nil && bool(v.root.OnVMStart(vmConfigurationSize))
}

// Configure is proxy_on_configure; false rejects the configuration.
func (v *NativeVM) Configure(rootID uint32, pluginConfigurationSize int) (ok bool) {
	defer func() { recoverIn("proxy_on_configure", recover()) }()
	plugin, found := v.plugins[rootID]
	return found && bool(plugin.OnPluginStart(pluginConfigurationSize))
}

// RequestHeaders is proxy_on_request_headers. A panic is logged, and the stream's
// RequestPanicHandler answers, if any, or the plugin's StreamLossHandler if the stream's context
// could not be made. ReleaseStream does nothing in those answers.
func (v *NativeVM) RequestHeaders(contextID uint32, numHeaders int, endOfStream bool) (action types.Action) {
	letGo, requestStream, v.inRequest = false, contextID, true
	var stream types.HttpContext
	defer func() {
		v.inRequest = false
		if recoverIn("proxy_on_request_headers", recover()) {
			action, letGo = types.ActionContinue, false
			if h, ok := stream.(RequestPanicHandler); ok {
				action = h.OnHttpRequestHeadersPanic()
			} else if parent := v.making; parent != 0 { // NewHttpContext panicked
				v.making = 0
				if handler, ok := v.plugins[parent].(StreamLossHandler); ok {
					action = handler.OnHttpStreamLost()
				}
			}
		}
	}()
	if stream = v.streamContext(contextID); stream == nil {
		return types.ActionContinue
	}
	action = stream.OnHttpRequestHeaders(numHeaders, endOfStream)
	if letGo { // ReleaseStream
		letStreamGo(&v.streams, contextID, stream)
	}
	return action
}

// ResponseHeaders is proxy_on_response_headers.
func (v *NativeVM) ResponseHeaders(contextID uint32, numHeaders int, endOfStream bool) types.Action {
	if !responseHeaders {
		return types.ActionContinue
	}
	return v.streamCallback("proxy_on_response_headers", contextID, func(stream types.HttpContext) types.Action {
		return stream.OnHttpResponseHeaders(numHeaders, endOfStream)
	})
}

// ResponseBody is proxy_on_response_body.
func (v *NativeVM) ResponseBody(contextID uint32, bodySize int, endOfStream bool) types.Action {
	if !responseBodies {
		return types.ActionContinue
	}
	return v.streamCallback("proxy_on_response_body", contextID, func(stream types.HttpContext) types.Action {
		return stream.OnHttpResponseBody(bodySize, endOfStream)
	})
}

// ResponseTrailers is proxy_on_response_trailers.
func (v *NativeVM) ResponseTrailers(contextID uint32, numTrailers int) types.Action {
	if !responseBodies {
		return types.ActionContinue
	}
	return v.streamCallback("proxy_on_response_trailers", contextID, func(stream types.HttpContext) types.Action {
		return stream.OnHttpResponseTrailers(numTrailers)
	})
}

// streamCallback runs a response callback of a stream: Continue for an unknown stream, and after
// a panic, which is logged (the stream continues, as in the wasip1 build).
func (v *NativeVM) streamCallback(name string, contextID uint32, callback func(types.HttpContext) types.Action) (action types.Action) {
	defer func() {
		if recoverIn(name, recover()) {
			action, v.making = types.ActionContinue, 0
		}
	}()
	if stream := v.streamContext(contextID); stream != nil {
		return callback(stream)
	}
	return types.ActionContinue
}

// Tick is proxy_on_tick.
func (v *NativeVM) Tick(rootID uint32) {
	defer func() { recoverIn("proxy_on_tick", recover()) }()
	if plugin, ok := v.plugins[rootID]; ok {
		plugin.OnTick()
	}
}

// Delete is proxy_on_delete, the last call for a context: a stream's OnHttpStreamDone (after
// its pending gRPC calls are cancelled) unless it has no context, or a root context's
// OnPluginDone.
func (v *NativeVM) Delete(contextID uint32) {
	defer func() { recoverIn("proxy_on_delete", recover()) }()
	endStreamCalls(contextID)
	if s, ok := v.streams.remove(contextID); ok {
		if s.ctx != nil {
			s.ctx.OnHttpStreamDone()
		}
	} else if plugin, ok := v.plugins[contextID]; ok {
		delete(v.plugins, contextID)
		if spareParent == contextID {
			spare = nil
		}
		plugin.OnPluginDone()
	}
}
