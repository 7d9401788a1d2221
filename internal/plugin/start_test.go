package plugin

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
)

// A configuration that cannot be used fails the start, with one critical line per problem.
func TestPluginStartFailures(t *testing.T) {
	const prefix = "tollgate: invalid configuration: "
	tests := []struct {
		name   string
		config string
		want   []string // each critical line's beginning after prefix
	}{
		{"two problems", `{"rules": [{"name": "r", "key": [{"header": "k"}],
		  "limits": [{"capacity": -1, "refill_tokens": 0, "refill_interval": "1s"}]}]}`,
			[]string{"rules[0].limits[0].capacity: ", "rules[0].limits[0].refill_tokens: "}},
		{"not JSON", `{"rules": [`, []string{""}},
		{"too large", `{"rules": []}` + strings.Repeat(" ", 1<<20), []string{"the configuration is larger than 1 MiB (1048576 bytes)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, status := startPlugin(t, tt.config)
			if status != types.OnPluginStartStatusFailed {
				t.Fatal("the configuration was accepted")
			}
			logs := host.LogsAt(abi.LogLevelCritical)
			if len(logs) != len(tt.want) {
				t.Fatalf("critical logs %q, want %d", logs, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(logs[i], prefix+w) {
					t.Errorf("line %d: %q, want it to begin %q", i, logs[i], prefix+w)
				}
			}
		})
	}
}

// A plugin that starts says so once, at info level, with no warning: the host names it by
// plugin_name. (abitest's host always has plugin_name, as Envoy does, so the fallback for other
// hosts cannot be reached here.)
func TestStartIsLoggedOnce(t *testing.T) {
	host := rig(t, testConfig)
	info, warnings := host.LogsAt(abi.LogLevelInfo), host.LogsAt(abi.LogLevelWarn)
	if len(info) != 1 || !strings.HasSuffix(info[0], ": started with 1 rule(s), failure_mode allow") || len(warnings) != 0 {
		t.Errorf("info logs %q, warnings %q", info, warnings)
	}
	if host.TickPeriod() != tickPeriod {
		t.Errorf("tick period %d ms, want %d: no rule holds requests", host.TickPeriod(), tickPeriod)
	}
}

// Counters are handed to the host on a tick, and on the plugin's end without one.
func TestCountersFlushOnTickAndPluginDone(t *testing.T) {
	host := rig(t, testConfig)
	host.Request(keyed("a", "/"))
	host.Tick()
	host.Request(keyed("a", "/"))
	host.Request(keyed("a", "/"))
	if got := host.Counter("tollgate.rule.per-api-key.admitted"); got != 1 {
		t.Errorf("admitted %d after the tick, want 1", got)
	}
	host.StopPlugin()
	if a, l := host.Counter("tollgate.rule.per-api-key.admitted"), host.Counter("tollgate.rule.per-api-key.limited"); a != 2 || l != 1 {
		t.Errorf("after the plugin's end: admitted %d, limited %d; want 2, 1", a, l)
	}
}

// At debug level each decision is one line naming the key by its hash only.
func TestDebugLogsDecisionsByHash(t *testing.T) {
	host := rigWith(t, lifecycleConfig, abitest.Options{LogLevel: abi.LogLevelDebug})
	const key = "secret-alice"
	for i := 0; i < 3; i++ {
		host.Request(keyed(key, "/"))
	}
	host.Request(keyed("", "/"))
	want := []*regexp.Regexp{
		regexp.MustCompile(`^tollgate: decision allow \[api\.0 key#[0-9a-f]+ remaining 1\]$`),
		regexp.MustCompile(`^tollgate: decision allow \[api\.0 key#[0-9a-f]+ remaining 0\]$`),
		regexp.MustCompile(`^tollgate: decision limited rule api retry_after 10s \[api\.0 key#[0-9a-f]+ remaining 0\]$`),
		regexp.MustCompile(`^tollgate: decision missing_key rule api$`),
	}
	logs := host.LogsAt(abi.LogLevelDebug)
	if len(logs) != len(want) {
		t.Fatalf("debug logs %q", logs)
	}
	for i, re := range want {
		if !re.MatchString(logs[i]) || strings.Contains(logs[i], key) {
			t.Errorf("line %d: %q, want %s and no raw key", i, logs[i], re)
		}
	}
}
