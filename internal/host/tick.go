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
// alone, a new period replaces the old one and starts a new timer, a full period from the call
// (setTickPeriod disables the running timer and enables a new one), 0 disables it, and the timer
// is armed again only after proxy_on_tick has returned (tickHandler calls enableTimer after
// onTick), so a period set during proxy_on_tick counts from the end of that tick. A call from a
// stream context sets the timer of the stream's root context (envoy context.cc
// Context::setTickPeriod uses root_context_id_).
//
// A tick may resume requests the module held (held.go): proxy_on_tick runs with the root
// context in effect, the module makes a held stream the effective context
// (proxy_set_effective_context) and continues it or answers it, and that takes effect once the
// tick has returned, as after a gRPC answer.
//
// Time here is the host's Clock, which tests move by hand: instead of running timers, the host
// fires them when told (Tick), as the period elapsing would; `tollgate serve` runs each root
// context's timer in real time (RunTicks).

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
		delete(vm.tickArmed, root)
	} else {
		vm.tickPeriods[root] = period
		if vm.callRoot == root && vm.ticking {
			// Set during the root's own proxy_on_tick: armed when the tick returns.
			delete(vm.tickArmed, root)
		} else {
			vm.tickArmed[root] = time.Now()
		}
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

// tick calls proxy_on_tick(root) with the root context in effect, then carries out what it
// asked for the held streams (continue, answer), and arms the timer again.
func (vm *VM) tick(root uint32) error {
	saved, savedTicking := vm.callRoot, vm.ticking
	vm.callRoot, vm.ticking = root, true
	_, err := vm.call("proxy_on_tick", 0, uint64(root))
	vm.callRoot, vm.ticking = saved, savedTicking
	vm.leaveRootCallback()
	vm.settlePaused(err)
	if err == nil {
		err = vm.takeMisuse() // one no settled stream reported
	}
	if _, ok := vm.tickPeriods[root]; ok {
		vm.tickArmed[root] = time.Now()
	}
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

// RunTicks runs the timers in real time until ctx is done, as Envoy's dispatcher would: each
// root context's proxy_on_tick one period after its timer was armed (by
// proxy_set_tick_period_milliseconds, or by the end of its previous tick). For a host on the
// system clock.
func (h *Host) RunTicks(ctx context.Context) {
	for {
		wait := time.Second // checked again each second while no timer is set
		now := time.Now()
		h.mu.Lock()
		vms := append([]*VM(nil), h.vms...)
		h.mu.Unlock()
		for _, vm := range vms {
			if due, ok := vm.nextTick(); ok {
				wait = min(wait, max(due.Sub(now), 0))
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for _, vm := range vms {
			_ = vm.tickDue(time.Now()) // a VM that traps is failed; the others keep ticking
		}
	}
}

// nextTick is when the VM's earliest armed timer fires.
func (vm *VM) nextTick() (time.Time, bool) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	var next time.Time
	found := false
	for root, period := range vm.tickPeriods {
		armed, ok := vm.tickArmed[root]
		if !ok {
			continue
		}
		if due := armed.Add(period); !found || due.Before(next) {
			next, found = due, true
		}
	}
	return next, found
}

// tickDue fires the VM's timers that are due at now, in root context order.
func (vm *VM) tickDue(now time.Time) error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	for _, root := range vm.sortedTickRoots() {
		armed, ok := vm.tickArmed[root]
		if !ok || armed.Add(vm.tickPeriods[root]).After(now) {
			continue
		}
		if err := vm.tick(root); err != nil {
			return err
		}
	}
	return nil
}
