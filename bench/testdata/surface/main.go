// Command surface is the surface probe: the crossings Tollgate makes for a request, in the same
// order, with as little as possible between them. It exports the callbacks Tollgate exports for a
// stream (so the host calls it as often), reads all the request's headers at once, reads the
// monotonic clock, reads the key's shared value, and then writes it back with the CAS it was read
// with, or, configured with "reject", answers with Tollgate's 429 for the benchmark's limit. A key
// without a value gets one, as long as Tollgate's row of one bucket. Configured with "reject", it
// remembers the keys it answered, as Tollgate remembers the buckets it found too low, and answers
// them again without reading shared data. It decides nothing, keeps no state per stream and does
// not look for the key among the headers: the benchmarks' requests
// carry it last, where the probe takes it without a scan (Tollgate's lookup, and its look for
// the shadow marker, are Tollgate's own work).
//
// What a request of Tollgate costs beyond this probe's time, measured in the same host and run
// (BenchmarkSurface), is the price of its own code and of the host's work for it; what this probe
// costs beyond the floor probe's is the price of Tollgate's crossings, which no change to that
// code can make cheaper.
package main

import (
	"unsafe"

	"github.com/tollgate-proxy/tollgate/bench/testdata/probes"
)

func main() {}

//go:wasmimport env proxy_get_header_map_pairs
func getHeaderMapPairs(mapType uint32, dataPtr, sizePtr unsafe.Pointer) uint32

//go:wasmimport env proxy_get_buffer_bytes
func getBufferBytes(bufferType, start, length uint32, dataPtr, sizePtr unsafe.Pointer) uint32

//go:wasmimport env proxy_get_shared_data
func getSharedData(key unsafe.Pointer, keySize uint32, valuePtr, sizePtr, casPtr unsafe.Pointer) uint32

//go:wasmimport env proxy_set_shared_data
func setSharedData(key unsafe.Pointer, keySize uint32, value unsafe.Pointer, valueSize, cas uint32) uint32

//go:wasmimport env proxy_send_local_response
func sendLocalResponse(status uint32, details unsafe.Pointer, detailsSize uint32, body unsafe.Pointer, bodySize uint32,
	headers unsafe.Pointer, headersSize uint32, grpcStatus int32) uint32

//go:wasmimport wasi_snapshot_preview1 clock_time_get
func clockTimeGet(id uint32, precision uint64, out unsafe.Pointer) uint32

//go:wasmexport proxy_abi_version_0_2_1
func abiVersion() {}

// arena backs the host's allocations, as the floor probe's.
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

// reject is whether a key with a value is answered 429, from the plugin's configuration.
var reject bool

//go:wasmexport proxy_on_vm_start
func onVMStart(rootID, size uint32) uint32 { return 1 }

//go:wasmexport proxy_on_configure
func onConfigure(rootID, size uint32) uint32 {
	used = 0
	var data *byte
	var n uint32
	if size > 0 && getBufferBytes(7, 0, size, unsafe.Pointer(&data), unsafe.Pointer(&n)) == 0 { // the plugin configuration
		reject = string(unsafe.Slice(data, n)) == "reject"
	}
	return 1
}

//go:wasmexport proxy_on_context_create
func onContextCreate(contextID, parentID uint32) {}

//go:wasmexport proxy_on_delete
func onDelete(contextID uint32) {}

//go:wasmexport proxy_on_response_headers
func onResponseHeaders(contextID, numHeaders, endOfStream uint32) uint32 { return 0 }

//go:wasmexport proxy_on_response_body
func onResponseBody(contextID, bodySize, endOfStream uint32) uint32 { return 0 }

//go:wasmexport proxy_on_response_trailers
func onResponseTrailers(contextID, numTrailers uint32) uint32 { return 0 }

// Result slots the host writes into (see the floor probe).
var (
	headers, data          *byte
	headersSize, size, cas uint32
	now                    uint64
	keyBuf                 [256]byte
)

// row is the value written for a key without one.
var row [probes.SlotSize]byte

// keyPrefix makes the shared-data names as long as Tollgate's rows' for the benchmarks' keys (30
// bytes), so that the host copies as much for both.
const keyPrefix = "tollgate/surface/"

//go:wasmexport proxy_on_request_headers
func onRequestHeaders(contextID, numHeaders, endOfStream uint32) uint32 {
	used = 0
	if getHeaderMapPairs(0, unsafe.Pointer(&headers), unsafe.Pointer(&headersSize)) != 0 {
		return 0
	}
	key := probes.LastValue(unsafe.Slice(headers, headersSize))
	clockTimeGet(1, 0, unsafe.Pointer(&now))
	var seen *uint64
	var h uint64
	if reject {
		if seen, h = probes.Answered(key); *seen == h {
			return reply()
		}
	}
	name := append(keyBuf[:0], keyPrefix...)
	name = append(name, key...)
	cas = 0
	if getSharedData(unsafe.Pointer(&name[0]), uint32(len(name)), unsafe.Pointer(&data), unsafe.Pointer(&size), unsafe.Pointer(&cas)) != 0 {
		setSharedData(unsafe.Pointer(&name[0]), uint32(len(name)), unsafe.Pointer(&row[0]), uint32(len(row)), ^uint32(0))
		return 0
	}
	if reject {
		*seen = h
		return reply()
	}
	setSharedData(unsafe.Pointer(&name[0]), uint32(len(name)), unsafe.Pointer(data), size, cas)
	return 0
}

// reply answers with Tollgate's 429.
func reply() uint32 {
	sendLocalResponse(429, unsafe.Pointer(unsafe.StringData(probes.Details)), uint32(len(probes.Details)),
		unsafe.Pointer(unsafe.StringData(probes.ReplyBody)), uint32(len(probes.ReplyBody)),
		unsafe.Pointer(unsafe.StringData(probes.ReplyHeaders)), uint32(len(probes.ReplyHeaders)), -1)
	return 1 // Pause
}
