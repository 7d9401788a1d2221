package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// Profile selects the Envoy generation to emulate; they differ in the WASI functions provided,
// in poll_oneoff, and in the restricted-call allowlists.
type Profile int

const (
	// Envoy133 is Envoy 1.33 to 1.38 (proxy-wasm-cpp-host c4d7bb0): 18 WASI functions,
	// poll_oneoff fails with ENOSYS.
	Envoy133 Profile = iota
	// Envoy139 is Envoy 1.39 and later (cpp-host 94091cd): 45 WASI functions, poll_oneoff succeeds
	// with no events and is allowed during start and allocation.
	Envoy139
)

func (p Profile) String() string {
	if p == Envoy139 {
		return "Envoy >= 1.39"
	}
	return "Envoy 1.33-1.38"
}

// LogEntry is one line the module logged, through proxy_log or WASI fd_write.
type LogEntry struct {
	VM      int
	Level   uint32 // proxy_log_level_t: 0 trace … 5 critical
	Message string
}

// Options configure a Host. The zero value is usable: Envoy133, system clock, empty names,
// logs discarded.
type Options struct {
	Profile Profile
	// PluginName, RootID and VMID are Envoy's config.name, config.root_id and vm_config.vm_id;
	// the module reads them as the plugin_name, plugin_root_id and plugin_vm_id properties, and
	// VMID selects the shared-data namespace.
	PluginName, RootID, VMID string
	// PluginConfig is config.configuration, VMConfig is vm_config.configuration.
	PluginConfig, VMConfig []byte
	// Env is vm_config.environment_variables as "K=V" strings, served by WASI environ_get.
	Env []string
	// Clock defaults to SystemClock.
	Clock Clock
	// Random, when set, is what WASI random_get reads instead of crypto/rand (read under a lock:
	// VMs run in parallel). A seeded source makes the module's randomness, such as Go's runtime
	// seeds and the secrets a module draws from them, the same on every run.
	Random io.Reader
	// SharedData defaults to a new store; share one between Hosts to model one Envoy process.
	SharedData *SharedData
	// Log receives every log line; nil discards. Called from the VM's goroutine.
	Log func(LogEntry)
	// LogLevel is what proxy_get_log_level reports (default 0, trace, as Envoy's wasm logger at
	// trace level would; set 2 for info).
	LogLevel uint32
	// CompilationCache is reused across Hosts to skip recompiling the same module.
	CompilationCache wazero.CompilationCache
	// Trace, when set, receives every crossing of the boundary in order: callbacks into the
	// module (including the allocator) and host calls out of it. Called from the VM's goroutine.
	Trace func(TraceEvent)
	// GrpcClusters maps the clusters proxy_grpc_call may name to the addresses ("host:port")
	// of their gRPC endpoints, like Envoy's static_resources.clusters.
	GrpcClusters map[string]string
	// GrpcUnhealthyClusters are clusters Envoy knows but that have no healthy host. Envoy's
	// gRPC async client then fails the call while proxy_grpc_call runs: the hostcall returns
	// InternalFailure, no token is written, and once the current callback returns the root
	// context still gets proxy_on_grpc_close(root, token, 14) for the token it never saw
	// (envoy source/common/grpc/async_client_impl.cc sendRaw returns nullptr after the stream
	// was reset; source/extensions/common/wasm/context.cc grpcCall and onGrpcCloseWrapper).
	GrpcUnhealthyClusters []string
	// FailurePolicy is Envoy's failure_policy for a VM that trapped (FailClosed by default).
	FailurePolicy FailurePolicy
	// ReloadBackoff is reload_config.backoff.base_interval for FailReload (default 1s): a
	// failed VM is reloaded for a new stream once this long has passed on the host's
	// monotonic clock since it was last loaded. Envoy adds jitter above this lower bound.
	ReloadBackoff time.Duration
}

// FailurePolicy is what a worker does with new streams once its VM trapped (envoy
// api/envoy/extensions/wasm/v3/wasm.proto FailurePolicy, added in Envoy 1.33 by envoy PR #36456;
// source/extensions/common/wasm/wasm.cc PluginConfig::maybeReloadHandleIfNeeded and
// createContext). A VM that failed to start or to configure is never reloaded.
type FailurePolicy int

const (
	// FailClosed answers every new stream on the worker with 503 (details wasm_fail_stream): the
	// host returns ErrVMFailed from StartStream. It is Envoy's default (UNSPECIFIED).
	FailClosed FailurePolicy = iota
	// FailOpen skips the filter: new streams go upstream without the module.
	FailOpen
	// FailReload creates a new VM for a new stream after a runtime error (a trap), at most once
	// per ReloadBackoff; in between streams fail as with FailClosed. The new VM starts from
	// scratch (_initialize, a new root context), while shared data, kept by the plugin's base
	// VM, survives.
	FailReload
)

// ErrMisuse is wrapped when the module used the ABI in a way Envoy mishandles even though its
// hostcall returns Ok: a proxy_continue_stream for a stream that is not paused (an assertion in
// a debug build, the rest of the filter chain run twice in a release build), a local reply
// without a stream context (silently dropped, so the request hangs), or a local reply after the
// response started (the stream is reset). The host reports it instead of imitating the damage;
// Host.Misuses lists every one.
var ErrMisuse = errors.New("the module did something Envoy mishandles")

// maxMemoryPages is V8's --wasm_max_mem_pages as cpp-host sets it: 1 GiB of 64 KiB pages
// (src/v8/v8.cc, include/proxy-wasm/limits.h PROXY_WASM_HOST_MAX_WASM_MEMORY_SIZE_BYTES). A
// memory.grow past it fails, and Go's runtime then aborts the VM.
const maxMemoryPages = 16384

// TraceEvent is one crossing of the host boundary.
type TraceEvent struct {
	VM int
	// Depth is 0 for a callback from the host, 1 for a host call it makes, 2 for the allocator
	// called inside that host call, and so on.
	Depth int
	// Callback is true for host→module calls (proxy_on_*, the allocator), false for
	// module→host calls.
	Callback bool
	// Name is the export ("proxy_on_request_headers") or the import with its module
	// ("env.proxy_get_shared_data").
	Name string
	// Result is what a host call returned (a proxy_status_t or WASI errno); 0 for callbacks.
	Result uint32
	// Args are a callback's arguments (for proxy_on_grpc_close: root context, token, status);
	// nil for host calls.
	Args []uint64
}

// Host is one compiled module with its emulated Envoy: the store, the metrics and the VMs.
type Host struct {
	opts     Options
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	abi      string
	metrics  *Metrics
	nextVM   atomic.Int32
	mu       sync.Mutex
	vms      []*VM
	randomMu sync.Mutex
	grpc     grpcConns
	misuses  []error
	closed   bool
	// propertyFault, when set, answers proxy_get_property before the host looks the path up.
	propertyFault atomic.Pointer[func(path []string) wire.Status]
	// pairsFault, when set, answers proxy_get_header_map_pairs before the host reads the map.
	pairsFault atomic.Pointer[func(mapType uint32) wire.Status]
}

// SetPropertyFault installs f, called with the path of every proxy_get_property; a status other
// than wire.StatusOK is returned to the module instead of the value (fault injection: Envoy answers
// SerializationFailure when a value cannot be serialized, InternalFailure when a capability is
// restricted). nil removes it. Safe to call while VMs run.
func (h *Host) SetPropertyFault(f func(path []string) wire.Status) {
	if f == nil {
		h.propertyFault.Store(nil)
		return
	}
	h.propertyFault.Store(&f)
}

// SetHeaderPairsFault installs f, called with the map type of every proxy_get_header_map_pairs; a
// status other than wire.StatusOK is returned to the module instead of the pairs (fault injection:
// a host answers InvalidMemoryAccess when it cannot copy them into the module's memory). nil
// removes it. Safe to call while VMs run.
func (h *Host) SetHeaderPairsFault(f func(mapType uint32) wire.Status) {
	if f == nil {
		h.pairsFault.Store(nil)
		return
	}
	h.pairsFault.Store(&f)
}

// ErrImports is wrapped by New when the module imports something the emulated Envoy lacks.
var ErrImports = errors.New("module imports functions Envoy does not provide")

// New compiles wasm and checks it the way Envoy does on load: the ABI version export and every
// import. It runs nothing; NewVM starts VMs.
func New(ctx context.Context, wasm []byte, opts Options) (*Host, error) {
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.SharedData == nil {
		opts.SharedData = NewSharedData()
	}
	if opts.ReloadBackoff <= 0 {
		opts.ReloadBackoff = time.Second
	}
	rc := wazero.NewRuntimeConfig().WithMemoryLimitPages(maxMemoryPages)
	if opts.CompilationCache != nil {
		rc = rc.WithCompilationCache(opts.CompilationCache)
	}
	r := wazero.NewRuntimeWithConfig(ctx, rc)
	compiled, err := r.CompileModule(ctx, wasm)
	if err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("compile module: %w", err)
	}
	abiVersion, err := abiVersionOf(compiled)
	if err != nil {
		r.Close(ctx)
		return nil, err
	}
	h := &Host{opts: opts, runtime: r, compiled: compiled, abi: abiVersion, metrics: newMetrics()}
	if err := checkImports(compiled, opts.Profile, abiVersion); err != nil {
		r.Close(ctx)
		return nil, err
	}
	if err := h.instantiateHostModules(ctx); err != nil {
		r.Close(ctx)
		return nil, err
	}
	// The host is the plugin's base VM: it holds the vm_id's shared data until it closes.
	opts.SharedData.Acquire(opts.VMID)
	return h, nil
}

// abiVersionOf finds the ABI marker export, as cpp-host's getAbiVersion does.
func abiVersionOf(compiled wazero.CompiledModule) (string, error) {
	exports := compiled.ExportedFunctions()
	for _, v := range []string{"0_2_1", "0_2_0"} {
		if _, ok := exports["proxy_abi_version_"+v]; ok {
			return v, nil
		}
	}
	if _, ok := exports["proxy_abi_version_0_1_0"]; ok {
		return "", errors.New("module speaks proxy-wasm ABI 0.1.0; this host emulates 0.2.0 and 0.2.1")
	}
	return "", errors.New("missing or unknown proxy-wasm ABI version: the module exports no proxy_abi_version_0_2_x function")
}

// checkImports refuses a module that imports anything the profile lacks, or with another
// signature, naming every offending import.
func checkImports(compiled wazero.CompiledModule, profile Profile, abiVersion string) error {
	provided := providedImports(profile, abiVersion)
	var problems []string
	for _, def := range compiled.ImportedFunctions() {
		module, name, _ := def.Import()
		want, ok := provided[module+"."+name]
		if !ok {
			problems = append(problems, module+"."+name+" is not provided by "+profile.String())
			continue
		}
		if !slices.Equal(want.params, def.ParamTypes()) || !slices.Equal(want.results, def.ResultTypes()) {
			problems = append(problems, module+"."+name+" has signature "+signature(def.ParamTypes(), def.ResultTypes())+
				", Envoy's is "+signature(want.params, want.results))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("%w: %s", ErrImports, strings.Join(problems, "; "))
	}
	return nil
}

func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ",")
	}
	return "(" + names(params) + ")->(" + names(results) + ")"
}

// Imports lists the module's imports as "module.name", sorted.
func (h *Host) Imports() []string {
	var out []string
	for _, def := range h.compiled.ImportedFunctions() {
		module, name, _ := def.Import()
		out = append(out, module+"."+name)
	}
	sort.Strings(out)
	return out
}

// ABIVersion is the proxy-wasm ABI the module declared, such as "0_2_1".
func (h *Host) ABIVersion() string { return h.abi }

// Metrics is the host's metric registry.
func (h *Host) Metrics() *Metrics { return h.metrics }

// SharedData is the host's store.
func (h *Host) SharedData() *SharedData { return h.opts.SharedData }

// Options returns the options the host runs with (defaults filled in).
func (h *Host) Options() Options {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.opts
}

// Close tears down every VM (see VM.Close) and releases the runtime. The vm_id's shared data
// goes when the last host holding it closes, as cpp-host drops a vm_id's data with its last base
// VM (src/vm_id_handle.cc, src/shared_data.cc deleteByVmId).
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	vms, closed := h.vms, h.closed
	h.vms, h.closed = nil, true
	h.mu.Unlock()
	for _, vm := range vms {
		_ = vm.Close(ctx)
	}
	h.grpc.close()
	if !closed {
		h.opts.SharedData.Release(h.opts.VMID)
	}
	return h.runtime.Close(ctx)
}

// Misuses lists every misuse of the ABI the host saw (see ErrMisuse), oldest first.
func (h *Host) Misuses() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.misuses...)
}

func (h *Host) log(vm int, level uint32, msg string) {
	if h.opts.Log != nil {
		h.opts.Log(LogEntry{VM: vm, Level: level, Message: msg})
	}
}
