//go:build !wasip1

package abi

import (
	"math"
	"time"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// The native twin: the same functions as the wasip1 build, forwarding to the SDK's proxywasm
// package, whose proxytest emulator then drives the plugin in ordinary Go tests. It exists for
// unit tests only; Envoy always runs the wasip1 build, which the e2e suite drives through the
// Envoy-faithful host.

// SetVMContext registers the plugin's VM context with the SDK's emulated host.
func SetVMContext(ctx types.VMContext) { proxywasm.SetVMContext(ctx) }

// Log writes msg at level.
func Log(level LogLevel, msg string) {
	switch level {
	case LogLevelTrace:
		proxywasm.LogTrace(msg)
	case LogLevelDebug:
		proxywasm.LogDebug(msg)
	case LogLevelInfo:
		proxywasm.LogInfo(msg)
	case LogLevelWarn:
		proxywasm.LogWarn(msg)
	case LogLevelError:
		proxywasm.LogError(msg)
	default:
		proxywasm.LogCritical(msg)
	}
}

// GetPluginConfiguration returns the plugin configuration.
func GetPluginConfiguration() ([]byte, error) { return proxywasm.GetPluginConfiguration() }

// GetProperty reads an attribute.
func GetProperty(path ...string) ([]byte, error) { return proxywasm.GetProperty(path) }

// GetHttpRequestHeader returns the first value of a request header.
func GetHttpRequestHeader(name string) (string, error) {
	return proxywasm.GetHttpRequestHeader(name)
}

// GetHttpResponseStatus returns the response's :status as a number.
func GetHttpResponseStatus() (int, error) {
	v, err := proxywasm.GetHttpResponseHeader(":status")
	if err != nil {
		return 0, err
	}
	return parseStatus([]byte(v))
}

// AddHttpRequestHeader appends a request header.
func AddHttpRequestHeader(name, value string) error {
	return proxywasm.AddHttpRequestHeader(name, value)
}

// GetLogLevel returns the host's log level; the SDK's emulator has none, so info.
func GetLogLevel() (LogLevel, error) { return LogLevelInfo, nil }

// RemoveHttpRequestHeader removes a request header.
func RemoveHttpRequestHeader(name string) error { return proxywasm.RemoveHttpRequestHeader(name) }

// ReplaceHttpResponseHeader sets a response header.
func ReplaceHttpResponseHeader(name, value string) error {
	return proxywasm.ReplaceHttpResponseHeader(name, value)
}

// AddHttpResponseHeader appends a response header.
func AddHttpResponseHeader(name, value string) error {
	return proxywasm.AddHttpResponseHeader(name, value)
}

// SendHttpResponse sends a local reply.
func SendHttpResponse(status uint32, headers [][2]string, body []byte, grpcStatus int32) error {
	return proxywasm.SendHttpResponse(status, headers, body, grpcStatus)
}

// SendLocalReply sends a local reply; the SDK's emulator has no response code details, so
// details are dropped here.
func SendLocalReply(status uint32, details string, headers [][2]string, body []byte, grpcStatus int32) error {
	return proxywasm.SendHttpResponse(status, headers, body, grpcStatus)
}

// GetSharedData returns the value and CAS of a shared-data key.
func GetSharedData(key string) ([]byte, uint32, error) { return proxywasm.GetSharedData(key) }

// SetSharedData stores value under key if its CAS still equals cas.
func SetSharedData(key string, value []byte, cas uint32) error {
	return proxywasm.SetSharedData(key, value, cas)
}

// DefineCounter defines a counter metric. The emulator's counters are kept by name.
func DefineCounter(name string) (Counter, error) {
	return Counter(proxywasm.DefineCounterMetric(name)), nil
}

// Increment adds delta to the counter.
func (c Counter) Increment(delta uint64) error {
	proxywasm.MetricCounter(c).Increment(delta)
	return nil
}

// SetTickPeriod asks the emulator for OnTick calls (proxytest fires them on Tick).
func SetTickPeriod(milliseconds uint32) error {
	return proxywasm.SetTickPeriodMilliSeconds(milliseconds)
}

var processStart = time.Now()

// WallNanos reads the wall clock, in nanoseconds of Unix time.
func WallNanos() (int64, error) { return time.Now().UnixNano(), nil }

// MonotonicNanos reads a monotonic clock; natively the process's own, offset so that it starts
// well away from zero like Envoy's.
func MonotonicNanos() (int64, error) {
	return int64(time.Since(processStart)) + math.MaxInt32, nil
}

// Gauge is a gauge metric of the emulator.
type Gauge uint32

// DefineGauge defines a gauge metric.
func DefineGauge(name string) (Gauge, error) { return Gauge(proxywasm.DefineGaugeMetric(name)), nil }

// Set sets the gauge (the emulator only adds: the difference is added).
func (g Gauge) Set(value uint64) error {
	m := proxywasm.MetricGauge(g)
	m.Add(int64(value) - m.Value())
	return nil
}

// Value reads the gauge.
func (g Gauge) Value() (uint64, error) { return uint64(proxywasm.MetricGauge(g).Value()), nil }
