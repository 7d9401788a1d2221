//go:build wasip1

package abi

import (
	"unsafe"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// Callbacks of the proxy-wasm ABI v0.2.1 (spec: proxy-wasm/spec abi-versions/v0.2.1/README.md,
// "Functions implemented in the Wasm module"). Envoy calls only the ones a module exports, so
// callbacks the filter has no use for (bodies, trailers, ticks, queues, callouts) are not
// exported and cost no crossing.

// vm holds the contexts of this VM instance. A VM is single-threaded: Envoy never calls into it
// concurrently, so no locking.
var vm = struct {
	root    types.VMContext
	plugins map[uint32]types.PluginContext
	streams map[uint32]types.HttpContext
}{
	plugins: map[uint32]types.PluginContext{},
	streams: map[uint32]types.HttpContext{},
}

// SetVMContext registers the plugin's VM context. Call it from an init function: in a c-shared
// module main never runs, and init functions run inside _initialize.
func SetVMContext(ctx types.VMContext) { vm.root = ctx }

// recoverCallback keeps a panic from escaping a callback: an escaped panic traps the VM, and
// Envoy then fails every stream on that worker. The stream itself continues untouched.
func recoverCallback(callback string) {
	if r := recover(); r != nil {
		Log(LogLevelCritical, "tollgate: recovered panic in "+callback+": "+describePanic(r))
	}
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

// Spec "Integration": the marker export that tells the host which ABI the module speaks.
//
//go:wasmexport proxy_abi_version_0_2_1
func proxyABIVersion0_2_1() {}

// Spec "Memory management": the host calls this to place variable-size results in module memory.
// The slice stays reachable through the pointer the host writes into the caller's variable before
// any other Go code runs.
//
//go:wasmexport proxy_on_memory_allocate
func proxyOnMemoryAllocate(size uint32) unsafe.Pointer {
	if size == 0 {
		size = 1
	}
	buf := make([]byte, size)
	return unsafe.Pointer(&buf[0])
}

// Spec "Context lifecycle": proxy_on_context_create; parent 0 means a root (plugin) context.
//
//go:wasmexport proxy_on_context_create
func proxyOnContextCreate(contextID, parentID uint32) {
	defer recoverCallback("proxy_on_context_create")
	if parentID == 0 {
		if vm.root != nil {
			vm.plugins[contextID] = vm.root.NewPluginContext(contextID)
		}
		return
	}
	if plugin, ok := vm.plugins[parentID]; ok {
		if stream := plugin.NewHttpContext(contextID); stream != nil {
			vm.streams[contextID] = stream
		}
	}
}

// Spec "Configuration": proxy_on_vm_start. Returning 0 fails the VM start.
//
//go:wasmexport proxy_on_vm_start
func proxyOnVMStart(rootID, vmConfigurationSize uint32) (ok uint32) {
	defer recoverCallback("proxy_on_vm_start")
	if vm.root == nil {
		return 0
	}
	return boolToUint32(bool(vm.root.OnVMStart(int(vmConfigurationSize))))
}

// Spec "Configuration": proxy_on_configure. Returning 0 rejects the plugin configuration.
//
//go:wasmexport proxy_on_configure
func proxyOnConfigure(rootID, pluginConfigurationSize uint32) (ok uint32) {
	defer recoverCallback("proxy_on_configure")
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
	defer recoverCallback("proxy_on_request_headers")
	stream, ok := vm.streams[contextID]
	if !ok {
		return uint32(types.ActionContinue)
	}
	return uint32(stream.OnHttpRequestHeaders(int(numHeaders), endOfStream != 0))
}

// Spec "HTTP streams": proxy_on_response_headers.
//
//go:wasmexport proxy_on_response_headers
func proxyOnResponseHeaders(contextID, numHeaders, endOfStream uint32) (action uint32) {
	defer recoverCallback("proxy_on_response_headers")
	stream, ok := vm.streams[contextID]
	if !ok {
		return uint32(types.ActionContinue)
	}
	return uint32(stream.OnHttpResponseHeaders(int(numHeaders), endOfStream != 0))
}

// Spec "Context lifecycle": proxy_on_log, the access-log phase of a finished stream.
//
//go:wasmexport proxy_on_log
func proxyOnLog(contextID uint32) {
	defer recoverCallback("proxy_on_log")
	if stream, ok := vm.streams[contextID]; ok {
		stream.OnHttpStreamDone()
	}
}

// Spec "Context lifecycle": proxy_on_done. Streams ignore the result; a root context returning 0
// stays pending (the filter never needs that).
//
//go:wasmexport proxy_on_done
func proxyOnDone(contextID uint32) (done uint32) {
	// Done unless the plugin says otherwise: a recovered panic must not leave the root context
	// pending forever.
	done = 1
	defer recoverCallback("proxy_on_done")
	if plugin, ok := vm.plugins[contextID]; ok {
		return boolToUint32(plugin.OnPluginDone())
	}
	return 1
}

// Spec "Context lifecycle": proxy_on_delete, the last call for a context.
//
//go:wasmexport proxy_on_delete
func proxyOnDelete(contextID uint32) {
	defer recoverCallback("proxy_on_delete")
	endStreamCalls(contextID)
	delete(vm.streams, contextID)
	delete(vm.plugins, contextID)
}

func boolToUint32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
