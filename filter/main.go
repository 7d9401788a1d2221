package main

import (
	"strconv"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
)

// main never runs in a c-shared module; init registers the contexts inside _initialize.
func main() {}

func init() { abi.SetVMContext(&vmContext{}) }

type vmContext struct{ types.DefaultVMContext }

func (*vmContext) NewPluginContext(contextID uint32) types.PluginContext {
	return &pluginContext{}
}

type pluginContext struct {
	types.DefaultPluginContext
	gate        *admission.Gate
	failureMode config.FailureMode
	metrics     metrics
	// lastFailure is the last internal error logged; a failing store fails every request the
	// same way, and one line per distinct error is enough.
	lastFailure string
}

type metrics struct {
	allowed, limited, missingKey, internalErrors abi.Counter
}

func (p *pluginContext) OnPluginStart(pluginConfigurationSize int) types.OnPluginStartStatus {
	data, err := abi.GetPluginConfiguration()
	if err != nil && pluginConfigurationSize > 0 {
		abi.Log(abi.LogLevelCritical, "tollgate: cannot read the plugin configuration: "+err.Error())
		return types.OnPluginStartStatusFailed
	}
	cfg, err := config.Parse(data)
	if err != nil {
		if problems, ok := err.(*config.Error); ok {
			for _, problem := range problems.Problems {
				abi.Log(abi.LogLevelCritical, "tollgate: invalid configuration: "+problem.String())
			}
		} else {
			abi.Log(abi.LogLevelCritical, "tollgate: invalid configuration: "+err.Error())
		}
		return types.OnPluginStartStatusFailed
	}
	// The plugin name (Envoy's config.name, Istio's namespace.name) keeps two plugins sharing one
	// vm_id, as all WasmPlugins of an Istio proxy do, from sharing buckets.
	name, _ := abi.GetProperty("plugin_name")
	gate, err := admission.New(cfg, string(name))
	if err != nil {
		abi.Log(abi.LogLevelCritical, "tollgate: invalid configuration: "+err.Error())
		return types.OnPluginStartStatusFailed
	}
	p.gate, p.failureMode = gate, cfg.FailureMode
	for _, m := range []struct {
		counter *abi.Counter
		name    string
	}{
		{&p.metrics.allowed, "tollgate_requests_allowed"},
		{&p.metrics.limited, "tollgate_requests_limited"},
		{&p.metrics.missingKey, "tollgate_requests_missing_key"},
		{&p.metrics.internalErrors, "tollgate_internal_errors"},
	} {
		if *m.counter, err = abi.DefineCounter(m.name); err != nil {
			abi.Log(abi.LogLevelCritical, "tollgate: cannot define metric "+m.name+": "+err.Error())
			return types.OnPluginStartStatusFailed
		}
	}
	abi.Log(abi.LogLevelInfo, "tollgate: started with "+strconv.Itoa(len(cfg.Rules))+" rule(s), failure_mode "+cfg.FailureMode.String())
	return types.OnPluginStartStatusOK
}

func (p *pluginContext) NewHttpContext(contextID uint32) types.HttpContext {
	return &httpContext{plugin: p}
}

// failed logs an internal error once per distinct message and counts every occurrence.
func (p *pluginContext) failed(msg string) {
	_ = p.metrics.internalErrors.Increment(1)
	if msg != p.lastFailure {
		p.lastFailure = msg
		abi.Log(abi.LogLevelError, "tollgate: "+msg+" (failure_mode "+p.failureMode.String()+")")
	}
}

type httpContext struct {
	types.DefaultHttpContext
	plugin *pluginContext
	// remaining is the header value for the response of an admitted request; empty otherwise.
	remaining string
}

func (h *httpContext) OnHttpRequestHeaders(numHeaders int, endOfStream bool) (action types.Action) {
	p := h.plugin
	defer func() {
		// A panic here is a bug; it must not trap the VM, and the request gets the failure mode.
		if r := recover(); r != nil {
			p.failed("recovered panic while deciding a request")
			action = h.failOpenOrDeny()
		}
	}()
	now, err := abi.MonotonicNanos()
	if err != nil {
		p.failed("cannot read the monotonic clock: " + err.Error())
		return h.failOpenOrDeny()
	}
	out := p.gate.Admit(request{}, store{}, now)
	switch out.Verdict {
	case admission.Allow:
		_ = p.metrics.allowed.Increment(1)
		h.remaining = strconv.FormatInt(out.Remaining, 10)
		return types.ActionContinue
	case admission.Limited:
		_ = p.metrics.limited.Increment(1)
		retryAfter := strconv.FormatInt(out.RetryAfterSeconds(), 10)
		h.reply(429, "Too Many Requests: retry after "+retryAfter+" s\n",
			[2]string{"retry-after", retryAfter}, [2]string{"x-ratelimit-remaining", "0"})
		return types.ActionPause
	case admission.MissingKey:
		_ = p.metrics.missingKey.Increment(1)
		h.reply(401, "Unauthorized: the request has no "+out.MissingPart+" (rate limit rule "+out.Rule+")\n")
		return types.ActionPause
	default:
		p.failed(out.Err.Error())
		return h.failOpenOrDeny()
	}
}

// failOpenOrDeny applies the failure mode: allow lets the request through; deny answers 503.
func (h *httpContext) failOpenOrDeny() types.Action {
	if h.plugin.failureMode == config.FailureDeny {
		h.reply(503, "Service Unavailable: the rate limiter failed\n")
		return types.ActionPause
	}
	return types.ActionContinue
}

func (h *httpContext) reply(status uint32, body string, headers ...[2]string) {
	headers = append(headers, [2]string{"content-type", "text/plain; charset=utf-8"})
	if err := abi.SendHttpResponse(status, headers, []byte(body), -1); err != nil {
		h.plugin.failed("cannot send a local reply: " + err.Error())
	}
}

func (h *httpContext) OnHttpResponseHeaders(numHeaders int, endOfStream bool) types.Action {
	if h.remaining != "" {
		if err := abi.AddHttpResponseHeader("x-ratelimit-remaining", h.remaining); err != nil {
			h.plugin.failed("cannot add x-ratelimit-remaining: " + err.Error())
		}
	}
	return types.ActionContinue
}

// request reads key parts through the ABI.
type request struct{}

func (request) Header(name string) (string, bool) {
	v, err := abi.GetHttpRequestHeader(name)
	return v, err == nil
}

func (request) SourceAddress() (string, bool) {
	v, err := abi.GetProperty("source", "address")
	return string(v), err == nil
}

// store is Envoy shared data through the ABI.
type store struct{}

func (store) Get(key string) ([]byte, uint32, error) { return abi.GetSharedData(key) }

func (store) Set(key string, value []byte, cas uint32) error {
	return abi.SetSharedData(key, value, cas)
}
