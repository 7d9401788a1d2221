package plugin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
	"github.com/tollgate-proxy/tollgate/internal/hostcore"
)

// leanConfig has the lean shape: one rule keyed by one header, one token bucket, every other
// option at its default.
const leanConfig = `{"rules": [{"name": "api", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "10s"}]}]}`

// leanSteps are requests at instants (ns since the start) that the lean shape admits, limits and
// refuses, some with the shadow marker a client may send.
var leanSteps = []struct {
	at  int64
	req abitest.Request
}{
	{0, keyed("alice", "/")},
	{0, keyed("alice", "/", [2]string{ShadowHeader, "api"})},
	{0, keyed("alice", "/")},                                 // limited
	{0, keyed("alice", "/", [2]string{ShadowHeader, "api"})}, // limited, the marker left unread
	{0, keyed("bob", "/")},
	{4e9, keyed("alice", "/")},
	{10e9, keyed("alice", "/")},
	{10e9, keyed("", "/")},                                 // no key: refused
	{10e9, keyed("", "/", [2]string{ShadowHeader, "api"})}, // refused, with the marker
	{10e9, keyed(strings.Repeat("k", 300), "/")},           // too long for the lean path: the general way
	{10e9, keyed("bob", "/")},
	{10e9, keyed("carol", "/", [2]string{ShadowHeader, "api"})}, // a new key: decide's
	{25e9, keyed("alice", "/", [2]string{ShadowHeader, "api"})},
}

// A lean admission is counted and continued at once when the configuration leaves nothing else
// to do for it, and a lean rejection counted and answered at once; at debug level (a log line
// per decision) both go the general way. Both ways must answer, forward, count and store the
// same: the same steps are run at both levels and compared, the second run's shared data
// starting with the hash secret the first stored.
func TestLeanAdmissionAnswersAsTheGeneralWay(t *testing.T) {
	secret := hostcore.NewSharedData()
	var quick, general []string
	t.Run("info", func(t *testing.T) { quick = runLeanSteps(t, abi.LogLevelInfo, true, secret) })
	t.Run("debug", func(t *testing.T) { general = runLeanSteps(t, abi.LogLevelDebug, false, secret) })
	if len(quick) != len(general) {
		t.Fatalf("%d lines answered at once, %d the general way", len(quick), len(general))
	}
	for i := range quick {
		if quick[i] != general[i] {
			t.Errorf("line %d: answered at once %s\n          the general way %s", i, quick[i], general[i])
		}
	}
	for i, want := range []string{"tollgate.rule.api.admitted=8", "tollgate.rule.api.limited=3"} {
		if n := len(leanSteps) + i; len(quick) > n && quick[n] != want {
			t.Errorf("%s, want %s", quick[n], want)
		}
	}
}

// runLeanSteps runs leanSteps on a new host at level, requiring that the plugin answers lean
// admissions at once (quick) or not. Its shared data starts with secret's entries; when secret
// has none, it gets the new host's after the start. It returns each stream's outcome, the
// counters, then the shared data.
func runLeanSteps(t *testing.T, level abi.LogLevel, quick bool, secret *hostcore.SharedData) []string {
	vm, data := &recordingVM{}, hostcore.NewSharedData()
	for key, value := range secret.Entries("") {
		data.Set("", key, value, 0)
	}
	host, status := abitest.Start(t, abitest.Options{VMContext: vm, Configuration: []byte(leanConfig),
		PluginName: "test", LogLevel: level, SharedData: data})
	if status != types.OnPluginStartStatusOK {
		t.Fatalf("plugin start: %v; logs %v", status, host.Logs())
	}
	if len(secret.Entries("")) == 0 {
		for key, value := range data.Entries("") {
			secret.Set("", key, value, 0)
		}
	}
	if got := vm.plugin.leanAdmission != nil; got != quick {
		t.Fatalf("at log level %v: lean admissions answered at once %v, want %v", level, got, quick)
	}
	if got := vm.plugin.leanRejection != nil; got != quick {
		t.Fatalf("at log level %v: lean rejections answered at once %v, want %v", level, got, quick)
	}
	var seen []string
	for _, step := range leanSteps {
		host.SetMonotonic(abitest.DefaultMonotonic + step.at)
		stream, _ := host.Request(step.req)
		got := outcome(stream)
		if stream.Continued() {
			if _, marked := hostcore.HeaderValue(stream.Forwarded(), ShadowHeader); marked {
				t.Errorf("at log level %v: the client's %s reached the upstream: %q", level, ShadowHeader, stream.Forwarded())
			}
			got += fmt.Sprintf(" forwarded %q", stream.Forwarded())
			stream.ResponseHeaders(200, [][2]string{{"x-upstream", "1"}})
			got += fmt.Sprintf(" response %q", stream.ResponseHeadersSent())
		}
		seen = append(seen, got)
		stream.End()
	}
	host.Tick()
	for _, name := range []string{"tollgate.rule.api.admitted", "tollgate.rule.api.limited",
		"tollgate.rule.api.missing_key", "tollgate.internal_errors"} {
		seen = append(seen, fmt.Sprintf("%s=%d", name, host.Counter(name)))
	}
	return append(seen, fmt.Sprintf("%q", data.Entries("")))
}

// A rule keyed on the shadow marker's header has the lean shape, but the plugin decides it the
// general way, which removes a client's marker first: the key is then missing, as it always was,
// whether the request carries the marker or not.
func TestRuleKeyedOnTheShadowMarker(t *testing.T) {
	config := `{"rules": [{"name": "api", "key": [{"header": "` + ShadowHeader + `"}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "10s"}]}]}`
	vm := &recordingVM{}
	host, status := abitest.Start(t, abitest.Options{VMContext: vm, Configuration: []byte(config), PluginName: "test",
		LogLevel: abi.LogLevelInfo})
	if status != types.OnPluginStartStatusOK {
		t.Fatalf("plugin start: %v; logs %v", status, host.Logs())
	}
	if vm.plugin.gate.LeanKeyHeader() != ShadowHeader || vm.plugin.leanKeyHeader != "" {
		t.Fatalf("the gate's lean key header %q, the plugin's %q: want %q and none",
			vm.plugin.gate.LeanKeyHeader(), vm.plugin.leanKeyHeader, ShadowHeader)
	}
	for i, req := range []abitest.Request{keyed("", "/", [2]string{ShadowHeader, "api"}), keyed("", "/")} {
		stream, _ := host.Request(req)
		if got := outcome(stream); got != "401 ra=" {
			t.Errorf("request %d: %s, want 401 ra= (the key missing)", i, got)
		}
		stream.End()
	}
	checkCounters(t, host, map[string]uint64{"tollgate.rule.api.missing_key": 2, "tollgate.rule.api.admitted": 0})
}

// recordingVM keeps the plugin context it made, for a test to look into.
type recordingVM struct {
	types.DefaultVMContext
	plugin *pluginContext
}

func (v *recordingVM) NewPluginContext(uint32) types.PluginContext {
	v.plugin = &pluginContext{}
	return v.plugin
}

// The streams of a configuration of the lean shape are let go at their request headers
// (abi.ReleaseStream), whether admitted (a known key or a new one), limited or refused: their end
// runs nothing of the plugin's, and their context, kept by the ABI, serves the next stream without
// going through the free list. Every stream of a configuration without the lean shape ends as
// before, its context put on the free list by OnHttpStreamDone.
func TestLeanStreamsAreLetGo(t *testing.T) {
	withHeaders := `{"rate_limit_headers": "draft", "rules": [{"name": "api", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "10s"}]}]}`
	tests := []struct {
		name, config string
		freeAfter    string // the free list's length after each stream's end
	}{
		{"lean", leanConfig, "[0 0 0 0 0]"},
		{"rate-limit headers", withHeaders, "[1 1 1 1 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm := &recordingVM{}
			host, status := abitest.Start(t, abitest.Options{VMContext: vm, Configuration: []byte(tt.config), PluginName: "test",
				LogLevel: abi.LogLevelInfo})
			if status != types.OnPluginStartStatusOK {
				t.Fatalf("plugin start: %v; logs %v", status, host.Logs())
			}
			var free, statuses []int
			for _, key := range []string{"alice", "alice", "alice", "", "bob"} { // admitted twice, limited, refused, admitted
				s, _ := host.Request(keyed(key, "/"))
				if s.Continued() {
					s.ResponseHeaders(200, nil)
					statuses = append(statuses, 200)
				} else {
					statuses = append(statuses, s.Reply().Status)
				}
				s.End()
				free = append(free, len(vm.plugin.free))
			}
			if got := fmt.Sprint(statuses); got != "[200 200 429 401 200]" {
				t.Errorf("statuses %s", got)
			}
			if got := fmt.Sprint(free); got != tt.freeAfter {
				t.Errorf("free contexts after each stream %s, want %s", got, tt.freeAfter)
			}
		})
	}
}

// A request whose headers cannot be read follows failure_mode, under the lean shape as the
// general way: its key is not taken as missing (a 401) from headers that were never read.
func TestUnreadableHeadersFollowTheFailureMode(t *testing.T) {
	for name, level := range map[string]abi.LogLevel{"info": abi.LogLevelInfo, "debug": abi.LogLevelDebug} {
		t.Run(name, func(t *testing.T) {
			host, status := abitest.Start(t, abitest.Options{VMContext: &recordingVM{}, Configuration: []byte(leanConfig),
				PluginName: "test", LogLevel: level})
			if status != types.OnPluginStartStatusOK {
				t.Fatalf("plugin start: %v; logs %v", status, host.Logs())
			}
			req := keyed("alice", "/")
			req.UnreadableHeaders = true
			stream, _ := host.Request(req)
			if got := outcome(stream); got != "continued" {
				t.Errorf("%s, want continued (failure_mode allow)", got)
			}
			stream.End()
			host.Tick()
			if got := host.Counter("tollgate.internal_errors"); got != 1 {
				t.Errorf("%d internal errors counted, want 1", got)
			}
		})
	}
}
