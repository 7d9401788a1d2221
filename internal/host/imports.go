package host

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// hostFunc is one import the host provides.
type hostFunc struct {
	module, name    string
	params, results []api.ValueType
	// since is the first profile that provides it.
	since Profile
	// abi limits an env function to one ABI version ("" for all 0.2.x).
	abi string
	fn  func(vm *VM, stack []uint64)
}

func sig(params ...api.ValueType) []api.ValueType { return params }

var errno = []api.ValueType{i32}

// wasiModules are the two names cpp-host registers its WASI functions under.
var wasiModules = []string{"wasi_snapshot_preview1", "wasi_unstable"}

// allFuncs is every import the host can provide, before filtering by profile and ABI.
func allFuncs() []hostFunc {
	funcs := envFuncs()
	for _, module := range wasiModules {
		for _, f := range wasiFuncs() {
			f.module = module
			funcs = append(funcs, f)
		}
	}
	return funcs
}

func providedFuncs(profile Profile, abiVersion string) []hostFunc {
	var out []hostFunc
	for _, f := range allFuncs() {
		if f.since > profile || (f.abi != "" && f.abi != abiVersion) {
			continue
		}
		out = append(out, f)
	}
	return out
}

func providedImports(profile Profile, abiVersion string) map[string]hostFunc {
	m := map[string]hostFunc{}
	for _, f := range providedFuncs(profile, abiVersion) {
		m[f.module+"."+f.name] = f
	}
	return m
}

// ProvidedImports lists what a profile provides as "module.name", for documentation and tests.
func ProvidedImports(profile Profile, abiVersion string) []string {
	var out []string
	for _, f := range providedFuncs(profile, abiVersion) {
		out = append(out, f.module+"."+f.name)
	}
	return out
}

type vmKey struct{}

func (h *Host) instantiateHostModules(ctx context.Context) error {
	byModule := map[string][]hostFunc{}
	for _, f := range providedFuncs(h.opts.Profile, h.abi) {
		byModule[f.module] = append(byModule[f.module], f)
	}
	for module, funcs := range byModule {
		b := h.runtime.NewHostModuleBuilder(module)
		for _, f := range funcs {
			b.NewFunctionBuilder().
				WithGoModuleFunction(h.wrap(f), f.params, f.results).
				WithName(f.name).
				Export(f.name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("instantiate host module %s: %w", module, err)
		}
	}
	return nil
}

// wrap finds the calling VM, enforces the restricted-call allowlists, counts the call and runs f.
func (h *Host) wrap(f hostFunc) api.GoModuleFunction {
	qualified := f.module + "." + f.name
	allowedInit := allowedDuringStart(h.opts.Profile, f)
	allowedAlloc := allowedDuringAllocation(h.opts.Profile, f)
	return api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		vm, _ := ctx.Value(vmKey{}).(*VM)
		if vm == nil {
			panic(fmt.Errorf("host function %s called outside a VM", qualified))
		}
		switch vm.phase {
		case phaseStart:
			if !allowedInit {
				vm.trap("restricted_callback: " + qualified + " called during VM start (_initialize)")
			}
		case phaseAllocate:
			if !allowedAlloc {
				vm.trap("restricted_callback: " + qualified + " called inside the allocator")
			}
		}
		vm.counters.hostCalls++
		if vm.counters.byName != nil {
			vm.counters.byName[qualified]++
		}
		if h.opts.Trace == nil {
			f.fn(vm, stack)
			return
		}
		i := vm.traceBegin(false, qualified)
		f.fn(vm, stack)
		var result uint32
		if len(f.results) > 0 {
			result = uint32(stack[0])
		}
		vm.traceEnd(i, result)
	})
}

// allowedDuringStart is cpp-host's allowlist while _initialize runs (src/wasm.cc startVm).
func allowedDuringStart(profile Profile, f hostFunc) bool {
	if f.module == "env" {
		return f.name == "proxy_log" || (profile >= Envoy139 && f.name == "emscripten_notify_memory_growth")
	}
	switch f.name {
	case "fd_write", "args_sizes_get", "args_get", "environ_sizes_get", "environ_get",
		"fd_prestat_get", "fd_prestat_dir_name", "clock_time_get", "random_get",
		"fd_fdstat_get", "fd_fdstat_set_flags":
		return true
	case "poll_oneoff":
		return profile >= Envoy139
	case "sched_yield", "proc_exit":
		return false
	}
	// The no-op file, path and socket functions added in 1.39 are allowed there.
	return profile >= Envoy139 && f.since == Envoy139
}

// allowedDuringAllocation is cpp-host's allowlist while the allocator runs (wasm.h allocMemory).
func allowedDuringAllocation(profile Profile, f hostFunc) bool {
	if f.module == "env" {
		return f.name == "proxy_log"
	}
	switch f.name {
	case "fd_write", "clock_time_get":
		return true
	case "poll_oneoff":
		return profile >= Envoy139
	}
	return false
}
