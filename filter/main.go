package main

import (
	"math/rand/v2"
	"strconv"
	"strings"

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

// ShadowHeader is added to requests that a shadow rule would have limited, for the upstream;
// its value lists those rules.
const ShadowHeader = "x-tollgate-shadow-limited"

type pluginContext struct {
	types.DefaultPluginContext
	cfg   *config.Config
	gate  *admission.Gate
	rules []ruleMetrics
	// Plugin-wide counters.
	exempt, internalErrors, tableFull abi.Counter
	debug                             bool
	// shadowRules is true when any rule is a shadow rule: then the shadow header a client sent
	// itself is removed from every request.
	shadowRules bool
	// lastFailure is the last internal error logged; a failing store fails every request the
	// same way, and one line per distinct error is enough.
	lastFailure string

	// Global limits (global.go): per rule, nil without one.
	globalRules       []*globalRule
	hasGlobal         bool
	checks            []admission.GlobalCheck
	lastGlobalFailure string
}

// ruleMetrics are a rule's counters, named tollgate.rule.<rule>.<event>.
type ruleMetrics struct {
	admitted, limited, shadowLimited, missingKey, invalidCost abi.Counter
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
	gate.CollectStatus = cfg.RateLimitHeaders != config.HeadersOff
	// The hash secret every worker VM shares; math/rand/v2's generator is seeded by the runtime
	// from WASI random_get (crypto/rand would link crypto packages that cost megabytes of
	// memory in every VM).
	if err := gate.LoadSecret(store{}, rand.Uint64); err != nil {
		abi.Log(abi.LogLevelCritical, "tollgate: cannot read or store the key table's secret in shared data: "+err.Error())
		return types.OnPluginStartStatusFailed
	}
	p.cfg, p.gate = cfg, gate
	define := func(name string, counter *abi.Counter) bool {
		if *counter, err = abi.DefineCounter(name); err != nil {
			abi.Log(abi.LogLevelCritical, "tollgate: cannot define metric "+name+": "+err.Error())
			return false
		}
		return true
	}
	p.rules = make([]ruleMetrics, len(cfg.Rules))
	ok := define("tollgate.exempt", &p.exempt) && define("tollgate.internal_errors", &p.internalErrors) &&
		define("tollgate.key_table_full", &p.tableFull)
	for i, r := range cfg.Rules {
		m := &p.rules[i]
		prefix := "tollgate.rule." + r.Name + "."
		ok = ok && define(prefix+"admitted", &m.admitted) && define(prefix+"limited", &m.limited) &&
			define(prefix+"shadow_limited", &m.shadowLimited) && define(prefix+"missing_key", &m.missingKey) &&
			define(prefix+"invalid_cost", &m.invalidCost)
	}
	if !ok || !p.setUpGlobal(define) {
		return types.OnPluginStartStatusFailed
	}
	p.shadowRules = cfg.Shadow
	for _, r := range cfg.Rules {
		p.shadowRules = p.shadowRules || r.Shadow
	}
	level, _ := abi.GetLogLevel()
	p.debug = level <= abi.LogLevelDebug
	abi.Log(abi.LogLevelInfo, "tollgate: started with "+strconv.Itoa(len(cfg.Rules))+" rule(s), failure_mode "+cfg.FailureMode.String())
	return types.OnPluginStartStatusOK
}

func (p *pluginContext) NewHttpContext(contextID uint32) types.HttpContext {
	return &httpContext{plugin: p, id: contextID}
}

// failed logs an internal error once per distinct message and counts every occurrence.
func (p *pluginContext) failed(msg string) {
	_ = p.internalErrors.Increment(1)
	if msg != p.lastFailure {
		p.lastFailure = msg
		abi.Log(abi.LogLevelError, "tollgate: "+msg+" (failure_mode "+p.cfg.FailureMode.String()+")")
	}
}

type httpContext struct {
	types.DefaultHttpContext
	plugin *pluginContext
	// responseHeaders are added to the response of an admitted request.
	responseHeaders [][2]string

	id     uint32
	global *globalWait // a request held for the rate limit service (global.go)
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
	if p.debug {
		h.logDecision(out)
	}
	for _, i := range out.MissingKeys {
		_ = p.rules[i].missingKey.Increment(1)
	}
	if out.TableFull > 0 {
		_ = p.tableFull.Increment(uint64(out.TableFull))
	}
	for _, i := range out.InvalidCost {
		_ = p.rules[i].invalidCost.Increment(1)
	}
	if out.ShadowErr != nil {
		p.failed("shadow rule: " + out.ShadowErr.Error())
	}
	switch out.Verdict {
	case admission.Allow:
		if action, held := h.checkGlobal(out, now); held {
			return action
		}
		for _, i := range out.Admitted {
			_ = p.rules[i].admitted.Increment(1)
		}
		if p.shadowRules {
			h.markShadow(out)
		}
		h.responseHeaders = p.gate.RateLimitHeaders(p.cfg.RateLimitHeaders, out)
		return types.ActionContinue
	case admission.Exempt:
		_ = p.exempt.Increment(1)
		return types.ActionContinue
	case admission.Limited:
		_ = p.rules[out.Rule].limited.Increment(1)
		h.rejectLimited(out)
		return types.ActionPause
	case admission.MissingKey:
		_ = p.rules[out.Rule].missingKey.Increment(1)
		var challenge [][2]string
		if out.Status == 401 {
			// RFC 9110 §15.5.2: a 401 carries a challenge. The scheme names what is missing.
			challenge = append(challenge, [2]string{"www-authenticate", `Tollgate realm="` + p.gate.RuleName(out.Rule) + `"`})
		}
		h.reply(uint32(out.Status), "the request has no "+out.MissingPart+" (rate limit rule "+p.gate.RuleName(out.Rule)+")\n", challenge...)
		return types.ActionPause
	case admission.BadCost:
		_ = p.rules[out.Rule].invalidCost.Increment(1)
		h.reply(400, "header "+p.cfg.Rules[out.Rule].Cost.Header+" must be a whole number (rate limit rule "+p.gate.RuleName(out.Rule)+")\n")
		return types.ActionPause
	default:
		p.failed(out.Err.Error())
		return h.failOpenOrDeny()
	}
}

// markShadow sets the shadow header to the rules that would have limited the request, after
// removing any the client sent: the upstream must be able to trust it.
func (h *httpContext) markShadow(out *admission.Outcome) {
	p := h.plugin
	if err := abi.RemoveHttpRequestHeader(ShadowHeader); err != nil {
		p.failed("cannot remove " + ShadowHeader + ": " + err.Error())
	}
	if len(out.ShadowLimited) == 0 {
		return
	}
	names := make([]string, len(out.ShadowLimited))
	for j, i := range out.ShadowLimited {
		_ = p.rules[i].shadowLimited.Increment(1)
		names[j] = p.gate.RuleName(i)
	}
	if err := abi.AddHttpRequestHeader(ShadowHeader, strings.Join(names, ",")); err != nil {
		p.failed("cannot mark a shadow-limited request: " + err.Error())
	}
}

// rejectLimited sends the configured rejection: status, body, content type and headers, with an
// exact Retry-After and the rate-limit headers if configured.
func (h *httpContext) rejectLimited(out *admission.Outcome) {
	resp := &h.plugin.cfg.Response
	retryAfter := strconv.FormatInt(out.RetryAfterSeconds(), 10)
	headers := make([][2]string, 0, 2+len(resp.Headers)+3)
	headers = append(headers, [2]string{"retry-after", retryAfter}, [2]string{"content-type", resp.ContentType})
	headers = append(headers, resp.Headers...)
	headers = append(headers, h.plugin.gate.RateLimitHeaders(h.plugin.cfg.RateLimitHeaders, out)...)
	body := strings.ReplaceAll(resp.Body, "{retry_after}", retryAfter)
	if err := abi.SendHttpResponse(uint32(resp.Status), headers, []byte(body), -1); err != nil {
		h.plugin.failed("cannot send a local reply: " + err.Error())
	}
}

// failOpenOrDeny applies the failure mode: allow lets the request through; deny answers 503.
func (h *httpContext) failOpenOrDeny() types.Action {
	if h.plugin.cfg == nil || h.plugin.cfg.FailureMode == config.FailureDeny {
		h.reply(503, "the rate limiter failed\n")
		return types.ActionPause
	}
	return types.ActionContinue
}

// reply sends a plain-text local reply; the status text leads the body.
func (h *httpContext) reply(status uint32, detail string, extra ...[2]string) {
	body := statusText(status) + ": " + detail
	headers := append([][2]string{{"content-type", "text/plain; charset=utf-8"}}, extra...)
	if err := abi.SendHttpResponse(status, headers, []byte(body), -1); err != nil {
		h.plugin.failed("cannot send a local reply: " + err.Error())
	}
}

func statusText(status uint32) string {
	switch status {
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 429:
		return "Too Many Requests"
	case 503:
		return "Service Unavailable"
	}
	return strconv.Itoa(int(status))
}

func (h *httpContext) OnHttpResponseHeaders(numHeaders int, endOfStream bool) types.Action {
	for _, header := range h.responseHeaders {
		// Replaced, not added: an upstream's own rate-limit headers would contradict ours.
		if err := abi.ReplaceHttpResponseHeader(header[0], header[1]); err != nil {
			h.plugin.failed("cannot add " + header[0] + ": " + err.Error())
		}
	}
	return types.ActionContinue
}

// logDecision logs one line per decision at debug level, identifying keys by hash only.
func (h *httpContext) logDecision(out *admission.Outcome) {
	msg := "tollgate: decision " + verdictNames[out.Verdict]
	if out.Rule >= 0 {
		msg += " rule " + h.plugin.gate.RuleName(out.Rule)
	}
	if out.Verdict == admission.Limited {
		msg += " retry_after " + out.RetryAfter.String()
	}
	for _, l := range out.Limits {
		msg += " [" + h.plugin.gate.RuleName(l.Rule) + "." + strconv.Itoa(l.Limit) + " key#" +
			strconv.FormatUint(l.PartitionHash, 16) + " remaining " + strconv.FormatInt(l.Remaining, 10) + "]"
	}
	abi.Log(abi.LogLevelDebug, msg)
}

var verdictNames = map[admission.Verdict]string{
	admission.Allow: "allow", admission.Limited: "limited", admission.MissingKey: "missing_key",
	admission.Exempt: "exempt", admission.BadCost: "invalid_cost", admission.Failed: "failed",
}

// request reads request attributes through the ABI.
type request struct{}

func (request) Header(name string) (string, bool) {
	v, err := abi.GetHttpRequestHeader(name)
	return v, err == nil
}

func (request) HeaderValues(name string) (string, bool) {
	v, err := abi.GetProperty("request", "headers", name)
	return string(v), err == nil
}

func (request) SourceAddress() (string, bool) {
	v, err := abi.GetProperty("source", "address")
	return string(v), err == nil
}

func (request) Property(path []string) (string, bool) {
	v, err := abi.GetProperty(path...)
	return string(v), err == nil
}

// store is Envoy shared data through the ABI.
type store struct{}

func (store) Get(key string) ([]byte, uint32, error) { return abi.GetSharedData(key) }

func (store) Set(key string, value []byte, cas uint32) error {
	return abi.SetSharedData(key, value, cas)
}
