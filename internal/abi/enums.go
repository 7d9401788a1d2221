package abi

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// statusErrors are the SDK's error values of the statuses a host function returns, by status;
// nil for OK. StatusError answers an internal failure for any other.
var statusErrors = [...]error{
	wire.StatusOK:            nil,
	wire.StatusNotFound:      types.ErrorStatusNotFound,
	wire.StatusBadArgument:   types.ErrorStatusBadArgument,
	wire.StatusEmpty:         types.ErrorStatusEmpty,
	wire.StatusCasMismatch:   types.ErrorStatusCasMismatch,
	wire.StatusUnimplemented: types.ErrorUnimplemented,
}

// StatusError is the SDK's error for a host call's status (nil for StatusOK), so that callers
// can compare with errors.Is: the error of every call here that answers with a status, in both
// builds (the wasip1 host calls and the native twin, native.go), and of the plugin's own calls
// that take the status as it is.
func StatusError(s wire.Status) error {
	if s == wire.StatusOK {
		return nil
	}
	if int(s) < len(statusErrors) && statusErrors[s] != nil {
		return statusErrors[s]
	}
	return types.ErrorInternalFailure
}

// LogLevel is proxy_log_level_t.
type LogLevel uint32

const (
	LogLevelTrace LogLevel = iota
	LogLevelDebug
	LogLevelInfo
	LogLevelWarn
	LogLevelError
	LogLevelCritical
)

// MapType is proxy_map_type_t: which header map a call addresses.
type MapType uint32

const (
	MapRequestHeaders   MapType = 0
	MapRequestTrailers  MapType = 1
	MapResponseHeaders  MapType = 2
	MapResponseTrailers MapType = 3
)

// BufferType is proxy_buffer_type_t.
type BufferType uint32

const (
	BufferHttpResponseBody    BufferType = 1
	BufferVMConfiguration     BufferType = 6
	BufferPluginConfiguration BufferType = 7
)

// MetricType is proxy_metric_type_t.
type MetricType uint32

const (
	MetricCounter   MetricType = 0
	MetricGauge     MetricType = 1
	MetricHistogram MetricType = 2
)

// Counter is a metric defined with DefineCounter.
type Counter uint32
