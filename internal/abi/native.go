//go:build !wasip1

package abi

import "github.com/tollgate-proxy/tollgate/internal/wire"

// The host calls of the native twin: the same functions as the wasip1 build, answered by the
// running NativeVM's host (native_vm.go). Their results are the caller's own: there is no arena
// natively.

// Log writes msg at level.
func Log(level LogLevel, msg string) { nativeHost().Log(level, msg) }

// GetPluginConfiguration returns the plugin configuration; only during proxy_on_configure.
func GetPluginConfiguration() ([]byte, error) {
	data, st := nativeHost().PluginConfiguration()
	return data, StatusError(st)
}

// GetProperty reads an Envoy attribute such as ("source", "address").
func GetProperty(path ...string) ([]byte, error) {
	data, st := nativeHost().Property(path)
	return data, StatusError(st)
}

// forgetRequestHeaders is a no-op natively: each read asks the host for the headers (the wasip1
// build keeps them for the callback, the same answers).
func forgetRequestHeaders() {}

// GetHttpRequestHeader returns the first value of a request header, found among the headers
// proxy_get_header_map_pairs gives, as the wasip1 build does.
func GetHttpRequestHeader(name string) (string, error) {
	pairs, err := GetHttpRequestHeaders()
	if err != nil {
		return "", err
	}
	v, found := wire.PairsValue(pairs, name)
	if !found {
		return "", StatusError(wire.StatusNotFound)
	}
	return string(v), nil
}

// GetHttpRequestHeaders returns every request header in the map format (wire.EncodePairs).
func GetHttpRequestHeaders() ([]byte, error) {
	pairs, st := nativeHost().HeaderPairs(MapRequestHeaders)
	return pairs, StatusError(st)
}

// GetHttpResponseStatus returns the response's :status as a number.
func GetHttpResponseStatus() (int, error) {
	v, st := nativeHost().HeaderValue(MapResponseHeaders, ":status")
	if st != wire.StatusOK {
		return 0, StatusError(st)
	}
	return parseStatus([]byte(v))
}

// GetHttpResponseBody returns size bytes of the response body from start; only during
// proxy_on_response_body.
func GetHttpResponseBody(start, size int) ([]byte, error) {
	if start < 0 || size < 0 {
		return nil, StatusError(wire.StatusBadArgument)
	}
	data, st := nativeHost().ResponseBody(start, size)
	return data, StatusError(st)
}

// ReadHttpResponseBody hands the first size bytes of the response body buffer to f, in
// windows as the wasip1 build does.
func ReadHttpResponseBody(size int, f func(window []byte)) error {
	for start := 0; start < size; start += 8 << 10 {
		window, err := GetHttpResponseBody(start, min(8<<10, size-start))
		if err != nil {
			return err
		}
		f(window)
	}
	return nil
}

// GetHttpResponseHeader returns a response header's value.
func GetHttpResponseHeader(name string) (string, error) {
	v, st := nativeHost().HeaderValue(MapResponseHeaders, name)
	return v, StatusError(st)
}

// GetHttpResponseTrailer returns a response trailer's value.
func GetHttpResponseTrailer(name string) (string, error) {
	v, st := nativeHost().HeaderValue(MapResponseTrailers, name)
	return v, StatusError(st)
}

// SetProperty sets a property of the stream (Envoy's filter state "wasm.<path>").
func SetProperty(path string, value []byte) error {
	return StatusError(nativeHost().SetProperty(path, value))
}

// AddHttpRequestHeader appends a request header.
func AddHttpRequestHeader(name, value string) error {
	return StatusError(nativeHost().AddHeader(MapRequestHeaders, name, value))
}

// GetLogLevel returns the host's log level for the plugin.
func GetLogLevel() (LogLevel, error) { return nativeHost().LogLevel(), nil }

// RemoveHttpRequestHeader removes every value of a request header.
func RemoveHttpRequestHeader(name string) error {
	return StatusError(nativeHost().RemoveHeader(MapRequestHeaders, name))
}

// ReplaceHttpResponseHeader sets a response header, replacing any values it had.
func ReplaceHttpResponseHeader(name, value string) error {
	return StatusError(nativeHost().ReplaceHeader(MapResponseHeaders, name, value))
}

// AddHttpResponseHeader appends a response header.
func AddHttpResponseHeader(name, value string) error {
	return StatusError(nativeHost().AddHeader(MapResponseHeaders, name, value))
}

// SendHttpResponse asks for a local reply.
func SendHttpResponse(status uint32, headers [][2]string, body []byte, grpcStatus int32) error {
	return SendLocalReply(status, "", headers, body, grpcStatus)
}

// SendLocalReply is SendHttpResponse with response code details.
func SendLocalReply(status uint32, details string, headers [][2]string, body []byte, grpcStatus int32) error {
	return StatusError(nativeHost().SendLocalReply(status, details, headers, body, grpcStatus))
}

// SendEncodedLocalReply is SendLocalReply with the headers already serialized, answering with
// the host's status. Malformed pairs count as no headers, as in Envoy's host.
func SendEncodedLocalReply(status uint32, details string, pairs, body []byte, grpcStatus int32) wire.Status {
	headers, _ := wire.DecodePairs(pairs)
	return nativeHost().SendLocalReply(status, details, headers, body, grpcStatus)
}

// GetSharedData returns the value and CAS of a shared-data key; StatusNotFound when absent.
func GetSharedData(key string) ([]byte, uint32, wire.Status) {
	value, cas, st := nativeHost().SharedData(key)
	if st != wire.StatusOK {
		return nil, 0, st
	}
	return value, cas, wire.StatusOK
}

// SetSharedData stores value under key if the key's CAS still equals cas (0: unconditional).
func SetSharedData(key string, value []byte, cas uint32) wire.Status {
	return nativeHost().SetSharedData(key, value, cas)
}

// DefineMetric defines (or looks up) a metric and returns its id.
func DefineMetric(kind MetricType, name string) (uint32, error) {
	id, st := nativeHost().DefineMetric(kind, name)
	return id, StatusError(st)
}

// DefineCounter defines (or looks up) a counter metric.
func DefineCounter(name string) (Counter, error) {
	id, err := DefineMetric(MetricCounter, name)
	return Counter(id), err
}

// Increment adds delta (> 0) to the counter.
func (c Counter) Increment(delta uint64) error {
	return StatusError(nativeHost().IncrementMetric(uint32(c), int64(delta)))
}

// SetTickPeriod asks the host to call the plugin context's OnTick every period milliseconds
// (0 stops it).
func SetTickPeriod(milliseconds uint32) error {
	return StatusError(nativeHost().SetTickPeriod(milliseconds))
}

// MonotonicNanos reads the host's monotonic clock; an error when the host's clock fails
// (ClockFailer).
func MonotonicNanos() (int64, error) {
	h := nativeHost()
	if f, ok := h.(ClockFailer); ok && f.ClockFails() {
		return 0, StatusError(wire.StatusInternalFailure)
	}
	return h.Monotonic(), nil
}

// ClockFailer is implemented by a NativeHost whose monotonic clock can fail, as a WASI
// clock_time_get that answers an errno does in the wasip1 build: tests drive the plugin's answer
// to it. Envoy's clock does not fail.
type ClockFailer interface{ ClockFails() bool }

// WallNanos reads the host's wall clock, in nanoseconds of Unix time.
func WallNanos() (int64, error) { return nativeHost().Wall(), nil }

// Gauge is a gauge metric's id.
type Gauge uint32

// DefineGauge defines (or looks up) a gauge metric.
func DefineGauge(name string) (Gauge, error) {
	id, err := DefineMetric(MetricGauge, name)
	return Gauge(id), err
}

// Set sets the gauge.
func (g Gauge) Set(value uint64) error {
	return StatusError(nativeHost().RecordMetric(uint32(g), value))
}

// Value reads the gauge.
func (g Gauge) Value() (uint64, error) {
	v, st := nativeHost().Metric(uint32(g))
	return v, StatusError(st)
}
