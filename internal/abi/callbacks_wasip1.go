//go:build wasip1

package abi

import (
	"unsafe"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// Callbacks of the proxy-wasm ABI v0.2.1 (spec: proxy-wasm/spec abi-versions/v0.2.1/README.md,
// "Functions implemented in the Wasm module"). Envoy calls only the ones a module exports, so
// callbacks the filter has no use for (request bodies and trailers, queues, HTTP callouts, the
// log phase, done) are not exported and cost no crossing. The response's body and trailers are
// exported: usage-based charging reads them.

// vm holds the contexts of this VM instance. A VM is single-threaded: Envoy never calls into it
// concurrently, so no locking.
var vm = struct {
	root    types.VMContext
	plugins map[uint32]types.PluginContext
	streams streamTable
	// making is the plugin of a stream whose context is being made (findStream), 0 otherwise:
	// if NewHttpContext panics in a request headers callback, that plugin answers the request.
	making uint32
	// lastPlugin is the plugin context last looked up when a stream's context was made
	// (lookUpPlugin).
	lastPluginID uint32
	lastPlugin   types.PluginContext
}{
	plugins: map[uint32]types.PluginContext{},
	streams: streamTable{spilled: map[uint32]streamEntry{}},
}

// SetVMContext registers the plugin's VM context. Call it from an init function: in a c-shared
// module main never runs, and init functions run inside _initialize.
func SetVMContext(ctx types.VMContext) { vm.root = ctx }

// Every callback that runs the plugin's code recovers a panic, once, at its entry: an escaped
// panic traps the VM, and Envoy then fails every stream on that worker. (A stream's creation, and
// the delete of a stream without a context, run none, and spare the recover.) The deferred
// function calls recover itself (a deferred helper would be one more call on every callback);
// logRecovered (dispatch.go) logs what it caught. The plugin's answers to a panic
// (RequestPanicHandler, StreamLossHandler) run in the request headers callback's deferred
// function, after the recover: they must not panic.

// running names the callback that is running, for recovered's log line. Each callback that runs
// plugin code sets it on entry; the allocator, the only callback that runs inside another,
// neither sets nor recovers.
// The callbacks every stream runs clear it (noCallback) as their very last statement, when
// nothing can panic any more: recovered then knows the callback returned and skips recover, a
// call on every stream. A callback that does not clear it only costs that call.
var running callbackID

// callbackID is a callback's number, its name in callbackNames: a number, not the name itself, so
// that setting running is one store, where storing a string's pointer in a variable also checks
// the garbage collector's write barrier, a load and a branch, on entry and exit of every callback.
type callbackID uint8

const (
	noCallback callbackID = iota
	callbackContextCreate
	callbackVMStart
	callbackConfigure
	callbackRequestHeaders
	callbackResponseHeaders
	callbackResponseBody
	callbackResponseTrailers
	callbackTick
	callbackDelete
	callbackGrpcReceive
	callbackGrpcClose
)

var callbackNames = [...]string{
	callbackContextCreate:    "proxy_on_context_create",
	callbackVMStart:          "proxy_on_vm_start",
	callbackConfigure:        "proxy_on_configure",
	callbackRequestHeaders:   "proxy_on_request_headers",
	callbackResponseHeaders:  "proxy_on_response_headers",
	callbackResponseBody:     "proxy_on_response_body",
	callbackResponseTrailers: "proxy_on_response_trailers",
	callbackTick:             "proxy_on_tick",
	callbackDelete:           "proxy_on_delete",
	callbackGrpcReceive:      "proxy_on_grpc_receive",
	callbackGrpcClose:        "proxy_on_grpc_close",
}

// recovered is the deferred call of every callback that has nothing to answer after a panic: one
// function for all of them. A closure per callback would do the same, but binaryen's -Oz merges
// such look-alike closures into one shared body behind a call each, one call more per callback.
func recovered() {
	if running == noCallback {
		return // returned normally
	}
	if r := recover(); r != nil {
		vm.making = 0
		logRecovered(callbackNames[running], r)
	}
}

// Spec "Integration": the marker export that tells the host which ABI the module speaks.
//
//go:wasmexport proxy_abi_version_0_2_1
func proxyABIVersion0_2_1() {}

// arena is where the host's allocations go: a buffer reused by every callback, so reading a
// header or a shared value allocates nothing on the Go heap. Each callback (the allocator aside)
// starts it empty again (resetArena), so what a host call returned there is valid until the
// callback that made the call returns. A result larger than what is left gets a slice of its own
// from the Go heap, an ordinary Go value.
var arena struct {
	buf  [16 << 10]byte
	used uint32
}

// lastAlloc is the last allocation handed to the host, and lastAllocSize its size. As a Go pointer
// in a package variable, written by Go code, it keeps a heap allocation alive until the host call
// that asked for it has returned and its wrapper has turned it into a slice (hostResult).
var (
	lastAlloc     unsafe.Pointer
	lastAllocSize uint32
)

func resetArena() {
	arena.used = 0
	forgetRequestHeaders()
}

// Spec "Memory management": the host calls this to place a variable-size result in module memory,
// once per result, during the host call that returns it.
//
//go:wasmexport proxy_on_memory_allocate
func proxyOnMemoryAllocate(size uint32) unsafe.Pointer {
	if size == 0 {
		size = 1
	}
	if size <= uint32(len(arena.buf))-arena.used {
		lastAlloc = unsafe.Pointer(&arena.buf[arena.used])
		arena.used += (size + 7) &^ 7
	} else {
		buf := make([]byte, size)
		lastAlloc = unsafe.Pointer(&buf[0])
	}
	lastAllocSize = size
	return lastAlloc
}

// Spec "Context lifecycle": proxy_on_context_create; parent 0 means a root (plugin) context. A
// stream is only entered in the table: its plugin makes its context when a callback first
// reaches it (streamContext), so that nothing here runs the plugin's code, and nothing needs a
// recover.
//
//go:wasmexport proxy_on_context_create
func proxyOnContextCreate(contextID, parentID uint32) {
	if parentID != 0 {
		vm.streams.add(contextID, parentID, takeSpare(parentID))
		return
	}
	createPlugin(contextID)
}

// createPlugin makes a root context.
func createPlugin(contextID uint32) {
	resetArena()
	running = callbackContextCreate
	defer recovered()
	if vm.root != nil {
		vm.plugins[contextID] = vm.root.NewPluginContext(contextID)
	}
	running = noCallback
}

// streamContext is the context of the stream a callback reaches, made by its plugin the first
// time (findStream); nil for a stream the table does not know, or one without a context. The
// newest stream's, once made, is found without a call.
func streamContext(id uint32) (ctx types.HttpContext) {
	if ctx = vm.streams.slot.ctx; ctx == nil || id != vm.streams.id {
		ctx = findStream(id)
	}
	return ctx
}

// findStream is streamContext for a stream in the table's map, or whose context is yet to be
// made, which it makes. Until NewHttpContext returns the stream is done: if it panics, or makes
// none, the stream gets no context and no callback of the plugin's after this one (in a request
// headers callback the plugin answers for it first, StreamLossHandler).
func findStream(id uint32) types.HttpContext {
	s, _ := vm.streams.get(id)
	if s.ctx != nil || s.done || s.parent == 0 {
		return s.ctx
	}
	vm.streams.set(id, streamEntry{parent: s.parent, done: true})
	plugin, ok := lookUpPlugin(s.parent)
	if !ok {
		return nil
	}
	vm.making = s.parent
	ctx := plugin.NewHttpContext(id)
	vm.making = 0
	if ctx != nil {
		vm.streams.set(id, streamEntry{parent: s.parent, ctx: ctx})
	}
	return ctx
}

// requestHeadersRunning is whether a request headers callback is running (ReleaseStream).
func requestHeadersRunning() bool { return running == callbackRequestHeaders }

// lookUpPlugin finds a stream's plugin context; the last one found is remembered, as nearly
// every stream has the same parent.
func lookUpPlugin(id uint32) (types.PluginContext, bool) {
	if id == vm.lastPluginID && vm.lastPlugin != nil {
		return vm.lastPlugin, true
	}
	plugin, ok := vm.plugins[id]
	if ok {
		vm.lastPluginID, vm.lastPlugin = id, plugin
	}
	return plugin, ok
}

// Spec "Configuration": proxy_on_vm_start. Returning 0 fails the VM start.
//
//go:wasmexport proxy_on_vm_start
func proxyOnVMStart(rootID, vmConfigurationSize uint32) (ok uint32) {
	resetArena()
	running = callbackVMStart
	defer recovered()
	if vm.root == nil {
		return 0
	}
	return boolToUint32(bool(vm.root.OnVMStart(int(vmConfigurationSize))))
}

// Spec "Configuration": proxy_on_configure. Returning 0 rejects the plugin configuration.
//
//go:wasmexport proxy_on_configure
func proxyOnConfigure(rootID, pluginConfigurationSize uint32) (ok uint32) {
	resetArena()
	running = callbackConfigure
	defer recovered()
	plugin, found := vm.plugins[rootID]
	if !found {
		return 0
	}
	return boolToUint32(bool(plugin.OnPluginStart(int(pluginConfigurationSize))))
}

// Spec "HTTP streams": proxy_on_request_headers.
//
//go:wasmexport proxy_on_request_headers
func proxyOnRequestHeaders(contextID, numHeaders, endOfStream uint32) (action uint32) {
	resetArena()
	running = callbackRequestHeaders
	letGo, requestStream = false, contextID
	var stream types.HttpContext
	defer func() {
		if running == noCallback {
			return // returned normally
		}
		if r := recover(); r != nil {
			logRecovered(callbackNames[running], r)
			letGo, running = false, noCallback // no ReleaseStream in the answers below
			if h, ok := stream.(RequestPanicHandler); ok {
				action = uint32(h.OnHttpRequestHeadersPanic())
			} else if parent := vm.making; parent != 0 { // NewHttpContext panicked
				vm.making = 0
				if handler, ok := vm.plugins[parent].(StreamLossHandler); ok {
					action = uint32(handler.OnHttpStreamLost())
				}
			}
		}
	}()
	action = uint32(types.ActionContinue)
	if stream = streamContext(contextID); stream != nil {
		action = uint32(stream.OnHttpRequestHeaders(int(numHeaders), endOfStream != 0))
		if letGo { // ReleaseStream
			letStreamGo(&vm.streams, contextID, stream)
		}
	}
	running = noCallback
	return action
}

// Spec "HTTP streams": proxy_on_response_headers.
//
//go:wasmexport proxy_on_response_headers
func proxyOnResponseHeaders(contextID, numHeaders, endOfStream uint32) (action uint32) {
	if !responseHeaders {
		return uint32(types.ActionContinue)
	}
	resetArena()
	running = callbackResponseHeaders
	defer recovered()
	action = uint32(types.ActionContinue)
	if stream := streamContext(contextID); stream != nil {
		action = uint32(stream.OnHttpResponseHeaders(int(numHeaders), endOfStream != 0))
	}
	running = noCallback
	return action
}

// Spec "HTTP streams": proxy_on_response_body, once per body chunk Envoy encodes. The buffer
// proxy_get_buffer_bytes reads during it is the chunk just delivered, or everything held since
// the callback last answered StopIterationAndBuffer (envoy source/extensions/common/wasm/
// context.cc encodeData and getBuffer). end_of_stream is true on the last chunk unless trailers
// follow; a stream reset mid-body gets no further call, only proxy_on_delete.
//
//go:wasmexport proxy_on_response_body
func proxyOnResponseBody(contextID, bodyBufferLength, endOfStream uint32) uint32 {
	if !responseBodies {
		return uint32(types.ActionContinue)
	}
	return onResponseEnd(callbackResponseBody, contextID, bodyBufferLength, endOfStream != 0)
}

// Spec "HTTP streams": proxy_on_response_trailers, after the last body chunk (whose
// end_of_stream was false) when the response has trailers.
//
//go:wasmexport proxy_on_response_trailers
func proxyOnResponseTrailers(contextID, numTrailers uint32) uint32 {
	if !responseBodies {
		return uint32(types.ActionContinue)
	}
	return onResponseEnd(callbackResponseTrailers, contextID, numTrailers, false)
}

// onResponseEnd is proxy_on_response_body (which is callbackResponseBody: size is the chunk's
// length) or proxy_on_response_trailers (size is the number of trailers) once a plugin reads
// them. Each export checks responseBodies itself, so that a module reading neither pays no call
// more.
func onResponseEnd(which callbackID, contextID, size uint32, endOfStream bool) (action uint32) {
	resetArena()
	running = which
	defer recovered()
	action = uint32(types.ActionContinue)
	if stream := streamContext(contextID); stream != nil {
		if which == callbackResponseBody {
			action = uint32(stream.OnHttpResponseBody(int(size), endOfStream))
		} else {
			action = uint32(stream.OnHttpResponseTrailers(int(size)))
		}
	}
	running = noCallback
	return action
}

// proxy_on_log and proxy_on_done are not exported: each would be one more callback into the VM
// for every stream, and the filter needs neither. Without proxy_on_done Envoy takes every context
// as done at once, as an OnPluginDone returning true does; PluginContext.OnPluginDone is called
// from proxy_on_delete instead.

// Spec "Timers": proxy_on_tick, every tick period the root context asked for (SetTickPeriod).
//
//go:wasmexport proxy_on_tick
func proxyOnTick(rootID uint32) {
	resetArena()
	running = callbackTick
	defer recovered()
	if plugin, ok := vm.plugins[rootID]; ok {
		plugin.OnTick()
	}
}

// Spec "Context lifecycle": proxy_on_delete, the last call for a context. A stream's
// HttpContext.OnHttpStreamDone runs here (no header map is available any more), so the plugin
// can recycle it, unless the plugin let the context go before (ReleaseStream) or never made one.
// A root context's PluginContext.OnPluginDone runs here too, its result ignored:
// the plugin is going away, and this is its last chance to hand over what it kept.
//
//go:wasmexport proxy_on_delete
func proxyOnDelete(contextID uint32) {
	if len(calls) > 0 { // walking even an empty map costs calls on every stream's end
		deleteContext(contextID)
		return
	}
	s, isStream := vm.streams.remove(contextID)
	if !isStream {
		deleteContext(contextID) // a root context
		return
	}
	if s.ctx == nil {
		return // a stream without a context (let go, or never reached) runs nothing
	}
	resetArena()
	running = callbackDelete
	defer recovered() // open-coded: nothing of it runs on the returns above
	s.ctx.OnHttpStreamDone()
	running = noCallback
}

// deleteContext deletes a stream whose gRPC calls may be pending (they are cancelled first), or a
// root context.
func deleteContext(contextID uint32) {
	resetArena()
	running = callbackDelete
	defer recovered()
	endStreamCalls(contextID)
	if s, ok := vm.streams.remove(contextID); ok {
		if s.ctx != nil {
			s.ctx.OnHttpStreamDone()
		}
	} else if plugin, ok := vm.plugins[contextID]; ok {
		delete(vm.plugins, contextID)
		if spareParent == contextID {
			spare = nil // no stream of a plugin deleted is created any more
		}
		if vm.lastPluginID == contextID {
			vm.lastPluginID, vm.lastPlugin = 0, nil
		}
		plugin.OnPluginDone()
	}
	running = noCallback
}

func boolToUint32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
