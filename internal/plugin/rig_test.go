package plugin

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
)

// The rig the lifecycle tests share: a started plugin on the native host, requests by key, and
// what became of each stream in one comparable string.

// rlsCluster is the only gRPC cluster the rig's host knows.
const rlsCluster = "ratelimit"

// rig starts the plugin with cfg on a host that knows the rate limit service's cluster, logging
// at info level; a start that fails fails the test.
func rig(t *testing.T, cfg string) *abitest.Host {
	t.Helper()
	return rigWith(t, cfg, abitest.Options{LogLevel: abi.LogLevelInfo})
}

// rigWith is rig with more host options.
func rigWith(t *testing.T, cfg string, opts abitest.Options) *abitest.Host {
	t.Helper()
	opts.VMContext, opts.Configuration, opts.GrpcClusters = &vmContext{}, []byte(cfg), []string{rlsCluster}
	if opts.PluginName == "" {
		opts.PluginName = "test"
	}
	host, status := abitest.Start(t, opts)
	if status != types.OnPluginStartStatusOK {
		t.Fatalf("plugin start: %v; logs %v", status, host.Logs())
	}
	return host
}

// keyed is a GET of path with x-api-key set to key (none when key is "") and the extra headers.
func keyed(key, path string, extra ...[2]string) abitest.Request {
	headers := [][2]string{{":method", "GET"}, {":path", path}}
	if key != "" {
		headers = append(headers, [2]string{"x-api-key", key})
	}
	return abitest.Request{Headers: append(headers, extra...), SourceAddress: "192.0.2.1:5000", EndOfStream: true}
}

// outcome says what became of a stream: "continued", "held" (stopped, not answered), "ended"
// or the local reply as "<status> ra=<Retry-After>".
func outcome(s *abitest.Stream) string {
	switch r := s.Reply(); {
	case r != nil:
		return strconv.Itoa(r.Status) + " ra=" + r.Header("retry-after")
	case s.Continued():
		return "continued"
	case s.Ended():
		return "ended"
	}
	return "held"
}

// checkCounters flushes the counters with a tick and compares those named.
func checkCounters(t *testing.T, host *abitest.Host, want map[string]uint64) {
	t.Helper()
	host.Tick()
	for name, n := range want {
		if !host.Defined(name) {
			t.Errorf("counter %s is not defined", name)
		} else if got := host.Counter(name); got != n {
			t.Errorf("%s = %d, want %d", name, got, n)
		}
	}
}

// logsAt are the host's log lines at level, in one string for comparisons.
func logsAt(host *abitest.Host, level abi.LogLevel) string {
	return fmt.Sprintf("%q", host.LogsAt(level))
}

// rlsAnswer encodes a RateLimitResponse (envoy.service.ratelimit.v3) with its overall code and
// one descriptor status: the limit (requests per unit, unit), the remaining count, and the
// duration until reset in milliseconds (none when negative).
func rlsAnswer(code, requestsPerUnit, unit, remaining uint64, resetMs int64) []byte {
	var limit, status, out []byte
	limit = appendVarintField(appendVarintField(limit, 1, requestsPerUnit), 2, unit)
	status = appendVarintField(status, 1, code)
	status = appendBytesField(status, 2, limit)
	status = appendVarintField(status, 3, remaining)
	if resetMs >= 0 {
		var d []byte
		d = appendVarintField(d, 1, uint64(resetMs/1000))
		d = appendVarintField(d, 2, uint64(resetMs%1000*1e6))
		status = appendBytesField(status, 4, d)
	}
	out = appendVarintField(out, 1, code)
	return appendBytesField(out, 2, status)
}

// RateLimitResponse codes.
const (
	rlsOK        = 1
	rlsOverLimit = 2
	unitMinute   = 2
)

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendVarintField(b []byte, num int, v uint64) []byte {
	return appendVarint(appendVarint(b, uint64(num)<<3), v)
}

func appendBytesField(b []byte, num int, data []byte) []byte {
	b = appendVarint(appendVarint(b, uint64(num)<<3|2), uint64(len(data)))
	return append(b, data...)
}
