package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

type phase int

const (
	phaseIdle phase = iota
	phaseStart
	phaseAllocate
	phaseCallback
)

// ErrVMFailed is wrapped by every call on a VM that trapped. Envoy treats a trapped VM as failed:
// with failure_policy FAIL_CLOSED every later stream on that worker gets a 503.
var ErrVMFailed = errors.New("wasm VM failed")

// trapError is raised (as a panic inside a host function) to trap the VM, the way cpp-host aborts
// a VM that breaks a rule such as the restricted-call allowlist.
type trapError struct{ reason string }

func (e trapError) Error() string { return e.reason }

// VM is one instance of the module: one Envoy worker thread's VM. It is single-threaded like
// Envoy's: its methods serialize on a mutex, and different VMs run in parallel.
type VM struct {
	host *Host
	id   int
	mod  api.Module
	ctx  context.Context

	mu       sync.Mutex
	phase    phase
	failed   error
	callback map[string]api.Function
	alloc    api.Function
	stack    []uint64
	// pairs is proxy_get_header_map_pairs' buffer, reused: the guest gets a copy; shared is
	// proxy_get_shared_data's, likewise.
	pairs  []byte
	shared []byte

	nextContextID uint32
	// rootID is the root context of the plugin configuration in force: new streams are its
	// children. retiring counts the open streams of earlier root contexts, which are torn down
	// when their last stream ends (Reconfigure).
	rootID       uint32
	retiring     map[uint32]int
	pluginConfig []byte // the configuration of rootID, readable during proxy_on_configure
	configuring  bool
	streams      map[uint32]*Stream
	current      *Stream

	grpc grpcState
	// activeRoot is the root context whose callback runs (a gRPC answer), 0 outside one.
	activeRoot uint32
	// deferred run when the current callback has returned, as cpp-host's after-VM-call actions.
	deferred []func()
	// misuses not yet reported to a caller (see ErrMisuse).
	misuses []error

	// Failure and reload (Options.FailurePolicy): started is set once the VM has started, so
	// that a later trap is a runtime error; generation counts the loads of the module.
	started         bool
	failedAtRuntime bool
	loadedAt        int64
	generation      int

	// tickPeriods are the root contexts' timers (tick.go); callRoot is the root context of the
	// root callback in progress (proxy_on_vm_start, proxy_on_configure, proxy_on_tick), or 0.
	tickPeriods map[uint32]time.Duration
	callRoot    uint32
	// tickArmed is when each root context's timer was last armed, on the system clock
	// (RunTicks); ticking is true during proxy_on_tick.
	tickArmed map[uint32]time.Time
	ticking   bool

	metricIDs  map[uint32]*metric
	nextMetric [3]uint32
	counters   counters
	// initPages is the linear memory size right after _initialize.
	initPages uint32

	// Tracing (Options.Trace): events of the current top-level callback, in call order, with
	// results filled in as calls return; handed over when the callback returns.
	depth       int
	traceEvents []TraceEvent
}

type counters struct {
	hostCalls, allocations, pollOneoff int64
	byName                             map[string]int64
}

// Stats are a VM's crossing counts since it started.
type Stats struct {
	HostCalls   int64 // guest→host calls, every import
	Allocations int64 // host→guest allocator calls
	PollOneoff  int64 // poll_oneoff calls (fatal for Go on Envoy ≤ 1.38)
	MemoryPages uint32
	// InitPages is the linear memory size right after _initialize, before any plugin started.
	InitPages uint32
	// ByName counts host calls per import, when enabled with CountHostCallsByName.
	ByName map[string]int64
}

// callbacks the host calls when the module exports them; Envoy skips the missing ones.
var callbackNames = []string{
	"proxy_on_context_create", "proxy_on_vm_start", "proxy_on_configure",
	"proxy_on_request_headers", "proxy_on_response_headers", "proxy_on_response_body", "proxy_on_response_trailers",
	"proxy_on_log", "proxy_on_done", "proxy_on_delete",
	"proxy_on_grpc_receive", "proxy_on_grpc_close", "proxy_on_tick",
}

// NewVM instantiates the module and starts it as Envoy starts a worker's VM: _initialize under
// the start allowlist, the allocator lookup, then the plugin's root context (create, vm_start,
// configure). A module that rejects its configuration yields an error and no VM.
func (h *Host) NewVM(ctx context.Context) (*VM, error) {
	h.mu.Lock()
	pluginConfig := h.opts.PluginConfig
	h.mu.Unlock()
	vm, err := h.startVM(ctx, pluginConfig)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.vms = append(h.vms, vm)
	h.mu.Unlock()
	return vm, nil
}

// startVM instantiates and starts a VM with a plugin configuration, without registering it.
func (h *Host) startVM(ctx context.Context, pluginConfig []byte) (*VM, error) {
	id := int(h.nextVM.Add(1))
	vm := &VM{
		host:          h,
		id:            id,
		nextContextID: 1,
		callback:      map[string]api.Function{},
		streams:       map[uint32]*Stream{},
		retiring:      map[uint32]int{},
		metricIDs:     map[uint32]*metric{},
		tickPeriods:   map[uint32]time.Duration{},
		tickArmed:     map[uint32]time.Time{},
		stack:         make([]uint64, 8),
	}
	vm.ctx = context.WithValue(ctx, vmKey{}, vm)
	vm.pluginConfig = pluginConfig
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if err := vm.load(); err != nil {
		return nil, fmt.Errorf("start VM %d: %w", id, err)
	}
	if err := vm.takeMisuse(); err != nil {
		_ = vm.mod.Close(ctx)
		return nil, fmt.Errorf("start VM %d: %w", id, err)
	}
	return vm, nil
}

// load instantiates the module afresh and starts it.
func (vm *VM) load() error {
	vm.loadedAt = vm.host.opts.Clock.Monotonic()
	mod, err := vm.host.runtime.InstantiateModule(vm.ctx, vm.host.compiled,
		wazero.NewModuleConfig().WithName(fmt.Sprintf("vm-%d.%d", vm.id, vm.generation)).WithStartFunctions())
	if err != nil {
		return fmt.Errorf("instantiate: %w", err)
	}
	vm.mod = mod
	if err := vm.start(); err != nil {
		_ = mod.Close(vm.ctx)
		return err
	}
	vm.started = true
	return nil
}

// maybeReload replaces a VM that failed with a runtime error by a new one, as Envoy's
// FAIL_RELOAD does for a new stream once the backoff has passed since the last load (envoy
// source/extensions/common/wasm/wasm.cc maybeReloadHandleIfNeeded; the failed VM is dropped from
// cpp-host's thread-local cache by its fail callback, src/wasm.cc getOrCreateThreadLocalWasm, and
// a fresh clone of the base VM is started). The VM stays failed if it is too early or the new one
// fails to start.
func (vm *VM) maybeReload() {
	now := vm.host.opts.Clock.Monotonic()
	if !vm.failedAtRuntime || now-vm.loadedAt < int64(vm.host.opts.ReloadBackoff) {
		return
	}
	old, failed := vm.mod, vm.failed
	_ = old.Close(vm.ctx)
	vm.generation++
	vm.failed, vm.failedAtRuntime, vm.started = nil, false, false
	vm.nextContextID, vm.rootID = 1, 0
	vm.callback = map[string]api.Function{}
	vm.streams = map[uint32]*Stream{}
	vm.retiring = map[uint32]int{}
	vm.metricIDs = map[uint32]*metric{}
	vm.nextMetric = [3]uint32{}
	vm.grpc = grpcState{}
	vm.current, vm.activeRoot, vm.deferred = nil, 0, nil
	vm.host.mu.Lock()
	vm.pluginConfig = vm.host.opts.PluginConfig
	vm.host.mu.Unlock()
	if err := vm.load(); err != nil {
		vm.failed = fmt.Errorf("reload after %v: %w", failed, err)
		vm.loadedAt = now
		return
	}
	vm.host.log(vm.id, 2, "wasm VM reloaded after a runtime error (failure_policy FAIL_RELOAD)")
}

// Generation counts how often the VM was reloaded (FailReload): 0 for the first load.
func (vm *VM) Generation() int {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.generation
}

// misuse records a misuse of the ABI (see ErrMisuse), reported by the next call on the VM.
func (vm *VM) misuse(what string) {
	err := fmt.Errorf("%w: %s", ErrMisuse, what)
	vm.misuses = append(vm.misuses, err)
	vm.host.mu.Lock()
	vm.host.misuses = append(vm.host.misuses, err)
	vm.host.mu.Unlock()
	vm.host.log(vm.id, 4, "host: "+err.Error())
}

// takeMisuse returns the misuses not reported yet, and forgets them.
func (vm *VM) takeMisuse() error {
	if len(vm.misuses) == 0 {
		return nil
	}
	err := errors.Join(vm.misuses...)
	vm.misuses = nil
	return err
}

// afterCallback runs f once the current callback has returned.
func (vm *VM) afterCallback(f func()) { vm.deferred = append(vm.deferred, f) }

func (vm *VM) start() error {
	startFn := "_initialize"
	if vm.mod.ExportedFunction(startFn) == nil {
		startFn = "_start"
	}
	if f := vm.mod.ExportedFunction(startFn); f != nil {
		vm.phase = phaseStart
		_, err := f.Call(vm.ctx)
		vm.phase = phaseIdle
		if err != nil {
			return vm.fail(fmt.Errorf("%s: %w", startFn, err))
		}
	}
	if mem := vm.mod.Memory(); mem != nil {
		vm.initPages = mem.Size() / 65536
	}
	// cpp-host looks for malloc first, then proxy_on_memory_allocate.
	if vm.alloc = vm.mod.ExportedFunction("malloc"); vm.alloc == nil {
		vm.alloc = vm.mod.ExportedFunction("proxy_on_memory_allocate")
	}
	if vm.alloc == nil {
		//lint:ignore ST1005 Envoy's own message (proxy-wasm-cpp-host src/wasm.cc), word for word
		return vm.fail(errors.New("Wasm module is missing malloc function (export malloc or proxy_on_memory_allocate)"))
	}
	for _, name := range callbackNames {
		if f := vm.mod.ExportedFunction(name); f != nil {
			vm.callback[name] = f
		}
	}
	root, err := vm.startRoot(vm.pluginConfig)
	vm.rootID = root
	return err
}

// ID is the VM's number within its host, starting at 1.
func (vm *VM) ID() int { return vm.id }

// Err is why the VM failed, or nil.
func (vm *VM) Err() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.failed
}

// CountHostCallsByName turns on per-import counting (slower; for tests and benchmarks).
func (vm *VM) CountHostCallsByName() {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	vm.counters.byName = map[string]int64{}
}

// Stats returns the VM's crossing counts and its current linear memory size.
func (vm *VM) Stats() Stats {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	s := Stats{HostCalls: vm.counters.hostCalls, Allocations: vm.counters.allocations, PollOneoff: vm.counters.pollOneoff,
		InitPages: vm.initPages}
	if mem := vm.mod.Memory(); mem != nil {
		s.MemoryPages = mem.Size() / 65536
	}
	if vm.counters.byName != nil {
		s.ByName = map[string]int64{}
		for k, v := range vm.counters.byName {
			s.ByName[k] = v
		}
	}
	return s
}

// CallExport calls a function the module exports beyond the ABI, such as a diagnostic export of
// a benchmark build, and returns its results. It runs like a callback (Envoy would never call it),
// outside any stream. A trap fails the VM.
func (vm *VM) CallExport(name string, args ...uint64) ([]uint64, error) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.failed != nil {
		return nil, fmt.Errorf("%w: %w", ErrVMFailed, vm.failed)
	}
	f := vm.mod.ExportedFunction(name)
	if f == nil {
		return nil, fmt.Errorf("the module exports no function %s", name)
	}
	vm.phase = phaseCallback
	res, err := f.Call(vm.ctx, args...)
	vm.phase = phaseIdle
	if err != nil {
		return nil, vm.fail(fmt.Errorf("%s: %w", name, err))
	}
	return res, nil
}

func (vm *VM) newContextID() uint32 {
	id := vm.nextContextID
	vm.nextContextID++
	return id
}

func (vm *VM) fail(err error) error {
	if vm.failed == nil {
		vm.failed = err
		vm.failedAtRuntime = vm.started
		vm.deferred = nil
		vm.host.log(vm.id, 5, "wasm VM failed: "+err.Error())
		vm.endGrpc(fmt.Errorf("%w: %w", ErrVMFailed, err))
	}
	return fmt.Errorf("%w: %w", ErrVMFailed, vm.failed)
}

// call runs a callback if the module exports it, returning def otherwise (Envoy's behaviour for
// a missing callback). A trap fails the VM for good.
func (vm *VM) call(name string, def uint64, args ...uint64) (uint64, error) {
	if vm.failed != nil {
		return 0, fmt.Errorf("%w: %w", ErrVMFailed, vm.failed)
	}
	f := vm.callback[name]
	if f == nil {
		return def, nil
	}
	copy(vm.stack, args)
	vm.phase = phaseCallback
	trace := vm.host.opts.Trace != nil
	if trace {
		vm.traceBegin(true, name, args...)
	}
	err := f.CallWithStack(vm.ctx, vm.stack)
	vm.phase = phaseIdle
	if trace {
		// A trap unwinds without closing the events it opened.
		vm.depth = 1
		vm.traceEnd(0, 0)
	}
	if err != nil {
		return 0, vm.fail(fmt.Errorf("%s: %w", name, err))
	}
	var result uint64
	if len(f.Definition().ResultTypes()) > 0 {
		result = vm.stack[0]
	}
	for len(vm.deferred) > 0 && vm.failed == nil {
		next := vm.deferred[0]
		vm.deferred = vm.deferred[1:]
		next()
	}
	if vm.failed != nil {
		return 0, fmt.Errorf("%w: %w", ErrVMFailed, vm.failed)
	}
	return result, nil
}

func (vm *VM) traceBegin(callback bool, name string, args ...uint64) int {
	vm.traceEvents = append(vm.traceEvents, TraceEvent{VM: vm.id, Depth: vm.depth, Callback: callback, Name: name,
		Args: append([]uint64(nil), args...)})
	vm.depth++
	return len(vm.traceEvents) - 1
}

func (vm *VM) traceEnd(event int, result uint32) {
	vm.depth--
	vm.traceEvents[event].Result = result
	if vm.depth == 0 {
		for _, e := range vm.traceEvents {
			vm.host.opts.Trace(e)
		}
		vm.traceEvents = vm.traceEvents[:0]
	}
}

// trap aborts the current call; the VM is failed when the call returns.
func (vm *VM) trap(reason string) { panic(trapError{reason: reason}) }

// proxy_on_delete for the root context, unless the VM failed) and releases the VM.
func (vm *VM) Close(ctx context.Context) error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	vm.endGrpc(fmt.Errorf("%w: the VM was closed", ErrVMFailed))
	for root := range vm.retiring {
		vm.endRoot(root)
	}
	vm.retiring = map[uint32]int{}
	vm.endRoot(vm.rootID)
	return vm.mod.Close(ctx)
}
