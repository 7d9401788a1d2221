package host

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// Timers. A root context asks for proxy_on_tick every period with
// proxy_set_tick_period_milliseconds; as in Envoy (source/extensions/common/wasm/wasm.cc,
// Wasm::setTickPeriod and Wasm::tickHandler) the timer belongs to the root context and to its VM
// alone, a new period replaces the old one, 0 disables it, and the timer is armed again only after
// proxy_on_tick has returned. A call from a stream context sets the timer of the stream's root
// context (envoy context.cc Context::setTickPeriod uses root_context_id_).
//
// Time here is the host's Clock, which tests move by hand: instead of running timers, the host
// fires them when told (Tick), as the period elapsing would; `tollgate serve` tells it every
// TickPeriod (RunTicks).

// proxy_set_tick_period_milliseconds(period)
func proxySetTickPeriodMilliseconds(vm *VM, stack []uint64) {
	root := vm.callRoot
	if vm.current != nil {
		root = vm.current.root
	}
	if root == 0 {
		ret(stack, wire.StatusBadArgument)
		return
	}
	period := time.Duration(uint32(stack[0])) * time.Millisecond
	if period == 0 {
		delete(vm.tickPeriods, root)
	} else {
		vm.tickPeriods[root] = period
	}
	ret(stack, wire.StatusOK)
}

// Tick fires every timer of every VM once: proxy_on_tick for each root context that set a tick
// period, as if its period had just elapsed. Tests call it before reading what a module reports
// on its ticks (Tollgate's counters).
func (h *Host) Tick(ctx context.Context) error {
	h.mu.Lock()
	vms := append([]*VM(nil), h.vms...)
	h.mu.Unlock()
	for _, vm := range vms {
		if err := vm.Tick(); err != nil {
			return fmt.Errorf("VM %d: %w", vm.id, err)
		}
	}
	return nil
}

// Tick fires the VM's timers once (see Host.Tick).
func (vm *VM) Tick() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	for _, root := range vm.sortedTickRoots() {
		if err := vm.tick(root); err != nil {
			return err
		}
	}
	return nil
}

func (vm *VM) sortedTickRoots() []uint32 {
	roots := make([]uint32, 0, len(vm.tickPeriods))
	for root := range vm.tickPeriods {
		roots = append(roots, root)
	}
	for i := 1; i < len(roots); i++ {
		for j := i; j > 0 && roots[j] < roots[j-1]; j-- {
			roots[j], roots[j-1] = roots[j-1], roots[j]
		}
	}
	return roots
}

// tick calls proxy_on_tick(root) with the root context in effect.
func (vm *VM) tick(root uint32) error {
	saved := vm.callRoot
	vm.callRoot = root
	defer func() { vm.callRoot = saved }()
	_, err := vm.call("proxy_on_tick", 0, uint64(root))
	return err
}

// TickPeriod is the shortest tick period any root context of any VM asked for, 0 if none.
func (h *Host) TickPeriod() time.Duration {
	h.mu.Lock()
	vms := append([]*VM(nil), h.vms...)
	h.mu.Unlock()
	var shortest time.Duration
	for _, vm := range vms {
		vm.mu.Lock()
		for _, p := range vm.tickPeriods {
			if shortest == 0 || p < shortest {
				shortest = p
			}
		}
		vm.mu.Unlock()
	}
	return shortest
}

// RunTicks fires the timers in real time until ctx is done: every TickPeriod (checked again each
// second while no timer is set), as Envoy's dispatcher would. For a host on the system clock.
func (h *Host) RunTicks(ctx context.Context) {
	for {
		period := h.TickPeriod()
		if period == 0 {
			period = time.Second
		}
		t := time.NewTimer(period)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			if h.TickPeriod() > 0 {
				_ = h.Tick(ctx) // a VM that traps is failed; the others keep ticking
			}
		}
	}
}
