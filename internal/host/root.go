package host

import (
	"context"
	"errors"
	"fmt"
)

// Root contexts: one per plugin configuration a VM serves, started when the VM starts and again
// for each configuration push (Reconfigure), ended when the VM closes or, for a replaced
// configuration, when its last stream has.

// startRoot creates a root context for a plugin configuration and starts it as cpp-host's
// ContextBase::onStart and onConfigure do: proxy_on_context_create(root, 0), proxy_on_vm_start,
// proxy_on_configure with the configuration readable during the call.
func (vm *VM) startRoot(pluginConfig []byte) (uint32, error) {
	root := vm.newContextID()
	vm.callRoot = root
	defer func() { vm.callRoot = 0 }()
	if _, err := vm.call("proxy_on_context_create", 0, uint64(root), 0); err != nil {
		return root, err
	}
	ok, err := vm.call("proxy_on_vm_start", 1, uint64(root), uint64(len(vm.host.opts.VMConfig)))
	if err != nil {
		return root, err
	}
	if ok == 0 {
		return root, errors.New("proxy_on_vm_start returned false: the module refused to start (see its log)")
	}
	saved := vm.pluginConfig
	vm.pluginConfig, vm.configuring = pluginConfig, true
	ok, err = vm.call("proxy_on_configure", 1, uint64(root), uint64(len(pluginConfig)))
	vm.configuring = false
	if err != nil {
		return root, err
	}
	if ok == 0 {
		vm.pluginConfig = saved
		return root, ErrConfigRejected
	}
	return root, nil
}

// ErrConfigRejected is wrapped when the module's proxy_on_configure returns false.
var ErrConfigRejected = errors.New("proxy_on_configure returned false: the module rejected its plugin configuration (see its log)")

// endRoot tears a root context down as cpp-host does when its plugin goes away: proxy_on_done,
// then proxy_on_delete. A plugin that returns false would stay pending until proxy_done; this
// host does not wait for it.
func (vm *VM) endRoot(root uint32) {
	// Its timer goes with it (Envoy's timers fire only for a live root context).
	delete(vm.tickPeriods, root)
	delete(vm.tickArmed, root)
	if vm.failed != nil || root == 0 {
		return
	}
	vm.callRoot = root
	defer func() { vm.callRoot = 0 }()
	if _, err := vm.call("proxy_on_done", 1, uint64(root)); err == nil {
		_, _ = vm.call("proxy_on_delete", 0, uint64(root))
	}
}

// Reconfigure applies a new plugin configuration to every VM of the host, as Envoy does when a
// changed configuration arrives (xDS, or Istio updating a WasmPlugin's pluginConfig) and the VM
// configuration and code are unchanged:
//
//  1. A canary VM is started with the new configuration and then closed (cpp-host createWasm →
//     canary). If the module rejects it, Reconfigure returns an error wrapping
//     ErrConfigRejected and nothing changes: Envoy refuses the update (a NACK) and keeps serving
//     with the configuration it has.
//  2. Each running VM is kept, and gets a new root context with a new context id for the new
//     configuration (cpp-host WasmBase::start creates one per plugin key, and the key includes
//     the configuration): proxy_on_context_create(new, 0), proxy_on_vm_start(new),
//     proxy_on_configure(new). Streams started from then on are children of the new root.
//  3. The old root context ends (proxy_on_done, proxy_on_delete) once its last open stream has
//     finished, as Envoy keeps the old plugin alive while its streams hold it.
//
// VMs started later (NewVM) get the new configuration. Shared data, metrics and each VM's
// memory carry over: only the module's plugin context is new.
func (h *Host) Reconfigure(ctx context.Context, pluginConfig []byte) error {
	pluginConfig = append([]byte(nil), pluginConfig...)
	canary, err := h.startVM(ctx, pluginConfig)
	if err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	_ = canary.Close(ctx)
	h.mu.Lock()
	h.opts.PluginConfig = pluginConfig
	vms := append([]*VM(nil), h.vms...)
	h.mu.Unlock()
	for _, vm := range vms {
		if err := vm.reconfigure(pluginConfig); err != nil {
			return fmt.Errorf("VM %d: %w", vm.id, err)
		}
	}
	return nil
}

func (vm *VM) reconfigure(pluginConfig []byte) error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.failed != nil {
		return fmt.Errorf("%w: %w", ErrVMFailed, vm.failed)
	}
	root, err := vm.startRoot(pluginConfig)
	if err != nil {
		// The half-started root context is ended; the VM keeps its configuration.
		vm.endRoot(root)
		return err
	}
	old := vm.rootID
	vm.rootID = root
	open := 0
	for _, s := range vm.streams {
		if s.root == old {
			open++
		}
	}
	if open == 0 {
		vm.endRoot(old)
	} else {
		vm.retiring[old] = open
	}
	return nil
}

// streamEnded ends a retired root context when its last stream has finished.
func (vm *VM) streamEnded(root uint32) {
	n, ok := vm.retiring[root]
	if !ok {
		return
	}
	if n <= 1 {
		delete(vm.retiring, root)
		vm.endRoot(root)
		return
	}
	vm.retiring[root] = n - 1
}

// RootID is the root context id of the configuration the VM serves new streams with.
func (vm *VM) RootID() uint32 {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.rootID
}
