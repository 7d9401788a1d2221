package plugin

import (
	"strings"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
)

// These tests run the glue natively through the native twin of internal/abi and its
// in-process host (abitest), for fast feedback and readable stack traces. The real module is
// judged by the e2e suite in the Envoy-faithful host.

const testConfig = `{"rules": [{"name": "per-api-key", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}]}], "rate_limit_headers": "x-ratelimit"}`

func startPlugin(t *testing.T, config string) (*abitest.Host, types.OnPluginStartStatus) {
	t.Helper()
	return abitest.Start(t, abitest.Options{VMContext: &vmContext{}, Configuration: []byte(config), PluginName: "test"})
}

func TestGlueAnswersEachVerdict(t *testing.T) {
	host, status := startPlugin(t, testConfig)
	if status != types.OnPluginStartStatusOK {
		t.Fatalf("plugin start: %v; logs %q", status, host.LogsAt(abi.LogLevelCritical))
	}
	steps := []struct {
		key        string
		action     types.Action
		status     uint32 // of the local reply; 0 when the request continues
		retryAfter string
		remaining  string
	}{
		{"alice", types.ActionContinue, 0, "", "1"},
		{"alice", types.ActionContinue, 0, "", "0"},
		{"alice", types.ActionPause, 429, "3600", ""},
		{"", types.ActionPause, 401, "", ""},
	}
	for i, s := range steps {
		headers := [][2]string{{":path", "/"}}
		if s.key != "" {
			headers = append(headers, [2]string{"x-api-key", s.key})
		}
		stream, got := host.Request(abitest.Request{Headers: headers, EndOfStream: true})
		if got != s.action {
			t.Fatalf("step %d: action %v, want %v", i, got, s.action)
		}
		reply := stream.Reply()
		switch {
		case s.status == 0 && reply != nil:
			t.Fatalf("step %d: unexpected local reply %d", i, reply.Status)
		case s.status != 0 && (reply == nil || reply.Status != int(s.status)):
			t.Fatalf("step %d: local reply %+v, want status %d", i, reply, s.status)
		case s.status == 429 && reply.Header("retry-after") != s.retryAfter:
			t.Fatalf("step %d: retry-after %q, want %q", i, reply.Header("retry-after"), s.retryAfter)
		}
		if s.status == 0 {
			stream.ResponseHeaders(200, nil)
			if got := stream.ResponseHeader("x-ratelimit-remaining"); got != s.remaining {
				t.Fatalf("step %d: x-ratelimit-remaining %q, want %q", i, got, s.remaining)
			}
		}
		stream.End()
	}
	// Counted in the VM, handed to the host on the tick.
	if got := host.Counter("tollgate.rule.per-api-key.admitted"); got != 0 {
		t.Errorf("admitted = %d before the tick, want 0: counters are flushed on ticks", got)
	}
	host.Tick()
	for name, want := range map[string]uint64{"tollgate.rule.per-api-key.admitted": 2, "tollgate.rule.per-api-key.limited": 1, "tollgate.rule.per-api-key.missing_key": 1} {
		if got := host.Counter(name); !host.Defined(name) || got != want {
			t.Errorf("%s = %d (defined %v), want %d", name, got, host.Defined(name), want)
		}
	}
}

func TestInvalidConfigFailsPluginStart(t *testing.T) {
	host, status := startPlugin(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"capacity": -1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	if status != types.OnPluginStartStatusFailed {
		t.Fatal("an invalid configuration was accepted")
	}
	if logs := host.LogsAt(abi.LogLevelCritical); len(logs) != 1 || !strings.HasPrefix(logs[0], "tollgate: invalid configuration: rules[0].limits[0].capacity: ") {
		t.Fatalf("critical logs %q", logs)
	}
}
