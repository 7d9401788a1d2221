package plugin

import (
	"strings"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// failureConfig is one rule of one token a minute, with the given failure mode.
func failureConfig(mode string) string {
	return `{"rules": [{"name": "api", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1m"}]}], "failure_mode": "` + mode + `"}`
}

// generalFailureConfig is failureConfig with a key of two parts: a configuration without the lean
// shape, decided the general way.
func generalFailureConfig(mode string) string {
	return strings.Replace(failureConfig(mode), `[{"header": "x-api-key"}]`, `[{"header": "x-api-key"}, {"header": "x-tenant"}]`, 1)
}

// When shared data fails, every request gets the failure mode; the error is logged once and
// counted every time. When it recovers, the limits apply again.
func TestSharedDataFailureFollowsTheFailureMode(t *testing.T) {
	for _, tt := range []struct{ mode, outcome string }{{"allow", "continued"}, {"deny", "503 ra="}} {
		t.Run(tt.mode, func(t *testing.T) {
			host := rig(t, failureConfig(tt.mode))
			host.SharedData().SetFault(func(op, key string) wire.Status { return wire.StatusInternalFailure })
			for i := 0; i < 2; i++ {
				stream, _ := host.Request(keyed("k", "/"))
				if got := outcome(stream); got != tt.outcome {
					t.Fatalf("request %d while shared data fails: %s, want %s", i, got, tt.outcome)
				}
				if tt.mode == "deny" && string(stream.Reply().Body) != "Service Unavailable: the rate limiter failed\n" {
					t.Errorf("body %q", stream.Reply().Body)
				}
			}
			errors := host.LogsAt(abi.LogLevelError)
			if len(errors) != 1 || !strings.HasPrefix(errors[0], "tollgate: ") || !strings.HasSuffix(errors[0], " (failure_mode "+tt.mode+")") {
				t.Errorf("error logs %q, want one line ending in the failure mode", errors)
			}
			host.SharedData().SetFault(nil)
			first, _ := host.Request(keyed("k", "/"))
			second, _ := host.Request(keyed("k", "/"))
			if outcome(first) != "continued" || outcome(second) != "429 ra=60" {
				t.Errorf("after recovery: %s, %s; want continued, 429 ra=60", outcome(first), outcome(second))
			}
			checkCounters(t, host, map[string]uint64{"tollgate.internal_errors": 2, "tollgate.rule.api.admitted": 1})
		})
	}
}

// panickyVM runs the plugin with streams that panic on request, for the panic handlers.
type panickyVM struct {
	types.DefaultVMContext
	loseNext bool // NewHttpContext panics for the next stream
}

func (v *panickyVM) NewPluginContext(uint32) types.PluginContext {
	return &panickyPlugin{pluginContext: &pluginContext{}, vm: v}
}

type panickyPlugin struct {
	*pluginContext
	vm *panickyVM
}

func (p *panickyPlugin) NewHttpContext(id uint32) types.HttpContext {
	if p.vm.loseNext {
		p.vm.loseNext = false
		panic("lost")
	}
	return &panickyStream{httpContext: p.pluginContext.NewHttpContext(id).(*httpContext)}
}

type panickyStream struct{ *httpContext }

// OnHttpRequestHeaders panics for a request with x-panic, before the plugin's own work.
func (s *panickyStream) OnHttpRequestHeaders(n int, end bool) types.Action {
	if _, err := abi.GetHttpRequestHeader("x-panic"); err == nil {
		panic("boom")
	}
	return s.httpContext.OnHttpRequestHeaders(n, end)
}

// A panic while deciding, or while creating a stream's context, is recovered, counted as an
// internal error and answered by the failure mode; the next request is decided as usual.
func TestPanicsFollowTheFailureMode(t *testing.T) {
	tests := []struct {
		mode, where, outcome, logged string
		general                      bool // a configuration without the lean shape
	}{
		{"allow", "request", "continued", "tollgate: recovered panic while deciding a request (failure_mode allow)", false},
		{"deny", "request", "503 ra=", "tollgate: recovered panic while deciding a request (failure_mode deny)", false},
		{"allow", "context", "continued", "tollgate: recovered panic while creating a stream context (failure_mode allow)", false},
		{"deny", "context", "503 ra=", "tollgate: recovered panic while creating a stream context (failure_mode deny)", false},
		{"allow", "request", "continued", "tollgate: recovered panic while deciding a request (failure_mode allow)", true},
		{"allow", "context", "continued", "tollgate: recovered panic while creating a stream context (failure_mode allow)", true},
	}
	for _, tt := range tests {
		config, shape := failureConfig(tt.mode), "lean"
		if tt.general {
			config, shape = generalFailureConfig(tt.mode), "general"
		}
		t.Run(tt.mode+" "+tt.where+" "+shape, func(t *testing.T) {
			vm := &panickyVM{}
			host, st := abitest.Start(t, abitest.Options{VMContext: vm, Configuration: []byte(config),
				PluginName: "test", LogLevel: abi.LogLevelInfo})
			if st != types.OnPluginStartStatusOK {
				t.Fatalf("plugin start: %v", st)
			}
			// The panicking request carries a client's shadow marker, which must not reach the
			// upstream when it continues: the panic came before the plugin looked for it.
			marker, tenant := [2]string{ShadowHeader, "api"}, [2]string{"x-tenant", "t"}
			req := keyed("k", "/", tenant, marker)
			if tt.where == "request" {
				req = keyed("k", "/", tenant, marker, [2]string{"x-panic", "1"})
			} else {
				vm.loseNext = true
			}
			stream, _ := host.Request(req)
			if got := outcome(stream); got != tt.outcome {
				t.Errorf("the panicking request: %s, want %s", got, tt.outcome)
			}
			if _, marked := hostcore.HeaderValue(stream.Forwarded(), ShadowHeader); marked {
				t.Errorf("the client's %s reached the upstream: %q", ShadowHeader, stream.Forwarded())
			}
			if got := host.LogsAt(abi.LogLevelError); len(got) != 1 || got[0] != tt.logged {
				t.Errorf("error logs %q, want %q", got, tt.logged)
			}
			stream.End()
			next, _ := host.Request(keyed("k", "/", tenant))
			if outcome(next) != "continued" {
				t.Errorf("the next request: %s, want continued", outcome(next))
			}
			checkCounters(t, host, map[string]uint64{"tollgate.internal_errors": 1, "tollgate.rule.api.admitted": 1})
		})
	}
}

// When the monotonic clock cannot be read, a request gets the failure mode, and one that
// continues loses a client's shadow marker, whether the plugin had looked for it yet (the lean
// shape looks after its decision) or not.
func TestClockFailureFollowsTheFailureMode(t *testing.T) {
	tests := []struct{ name, config, outcome string }{
		{"lean, allow", failureConfig("allow"), "continued"},
		{"lean, deny", failureConfig("deny"), "503 ra="},
		{"general, allow", generalFailureConfig("allow"), "continued"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, st := abitest.Start(t, abitest.Options{VMContext: NewVMContext(), Configuration: []byte(tt.config),
				PluginName: "test", LogLevel: abi.LogLevelInfo})
			if st != types.OnPluginStartStatusOK {
				t.Fatalf("plugin start: %v", st)
			}
			host.FailClock(true)
			stream, _ := host.Request(keyed("k", "/", [2]string{"x-tenant", "t"}, [2]string{ShadowHeader, "api"}))
			if got := outcome(stream); got != tt.outcome {
				t.Errorf("with the clock failing: %s, want %s", got, tt.outcome)
			}
			if _, marked := hostcore.HeaderValue(stream.Forwarded(), ShadowHeader); marked {
				t.Errorf("the client's %s reached the upstream: %q", ShadowHeader, stream.Forwarded())
			}
			stream.End()
			host.FailClock(false)
			next, _ := host.Request(keyed("k", "/", [2]string{"x-tenant", "t"}))
			if got := outcome(next); got != "continued" {
				t.Errorf("with the clock back: %s, want continued", got)
			}
			checkCounters(t, host, map[string]uint64{"tollgate.internal_errors": 1, "tollgate.rule.api.admitted": 1})
		})
	}
}
