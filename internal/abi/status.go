package abi

import "github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

// Status is proxy_status_t, the result of every env.proxy_* host function (spec "Status codes").
type Status uint32

const (
	StatusOK                  Status = 0
	StatusNotFound            Status = 1
	StatusBadArgument         Status = 2
	StatusSerializationFailed Status = 3
	StatusParseFailure        Status = 4
	StatusInvalidMemoryAccess Status = 6
	StatusEmpty               Status = 7
	StatusCasMismatch         Status = 8
	StatusInternalFailure     Status = 10
	StatusUnimplemented       Status = 12
)

// Err maps a status to the SDK's error values, so callers can compare with errors.Is.
func (s Status) Err() error {
	switch s {
	case StatusOK:
		return nil
	case StatusNotFound:
		return types.ErrorStatusNotFound
	case StatusBadArgument:
		return types.ErrorStatusBadArgument
	case StatusEmpty:
		return types.ErrorStatusEmpty
	case StatusCasMismatch:
		return types.ErrorStatusCasMismatch
	case StatusUnimplemented:
		return types.ErrorUnimplemented
	default:
		return types.ErrorInternalFailure
	}
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
