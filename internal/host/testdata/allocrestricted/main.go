// Command allocrestricted is a test module without the abi package: its allocator makes a host
// call that Envoy forbids inside the allocator, so the first allocation must trap the VM.
package main

import "unsafe"

func main() {}

//go:wasmimport env proxy_get_buffer_bytes
func getBufferBytes(buffer, start, length uint32, dataPtr, sizePtr unsafe.Pointer) uint32

//go:wasmimport env proxy_set_tick_period_milliseconds
func setTickPeriod(ms uint32) uint32

//go:wasmexport proxy_abi_version_0_2_1
func abiVersion() {}

//go:wasmexport proxy_on_memory_allocate
func allocate(size uint32) unsafe.Pointer {
	setTickPeriod(1000) // restricted: only proxy_log is allowed here
	buf := make([]byte, size)
	return unsafe.Pointer(&buf[0])
}

//go:wasmexport proxy_on_configure
func configure(rootID, size uint32) uint32 {
	var data *byte
	var n uint32
	getBufferBytes(7, 0, size, unsafe.Pointer(&data), unsafe.Pointer(&n)) // allocates
	return 1
}
