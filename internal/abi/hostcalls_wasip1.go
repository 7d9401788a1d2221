//go:build wasip1

package abi

import (
	"math"
	"unsafe"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// Raw host functions of the proxy-wasm ABI v0.2.1 (spec: proxy-wasm/spec
// abi-versions/v0.2.1/README.md, "Functions implemented in the host environment").
// Output pointers receive 32-bit little-endian addresses and sizes written by the host, into the
// result slots below.

// Spec "Logging": proxy_log.
//
//go:wasmimport env proxy_log
func proxyLog(level LogLevel, msg unsafe.Pointer, msgSize uint32) wire.Status

// Spec "Buffers": proxy_get_buffer_bytes.
//
//go:wasmimport env proxy_get_buffer_bytes
func proxyGetBufferBytes(buffer BufferType, start, length uint32, dataPtr, sizePtr unsafe.Pointer) wire.Status

// Spec "Custom properties": proxy_get_property.
//
//go:wasmimport env proxy_get_property
func proxyGetProperty(path unsafe.Pointer, pathSize uint32, dataPtr, sizePtr unsafe.Pointer) wire.Status

// Spec "Custom properties": proxy_set_property.
//
//go:wasmimport env proxy_set_property
func proxySetProperty(path unsafe.Pointer, pathSize uint32, value unsafe.Pointer, valueSize uint32) wire.Status

// Spec "HTTP fields": proxy_get_header_map_value.
//
//go:wasmimport env proxy_get_header_map_value
func proxyGetHeaderMapValue(m MapType, key unsafe.Pointer, keySize uint32, dataPtr, sizePtr unsafe.Pointer) wire.Status

// Spec "HTTP fields": proxy_get_header_map_pairs.
//
//go:wasmimport env proxy_get_header_map_pairs
func proxyGetHeaderMapPairs(m MapType, dataPtr, sizePtr unsafe.Pointer) wire.Status

// Spec "HTTP fields": proxy_add_header_map_value.
//
//go:wasmimport env proxy_add_header_map_value
func proxyAddHeaderMapValue(m MapType, key unsafe.Pointer, keySize uint32, value unsafe.Pointer, valueSize uint32) wire.Status

// Spec "Logging": proxy_get_log_level (ABI 0.2.1 only).
//
//go:wasmimport env proxy_get_log_level
func proxyGetLogLevel(levelPtr unsafe.Pointer) wire.Status

// Spec "HTTP fields": proxy_replace_header_map_value.
//
//go:wasmimport env proxy_replace_header_map_value
func proxyReplaceHeaderMapValue(m MapType, key unsafe.Pointer, keySize uint32, value unsafe.Pointer, valueSize uint32) wire.Status

// Spec "HTTP fields": proxy_remove_header_map_value.
//
//go:wasmimport env proxy_remove_header_map_value
func proxyRemoveHeaderMapValue(m MapType, key unsafe.Pointer, keySize uint32) wire.Status

// Spec "HTTP streams": proxy_send_local_response.
//
//go:wasmimport env proxy_send_local_response
func proxySendLocalResponse(status uint32, details unsafe.Pointer, detailsSize uint32, body unsafe.Pointer, bodySize uint32, headers unsafe.Pointer, headersSize uint32, grpcStatus int32) wire.Status

// Spec "Shared Key-Value Store": proxy_get_shared_data.
//
//go:wasmimport env proxy_get_shared_data
func proxyGetSharedData(key unsafe.Pointer, keySize uint32, dataPtr, sizePtr, casPtr unsafe.Pointer) wire.Status

// Spec "Shared Key-Value Store": proxy_set_shared_data.
//
//go:wasmimport env proxy_set_shared_data
func proxySetSharedData(key unsafe.Pointer, keySize uint32, value unsafe.Pointer, valueSize uint32, cas uint32) wire.Status

// Spec "Metrics": proxy_define_metric.
//
//go:wasmimport env proxy_define_metric
func proxyDefineMetric(t MetricType, name unsafe.Pointer, nameSize uint32, idPtr unsafe.Pointer) wire.Status

// Spec "Metrics": proxy_increment_metric.
//
//go:wasmimport env proxy_increment_metric
func proxyIncrementMetric(id uint32, offset int64) wire.Status

// Spec "Timers": proxy_set_tick_period_milliseconds.
//
//go:wasmimport env proxy_set_tick_period_milliseconds
func proxySetTickPeriodMilliseconds(period uint32) wire.Status

// WASI clock_time_get (wasi_snapshot_preview1). Envoy serves clock 1 from its process-wide
// monotonic clock, the same for every worker VM; the spec deprecates
// proxy_get_current_time_nanoseconds in favour of WASI clocks.
//
//go:wasmimport wasi_snapshot_preview1 clock_time_get
func clockTimeGet(id uint32, precision uint64, out unsafe.Pointer) uint32

func stringData(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

func bytesData(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// Result slots. The host writes each output of a host call (an address, a size, a CAS, an id, a
// level, a time) into module memory at the pointer it was given. Locals whose address is passed to
// an import escape to the heap, one allocation each per call; these package-level slots do not.
// A VM is single-threaded and the allocator, the only code that runs during a host call, makes no
// host call, so one set of slots serves every call. Each wrapper reads its slots right after its
// call. The address slot is a plain integer, not a pointer the garbage collector would trust: the
// memory it designates is kept alive by lastAlloc (see proxyOnMemoryAllocate).
var (
	resultAddr, resultSize, resultU32 uint32
	resultU64                         uint64
)

var (
	ptrAddr = unsafe.Pointer(&resultAddr)
	ptrSize = unsafe.Pointer(&resultSize)
	ptrU32  = unsafe.Pointer(&resultU32)
	ptrU64  = unsafe.Pointer(&resultU64)
)

// beginResult prepares the slots for a call that may return variable-size data.
func beginResult() {
	resultAddr, resultSize, lastAlloc = 0, 0, nil
}

// hostResult is the variable-size result of the last host call: (0, 0) is an empty result,
// otherwise the memory the host obtained from the allocator during that call. The host writes the
// address it was given; anything else is refused rather than trusted.
func hostResult() ([]byte, wire.Status) {
	if resultAddr == 0 && resultSize == 0 {
		return nil, wire.StatusOK
	}
	if lastAlloc == nil || uint32(uintptr(lastAlloc)) != resultAddr || resultSize > lastAllocSize {
		return nil, wire.StatusInvalidMemoryAccess
	}
	// Sliced from an array type rather than with unsafe.Slice, whose overflow check is a call.
	return (*[1 << 32]byte)(lastAlloc)[:resultSize:resultSize], wire.StatusOK
}

// Log writes msg to Envoy's log at level.
func Log(level LogLevel, msg string) {
	proxyLog(level, stringData(msg), uint32(len(msg)))
}

// GetPluginConfiguration returns the plugin configuration; Envoy offers it only during
// proxy_on_configure. The result is the caller's own copy.
func GetPluginConfiguration() ([]byte, error) {
	beginResult()
	st := proxyGetBufferBytes(BufferPluginConfiguration, 0, math.MaxInt32, ptrAddr, ptrSize)
	if st != wire.StatusOK {
		return nil, StatusError(st)
	}
	data, st := hostResult()
	if st != wire.StatusOK {
		return nil, StatusError(st)
	}
	return append([]byte(nil), data...), nil
}

// propertyPath is GetProperty's reused buffer for the encoded path.
var propertyPath []byte

// GetProperty reads an Envoy attribute such as ("source", "address"). The result lives in the
// scratch arena: valid until the current callback returns (see proxyOnMemoryAllocate); copy it
// to keep it longer.
func GetProperty(path ...string) ([]byte, error) {
	propertyPath = wire.AppendPropertyPath(propertyPath[:0], path)
	beginResult()
	st := proxyGetProperty(bytesData(propertyPath), uint32(len(propertyPath)), ptrAddr, ptrSize)
	if st != wire.StatusOK {
		return nil, StatusError(st)
	}
	data, st := hostResult()
	return data, StatusError(st)
}

// requestHeaders are the request headers as one proxy_get_header_map_pairs call returned them, in
// the scratch arena: the first read of a request header in a callback fetches them all, and the
// callback's later reads (the shadow marker, each rule's key, match and cost headers, the
// content-type of a reply) cost no host call. They are forgotten when the arena is reset (every
// callback), when another stream becomes the effective context, and when the module edits the
// request's headers. Where Envoy has no request headers (after the request phase) it answers the
// pairs call with none, so a read there finds nothing, ErrorStatusNotFound, where
// proxy_get_header_map_value would answer BadArgument (envoy source/extensions/common/wasm/
// context.cc, getHeaderMapPairs and getHeaderMapValue).
var requestHeaders struct {
	pairs []byte
	read  bool
	err   error
}

// forgetRequestHeaders drops the headers read in this callback (see requestHeaders): the next read
// asks the host again, and replaces both their pairs and their error, which stay until then,
// unread: clearing them here would store two pointers, each behind a check of the garbage
// collector's write barrier, in every callback.
func forgetRequestHeaders() {
	requestHeaders.read = false
}

// GetHttpRequestHeader returns the first value of a request header; ErrorStatusNotFound when
// absent. The string lives in the scratch arena: valid until the current callback returns (see
// proxyOnMemoryAllocate); copy it (strings.Clone) to keep it longer. After the first read in a
// callback, a read is a lookup and no host call.
func GetHttpRequestHeader(name string) (string, error) {
	if !requestHeaders.read {
		readRequestHeaders()
	}
	if requestHeaders.err != nil {
		return "", requestHeaders.err
	}
	v, found := wire.PairsValue(requestHeaders.pairs, name)
	if !found {
		return "", types.ErrorStatusNotFound
	}
	return unsafe.String(unsafe.SliceData(v), len(v)), nil
}

// GetHttpRequestHeaders returns every request header in the map format (wire.EncodePairs), in
// the scratch arena like GetHttpRequestHeader's values; read once per callback (requestHeaders).
func GetHttpRequestHeaders() ([]byte, error) {
	if !requestHeaders.read {
		readRequestHeaders()
	}
	return requestHeaders.pairs, requestHeaders.err
}

// readRequestHeaders fetches the request's headers for the callback (see requestHeaders).
func readRequestHeaders() {
	beginResult()
	st := proxyGetHeaderMapPairs(MapRequestHeaders, ptrAddr, ptrSize)
	var pairs []byte
	if st == wire.StatusOK {
		pairs, st = hostResult()
	}
	// Both replaced, a failed read's pairs with none: forgetting them left the last read's.
	requestHeaders.pairs, requestHeaders.read, requestHeaders.err = pairs, true, StatusError(st)
}

// GetHttpResponseStatus returns the response's :status as a number; only during the
// response-headers callback. A value that is not three digits is ErrorStatusBadArgument.
func GetHttpResponseStatus() (int, error) {
	const name = ":status"
	beginResult()
	st := proxyGetHeaderMapValue(MapResponseHeaders, stringData(name), uint32(len(name)), ptrAddr, ptrSize)
	if st != wire.StatusOK {
		return 0, StatusError(st)
	}
	b, st := hostResult()
	if st != wire.StatusOK {
		return 0, StatusError(st)
	}
	return parseStatus(b)
}

// GetHttpResponseBody returns size bytes of the response body from start (fewer at its end);
// only during proxy_on_response_body, where the buffer is the chunk just delivered, or
// everything held since the callback last answered StopIterationAndBuffer. The bytes live in the
// scratch arena like GetProperty's, or on the Go heap when larger than what is left of it: valid
// until the current callback returns (see proxyOnMemoryAllocate); copy them to keep them longer.
func GetHttpResponseBody(start, size int) ([]byte, error) {
	if start < 0 || size < 0 || start > math.MaxInt32 || size > math.MaxInt32 {
		return nil, StatusError(wire.StatusBadArgument)
	}
	beginResult()
	st := proxyGetBufferBytes(BufferHttpResponseBody, uint32(start), uint32(size), ptrAddr, ptrSize)
	if st != wire.StatusOK {
		return nil, StatusError(st)
	}
	data, st := hostResult()
	return data, StatusError(st)
}

// ReadHttpResponseBody reads the first size bytes of the response body buffer in windows the
// arena holds, handing each to f before reading the next: a chunk of any size is read without a
// heap allocation, so a large body does not grow the VM's memory. f must not keep a window.
func ReadHttpResponseBody(size int, f func(window []byte)) error {
	mark := arena.used
	defer func() { arena.used = mark }()
	for start := 0; start < size; start += bodyWindow {
		arena.used = mark // the previous window is consumed
		window, err := GetHttpResponseBody(start, min(bodyWindow, size-start))
		if err != nil {
			return err
		}
		f(window)
	}
	return nil
}

// bodyWindow is the most ReadHttpResponseBody reads in one host call: half the arena.
const bodyWindow = len(arena.buf) / 2

// GetHttpResponseHeader returns a response header's value, or an error with wire.StatusNotFound
// when it is absent. The string lives in the scratch arena, as GetHttpRequestHeader's.
func GetHttpResponseHeader(name string) (string, error) {
	return responseMapValue(MapResponseHeaders, name)
}

// GetHttpResponseTrailer returns a response trailer's value, in the scratch arena; the map is
// readable from the trailers callback on.
func GetHttpResponseTrailer(name string) (string, error) {
	return responseMapValue(MapResponseTrailers, name)
}

// responseMapValue reads a value of a response map; it lives in the scratch arena until the
// callback returns (later host calls allocate past it).
func responseMapValue(m MapType, name string) (string, error) {
	beginResult()
	st := proxyGetHeaderMapValue(m, stringData(name), uint32(len(name)), ptrAddr, ptrSize)
	if st != wire.StatusOK {
		return "", StatusError(st)
	}
	b, st := hostResult()
	if st != wire.StatusOK {
		return "", StatusError(st)
	}
	return unsafe.String(unsafe.SliceData(b), len(b)), nil
}

// SetProperty sets a property of the stream: Envoy keeps it as the stream's filter state
// "wasm.<path>" (envoy context.cc setProperty), which an access log prints with
// %FILTER_STATE(wasm.<path>:PLAIN)%. ErrorStatusNotFound without a stream context.
func SetProperty(path string, value []byte) error {
	return StatusError(proxySetProperty(stringData(path), uint32(len(path)), bytesData(value), uint32(len(value))))
}

// AddHttpRequestHeader appends a request header; only during the request-headers callback.
func AddHttpRequestHeader(name, value string) error {
	forgetRequestHeaders()
	return StatusError(proxyAddHeaderMapValue(MapRequestHeaders, stringData(name), uint32(len(name)), stringData(value), uint32(len(value))))
}

// GetLogLevel returns the host's current log level for the plugin: logging below it is dropped
// by the host anyway, so the module can skip building those messages.
func GetLogLevel() (LogLevel, error) {
	if st := proxyGetLogLevel(ptrU32); st != wire.StatusOK {
		return LogLevelInfo, StatusError(st)
	}
	return LogLevel(resultU32), nil
}

// RemoveHttpRequestHeader removes every value of a request header; only during the
// request-headers callback. Removing an absent header is not an error.
func RemoveHttpRequestHeader(name string) error {
	forgetRequestHeaders()
	return StatusError(proxyRemoveHeaderMapValue(MapRequestHeaders, stringData(name), uint32(len(name))))
}

// ReplaceHttpResponseHeader sets a response header, replacing any values it had.
func ReplaceHttpResponseHeader(name, value string) error {
	return StatusError(proxyReplaceHeaderMapValue(MapResponseHeaders, stringData(name), uint32(len(name)), stringData(value), uint32(len(value))))
}

// AddHttpResponseHeader appends a response header.
func AddHttpResponseHeader(name, value string) error {
	return StatusError(proxyAddHeaderMapValue(MapResponseHeaders, stringData(name), uint32(len(name)), stringData(value), uint32(len(value))))
}

// encodedPairs is SendHttpResponse's reused buffer for the serialized headers; Envoy copies them
// during the call.
var encodedPairs []byte

// SendHttpResponse asks Envoy for a local reply; Envoy sends it after the current callback
// returns and stops the stream.
func SendHttpResponse(status uint32, headers [][2]string, body []byte, grpcStatus int32) error {
	return SendLocalReply(status, "", headers, body, grpcStatus)
}

// SendLocalReply is SendHttpResponse with response code details, the token Envoy's access logs
// show as %RESPONSE_CODE_DETAILS% (whitespace becomes '_'). grpcStatus 0..16 is the grpc-status
// Envoy sends to a gRPC client; -1 lets Envoy map the HTTP status.
func SendLocalReply(status uint32, details string, headers [][2]string, body []byte, grpcStatus int32) error {
	encodedPairs = wire.AppendPairs(encodedPairs[:0], headers)
	return StatusError(SendEncodedLocalReply(status, details, encodedPairs, body, grpcStatus))
}

// SendEncodedLocalReply is SendLocalReply with the headers already serialized (wire.AppendPairs,
// wire.PairsTemplate). It answers with the host's status, as the shared-data calls do: small
// enough to inline then, it costs a rejection no call of its own.
func SendEncodedLocalReply(status uint32, details string, pairs, body []byte, grpcStatus int32) wire.Status {
	return proxySendLocalResponse(status, unsafe.Pointer(unsafe.StringData(details)), uint32(len(details)),
		unsafe.Pointer(unsafe.SliceData(body)), uint32(len(body)), unsafe.Pointer(unsafe.SliceData(pairs)), uint32(len(pairs)), grpcStatus)
}

// GetSharedData returns the value and CAS of a shared-data key; StatusNotFound when absent. The
// value lives in the scratch arena: valid until the current callback returns (see
// proxyOnMemoryAllocate); copy it to keep it longer. Shared data answers with a status, not an
// error: the decision tells not-found and CAS mismatch apart on every new key, and comparing
// statuses costs no call where errors.Is costs several.
func GetSharedData(key string) (value []byte, cas uint32, st wire.Status) {
	beginResult()
	resultU32 = 0
	if st = proxyGetSharedData(stringData(key), uint32(len(key)), ptrAddr, ptrSize, ptrU32); st != wire.StatusOK {
		return nil, 0, st
	}
	if value, st = hostResult(); st != wire.StatusOK {
		return nil, 0, st
	}
	return value, resultU32, wire.StatusOK
}

// SetSharedData stores value under key if the key's CAS still equals cas (0: unconditional);
// StatusCasMismatch when another VM wrote first.
func SetSharedData(key string, value []byte, cas uint32) wire.Status {
	return proxySetSharedData(stringData(key), uint32(len(key)), bytesData(value), uint32(len(value)), cas)
}

// DefineMetric defines (or looks up) a metric and returns its id.
func DefineMetric(kind MetricType, name string) (uint32, error) {
	st := proxyDefineMetric(kind, stringData(name), uint32(len(name)), ptrU32)
	if st != wire.StatusOK {
		return 0, StatusError(st)
	}
	return resultU32, nil
}

// DefineCounter defines (or looks up) a counter metric.
func DefineCounter(name string) (Counter, error) {
	id, err := DefineMetric(MetricCounter, name)
	return Counter(id), err
}

// Increment adds delta (> 0) to the counter.
func (c Counter) Increment(delta uint64) error {
	return StatusError(proxyIncrementMetric(uint32(c), int64(delta)))
}

// SetTickPeriod asks the host to call the plugin context's OnTick every period milliseconds
// (0 stops it). The timer belongs to the root context that sets it.
func SetTickPeriod(milliseconds uint32) error {
	return StatusError(proxySetTickPeriodMilliseconds(milliseconds))
}

// MonotonicNanos reads the host's monotonic clock. Unlike Go's time package, whose monotonic
// readings are relative to each VM's own start, this is the raw host value, so every worker VM of
// one Envoy process shares the time base.
func MonotonicNanos() (int64, error) {
	if clockTimeGet(1, 0, ptrU64) != 0 {
		return 0, errClock
	}
	return int64(resultU64), nil
}

// WallNanos reads the host's wall clock (WASI realtime), in nanoseconds of Unix time: what
// calendar windows are aligned on. NTP or an operator may step it.
func WallNanos() (int64, error) {
	if clockTimeGet(0, 0, ptrU64) != 0 {
		return 0, errClock
	}
	return int64(resultU64), nil
}

// errClock is MonotonicNanos's error, made once so that the function stays small enough to inline.
var errClock = StatusError(wire.StatusInternalFailure)

// Spec "Metrics": proxy_record_metric (sets a gauge).
//
//go:wasmimport env proxy_record_metric
func proxyRecordMetric(id uint32, value uint64) wire.Status

// Spec "Metrics": proxy_get_metric.
//
//go:wasmimport env proxy_get_metric
func proxyGetMetric(id uint32, resultPtr unsafe.Pointer) wire.Status

// Gauge is a gauge metric's id.
type Gauge uint32

// DefineGauge defines (or looks up) a gauge metric. Envoy binds one stat to the name for every
// VM that defines it.
func DefineGauge(name string) (Gauge, error) {
	id, err := DefineMetric(MetricGauge, name)
	return Gauge(id), err
}

// Set sets the gauge.
func (g Gauge) Set(value uint64) error { return StatusError(proxyRecordMetric(uint32(g), value)) }

// Value reads the gauge, as any VM last set it.
func (g Gauge) Value() (uint64, error) {
	if st := proxyGetMetric(uint32(g), ptrU64); st != wire.StatusOK {
		return 0, StatusError(st)
	}
	return resultU64, nil
}
