package host

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

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
	// Envoy139 is Envoy 1.39 and later (cpp-host 94091cd): 46 WASI functions, poll_oneoff succeeds
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
}

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
	grpc     grpcConns
	// propertyFault, when set, answers proxy_get_property before the host looks the path up.
	propertyFault atomic.Pointer[func(path []string) wire.Status]
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
	rc := wazero.NewRuntimeConfig()
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
		if !sameTypes(want.params, def.ParamTypes()) || !sameTypes(want.results, def.ResultTypes()) {
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

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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

// Close tears down every VM (see VM.Close) and releases the runtime.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	vms := h.vms
	h.vms = nil
	h.mu.Unlock()
	for _, vm := range vms {
		_ = vm.Close(ctx)
	}
	h.grpc.close()
	return h.runtime.Close(ctx)
}

func (h *Host) log(vm int, level uint32, msg string) {
	if h.opts.Log != nil {
		h.opts.Log(LogEntry{VM: vm, Level: level, Message: msg})
	}
}
