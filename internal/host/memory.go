package host

import (
	"encoding/binary"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// The module's linear memory as host functions reach it: reads and writes that report an
// out-of-bounds access instead of trapping, and data handed to the module through its allocator.

// allocate calls the module's allocator, with the allocation allowlist in force.
func (vm *VM) allocate(size uint32) (uint32, wire.Status) {
	prev := vm.phase
	vm.phase = phaseAllocate
	vm.counters.allocations++
	trace := vm.host.opts.Trace != nil
	var event int
	if trace {
		event = vm.traceBegin(true, vm.alloc.Definition().ExportNames()[0])
	}
	res, err := vm.alloc.Call(vm.ctx, uint64(size))
	if trace {
		vm.traceEnd(event, 0)
	}
	vm.phase = prev
	if err != nil {
		// Propagate the trap to the callback that made the host call.
		panic(trapError{reason: "allocator: " + err.Error()})
	}
	if len(res) == 0 || uint32(res[0]) == 0 {
		return 0, wire.StatusInvalidMemoryAccess
	}
	return uint32(res[0]), wire.StatusOK
}

// copyOut places data in module memory through the allocator and writes its address and size,
// as cpp-host's copyToPointerSize does: nothing is allocated for empty data, (0, 0) is written.
func (vm *VM) copyOut(data []byte, ptrPtr, sizePtr uint32) wire.Status {
	if len(data) == 0 {
		if !vm.writeU32(ptrPtr, 0) || !vm.writeU32(sizePtr, 0) {
			return wire.StatusInvalidMemoryAccess
		}
		return wire.StatusOK
	}
	addr, st := vm.allocate(uint32(len(data)))
	if st != wire.StatusOK {
		return st
	}
	if !vm.write(addr, data) || !vm.writeU32(ptrPtr, addr) || !vm.writeU32(sizePtr, uint32(len(data))) {
		return wire.StatusInvalidMemoryAccess
	}
	return wire.StatusOK
}

func (vm *VM) read(ptr, size uint32) ([]byte, bool) {
	if size == 0 {
		return nil, true
	}
	b, ok := vm.mod.Memory().Read(ptr, size)
	if !ok {
		return nil, false
	}
	return append([]byte(nil), b...), true
}

func (vm *VM) readString(ptr, size uint32) (string, bool) {
	b, ok := vm.read(ptr, size)
	return string(b), ok
}

// readNameValue reads the (name, name_size, value, value_size) arguments that open a host call
// setting something by name (proxy_set_property, proxy_set_shared_data); false if either lies
// outside memory.
func (vm *VM) readNameValue(stack []uint64) (name string, value []byte, ok bool) {
	name, ok1 := vm.readString(uint32(stack[0]), uint32(stack[1]))
	value, ok2 := vm.read(uint32(stack[2]), uint32(stack[3]))
	return name, value, ok1 && ok2
}

func (vm *VM) readU32(ptr uint32) (uint32, bool) { return vm.mod.Memory().ReadUint32Le(ptr) }

func (vm *VM) write(ptr uint32, data []byte) bool {
	if len(data) == 0 {
		return true
	}
	return vm.mod.Memory().Write(ptr, data)
}

func (vm *VM) writeU32(ptr, v uint32) bool { return vm.mod.Memory().WriteUint32Le(ptr, v) }

func (vm *VM) writeU64(ptr uint32, v uint64) bool {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return vm.write(ptr, b[:])
}
