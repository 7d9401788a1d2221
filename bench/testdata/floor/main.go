// Command floor is the floor probe: the least a proxy-wasm rate-limit filter written in upstream
// Go can do for an admitted request, and nothing else. For each request it reads the key header,
// reads that key's shared value, writes the value back with the CAS it was read with, and lets
// the request continue. It uses no ABI package, no SDK and no configuration; it does not read the
// clock, decide, count or reply. Built with the tag clock it also reads the monotonic clock once
// per request, the one further crossing any time-based limiter needs.
//
// The benchmarks in package bench build it with the same toolchain and flags as the filter and run
// it in the same host, in the same run, as the denominator of tollgate / floor.
package main

import "unsafe"

func main() {}

//go:wasmimport env proxy_get_header_map_value
func getHeaderMapValue(mapType uint32, key unsafe.Pointer, keySize uint32, valuePtr, sizePtr unsafe.Pointer) uint32

//go:wasmimport env proxy_get_shared_data
func getSharedData(key unsafe.Pointer, keySize uint32, valuePtr, sizePtr, casPtr unsafe.Pointer) uint32

//go:wasmimport env proxy_set_shared_data
func setSharedData(key unsafe.Pointer, keySize uint32, value unsafe.Pointer, valueSize, cas uint32) uint32

//go:wasmexport proxy_abi_version_0_2_1
func abiVersion() {}

// arena backs the host's allocations: reset at the start of every request, so an admitted request
// allocates nothing on the Go heap. A result larger than what is left gets its own slice.
var (
	arena [16 << 10]byte
	used  uint32
)

//go:wasmexport proxy_on_memory_allocate
func allocate(size uint32) unsafe.Pointer {
	if size == 0 {
		size = 1
	}
	if size > uint32(len(arena))-used {
		b := make([]byte, size)
		return unsafe.Pointer(&b[0])
	}
	p := unsafe.Pointer(&arena[used])
	used += (size + 7) &^ 7
	return p
}

const keyHeader = "x-api-key"

// Result slots the host writes into. Locals whose address is passed to an import escape to the
// heap; these do not, and a VM is single-threaded.
var (
	key, data              *byte
	keySize, size, casSlot uint32
)

// initial is the value written for a key never seen: as large as Tollgate's state, so the host
// copies as much for both.
var initial [32]byte

//go:wasmexport proxy_on_request_headers
func onRequestHeaders(contextID, numHeaders, endOfStream uint32) uint32 {
	used = 0
	readClock()
	if getHeaderMapValue(0, unsafe.Pointer(unsafe.StringData(keyHeader)), uint32(len(keyHeader)), unsafe.Pointer(&key), unsafe.Pointer(&keySize)) != 0 {
		return 0
	}
	casSlot = 0
	value := initial[:]
	if getSharedData(unsafe.Pointer(key), keySize, unsafe.Pointer(&data), unsafe.Pointer(&size), unsafe.Pointer(&casSlot)) == 0 && size > 0 {
		value = unsafe.Slice(data, size)
	}
	setSharedData(unsafe.Pointer(key), keySize, unsafe.Pointer(unsafe.SliceData(value)), uint32(len(value)), casSlot)
	return 0 // Continue
}
