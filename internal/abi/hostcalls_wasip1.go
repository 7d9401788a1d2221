//go:build wasip1

package abi

import (
	"math"
	"unsafe"
)

// Raw host functions of the proxy-wasm ABI v0.2.1 (spec: proxy-wasm/spec
// abi-versions/v0.2.1/README.md, "Functions implemented in the host environment").
// Output pointers receive 32-bit little-endian addresses and sizes written by the host; the Go
// variables behind them are zeroed 8-byte slots, so the upper half stays 0.

// Spec "Logging": proxy_log.
//
//go:wasmimport env proxy_log
func proxyLog(level LogLevel, msg unsafe.Pointer, msgSize uint32) Status

// Spec "Buffers": proxy_get_buffer_bytes.
//
//go:wasmimport env proxy_get_buffer_bytes
func proxyGetBufferBytes(buffer BufferType, start, length uint32, dataPtr, sizePtr unsafe.Pointer) Status

// Spec "Custom properties": proxy_get_property.
//
//go:wasmimport env proxy_get_property
func proxyGetProperty(path unsafe.Pointer, pathSize uint32, dataPtr, sizePtr unsafe.Pointer) Status

// Spec "HTTP fields": proxy_get_header_map_value.
//
//go:wasmimport env proxy_get_header_map_value
func proxyGetHeaderMapValue(m MapType, key unsafe.Pointer, keySize uint32, dataPtr, sizePtr unsafe.Pointer) Status

// Spec "HTTP fields": proxy_add_header_map_value.
//
//go:wasmimport env proxy_add_header_map_value
func proxyAddHeaderMapValue(m MapType, key unsafe.Pointer, keySize uint32, value unsafe.Pointer, valueSize uint32) Status

// Spec "Logging": proxy_get_log_level (ABI 0.2.1 only).
//
//go:wasmimport env proxy_get_log_level
func proxyGetLogLevel(levelPtr unsafe.Pointer) Status

// Spec "HTTP fields": proxy_replace_header_map_value.
//
//go:wasmimport env proxy_replace_header_map_value
func proxyReplaceHeaderMapValue(m MapType, key unsafe.Pointer, keySize uint32, value unsafe.Pointer, valueSize uint32) Status

// Spec "HTTP fields": proxy_remove_header_map_value.
//
//go:wasmimport env proxy_remove_header_map_value
func proxyRemoveHeaderMapValue(m MapType, key unsafe.Pointer, keySize uint32) Status

// Spec "HTTP streams": proxy_send_local_response.
//
//go:wasmimport env proxy_send_local_response
func proxySendLocalResponse(status uint32, details unsafe.Pointer, detailsSize uint32, body unsafe.Pointer, bodySize uint32, headers unsafe.Pointer, headersSize uint32, grpcStatus int32) Status

// Spec "Shared Key-Value Store": proxy_get_shared_data.
//
//go:wasmimport env proxy_get_shared_data
func proxyGetSharedData(key unsafe.Pointer, keySize uint32, dataPtr, sizePtr, casPtr unsafe.Pointer) Status

// Spec "Shared Key-Value Store": proxy_set_shared_data.
//
//go:wasmimport env proxy_set_shared_data
func proxySetSharedData(key unsafe.Pointer, keySize uint32, value unsafe.Pointer, valueSize uint32, cas uint32) Status

// Spec "Metrics": proxy_define_metric.
//
//go:wasmimport env proxy_define_metric
func proxyDefineMetric(t MetricType, name unsafe.Pointer, nameSize uint32, idPtr unsafe.Pointer) Status

// Spec "Metrics": proxy_increment_metric.
//
//go:wasmimport env proxy_increment_metric
func proxyIncrementMetric(id uint32, offset int64) Status

// WASI clock_time_get (wasi_snapshot_preview1). Envoy serves clock 1 from its process-wide
// monotonic clock, the same for every worker VM; the spec deprecates
// proxy_get_current_time_nanoseconds in favour of WASI clocks.
//
//go:wasmimport wasi_snapshot_preview1 clock_time_get
func clockTimeGet(id uint32, precision uint64, out unsafe.Pointer) uint32

func stringData(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

func bytesData(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// hostBytes turns a host-written (address, size) pair into a slice of memory the host obtained
// from proxy_on_memory_allocate; (0, 0) is an empty result.
func hostBytes(data *byte, size uint32) []byte {
	if data == nil || size == 0 {
		return nil
	}
	return unsafe.Slice(data, size)
}

// Log writes msg to Envoy's log at level.
func Log(level LogLevel, msg string) {
	proxyLog(level, stringData(msg), uint32(len(msg)))
}

// GetPluginConfiguration returns the plugin configuration; Envoy offers it only during
// proxy_on_configure.
func GetPluginConfiguration() ([]byte, error) {
	var data *byte
	var size uint32
	st := proxyGetBufferBytes(BufferPluginConfiguration, 0, math.MaxInt32, unsafe.Pointer(&data), unsafe.Pointer(&size))
	if st != StatusOK {
		return nil, st.Err()
	}
	return hostBytes(data, size), nil
}

// GetProperty reads an Envoy attribute such as ("source", "address").
func GetProperty(path ...string) ([]byte, error) {
	encoded := PropertyPath(path)
	var data *byte
	var size uint32
	st := proxyGetProperty(bytesData(encoded), uint32(len(encoded)), unsafe.Pointer(&data), unsafe.Pointer(&size))
	if st != StatusOK {
		return nil, st.Err()
	}
	return hostBytes(data, size), nil
}

// GetHttpRequestHeader returns the first value of a request header; ErrorStatusNotFound when
// absent.
func GetHttpRequestHeader(name string) (string, error) {
	var data *byte
	var size uint32
	st := proxyGetHeaderMapValue(MapRequestHeaders, stringData(name), uint32(len(name)), unsafe.Pointer(&data), unsafe.Pointer(&size))
	if st != StatusOK {
		return "", st.Err()
	}
	b := hostBytes(data, size)
	return unsafe.String(unsafe.SliceData(b), len(b)), nil
}

// AddHttpRequestHeader appends a request header; only during the request-headers callback.
func AddHttpRequestHeader(name, value string) error {
	return proxyAddHeaderMapValue(MapRequestHeaders, stringData(name), uint32(len(name)), stringData(value), uint32(len(value))).Err()
}

// GetLogLevel returns the host's current log level for the plugin: logging below it is dropped
// by the host anyway, so the module can skip building those messages.
func GetLogLevel() (LogLevel, error) {
	var level uint32
	if st := proxyGetLogLevel(unsafe.Pointer(&level)); st != StatusOK {
		return LogLevelInfo, st.Err()
	}
	return LogLevel(level), nil
}

// RemoveHttpRequestHeader removes every value of a request header; only during the
// request-headers callback. Removing an absent header is not an error.
func RemoveHttpRequestHeader(name string) error {
	return proxyRemoveHeaderMapValue(MapRequestHeaders, stringData(name), uint32(len(name))).Err()
}

// ReplaceHttpResponseHeader sets a response header, replacing any values it had.
func ReplaceHttpResponseHeader(name, value string) error {
	return proxyReplaceHeaderMapValue(MapResponseHeaders, stringData(name), uint32(len(name)), stringData(value), uint32(len(value))).Err()
}

// AddHttpResponseHeader appends a response header.
func AddHttpResponseHeader(name, value string) error {
	return proxyAddHeaderMapValue(MapResponseHeaders, stringData(name), uint32(len(name)), stringData(value), uint32(len(value))).Err()
}

// SendHttpResponse asks Envoy for a local reply; Envoy sends it after the current callback
// returns and stops the stream.
func SendHttpResponse(status uint32, headers [][2]string, body []byte, grpcStatus int32) error {
	encoded := EncodePairs(headers)
	return proxySendLocalResponse(status, nil, 0, bytesData(body), uint32(len(body)), bytesData(encoded), uint32(len(encoded)), grpcStatus).Err()
}

// GetSharedData returns the value and CAS of a shared-data key; ErrorStatusNotFound when absent.
func GetSharedData(key string) (value []byte, cas uint32, err error) {
	var data *byte
	var size uint32
	st := proxyGetSharedData(stringData(key), uint32(len(key)), unsafe.Pointer(&data), unsafe.Pointer(&size), unsafe.Pointer(&cas))
	if st != StatusOK {
		return nil, 0, st.Err()
	}
	return hostBytes(data, size), cas, nil
}

// SetSharedData stores value under key if the key's CAS still equals cas (0: unconditional);
// ErrorStatusCasMismatch when another VM wrote first.
func SetSharedData(key string, value []byte, cas uint32) error {
	return proxySetSharedData(stringData(key), uint32(len(key)), bytesData(value), uint32(len(value)), cas).Err()
}

// DefineMetric defines (or looks up) a metric and returns its id.
func DefineMetric(kind MetricType, name string) (uint32, error) {
	var id uint32
	st := proxyDefineMetric(kind, stringData(name), uint32(len(name)), unsafe.Pointer(&id))
	if st != StatusOK {
		return 0, st.Err()
	}
	return id, nil
}

// DefineCounter defines (or looks up) a counter metric.
func DefineCounter(name string) (Counter, error) {
	id, err := DefineMetric(MetricCounter, name)
	return Counter(id), err
}

// Increment adds delta (> 0) to the counter.
func (c Counter) Increment(delta uint64) error {
	return proxyIncrementMetric(uint32(c), int64(delta)).Err()
}

// MonotonicNanos reads the host's monotonic clock. Unlike Go's time package, whose monotonic
// readings are relative to each VM's own start, this is the raw host value, so every worker VM of
// one Envoy process shares the time base.
func MonotonicNanos() (int64, error) {
	var now uint64
	if errno := clockTimeGet(1, 0, unsafe.Pointer(&now)); errno != 0 {
		return 0, StatusInternalFailure.Err()
	}
	return int64(now), nil
}
