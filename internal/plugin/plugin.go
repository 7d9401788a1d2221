package plugin

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/version"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// NewVMContext returns the VM context of a Tollgate module: the filter registers it with the ABI
// layer (abi.SetVMContext) when the module is initialized.
func NewVMContext() types.VMContext { return &vmContext{} }

type vmContext struct{ types.DefaultVMContext }

func (*vmContext) NewPluginContext(contextID uint32) types.PluginContext {
	return &pluginContext{}
}

type pluginContext struct {
	types.DefaultPluginContext
	cfg *config.Config
	// gate decides the requests of this VM (one plugin context per VM).
	gate *admission.Gate
	// rules are the configuration's rules, compiled (rules.go), in its order: a rule index in
	// an admission.Outcome is an index here.
	rules []rule
	// Plugin-wide counters.
	exempt, internalErrors, tableFull, escapedSlashes counter
	// counters lists every counter, for flushing (counters.go).
	counters []*counter
	debug    bool
	// shadowRules is true when any rule is a shadow rule, which may mark requests.
	shadowRules bool
	// logged holds the internal errors already logged: a failing store fails every request the
	// same way, and one line per distinct error is enough. Bounded, so it cannot grow.
	logged map[string]bool
	// req reads the request being decided; reused, so that deciding allocates nothing.
	req request
	// free holds finished stream contexts for reuse: a stream then costs no allocation.
	free []*httpContext
	// reply holds the buffers a rejection is built in, reused (one stream at a time runs).
	reply   replyBuffers
	refused refusal

	// Global limits (global.go): hasGlobal is set when a rule has one.
	hasGlobal         bool
	lastGlobalFailure string

	// Held requests (held.go): mayHold is set when a rule may hold requests, and the plugin
	// then ticks fast.
	held    heldSet
	mayHold bool

	// settles: some rule has count, refund or usage (settle.go, usage.go).
	settles bool
	// usageReadsBody: some rule reads its usage from the response body (usage.go);
	// usageScratch is a buffer of rule indexes.
	usageReadsBody, hasUsage bool
	usageScratch             []int
	// hasConcurrency: some rule has a concurrency limit (concurrency.go).
	hasConcurrency bool
	// slots are the waits for a free slot of a concurrency limit (slotwait.go).
	slots slotWaiting
	// operator is the operator endpoint (operator.go); nil when it is off.
	operator *operatorEndpoint

	// leanAdmission is the gate's lean admission (admission.Gate.LeanAdmission) when the plugin
	// has nothing to do for it but count it in leanAdmitted, its rule's counter (no debug log);
	// nil otherwise.
	leanAdmission *admission.Outcome
	leanAdmitted  *counter
	// leanRejection is the gate's lean rejection (admission.Gate.LeanRejection) under the same
	// condition, with no operator endpoint either: the plugin has nothing to do for it but count
	// it in leanLimited, its rule's counter, and send the rejection; nil otherwise.
	leanRejection *admission.Outcome
	leanLimited   *counter
	// leanKeyHeader is the lean shape's key header (admission.Gate.LeanKeyHeader), which the
	// plugin reads itself, before it looks for the shadow marker; "" when the policy has no lean
	// shape, or when the key header is the marker.
	leanKeyHeader string
	// letsGo: the lean shape leaves nothing of a request it decided to its stream's later
	// callbacks, and its stream is let go (release); not in the fault build, whose response
	// headers callback may have a panic to force.
	letsGo bool
}

// notBuilt is replyBuffers.builtFor when the buffers hold no rejection to send again.
const notBuilt = -1

// replyBuffers are reused to build local replies without allocating.
type replyBuffers struct {
	// encoded and body are the last rejection's headers and body, built for a Retry-After of
	// builtFor seconds (notBuilt: to build for the next).
	encoded  []byte
	body     []byte
	builtFor int64
	number   []byte
	// pairs are the rejection's headers, Retry-After first, its value left to fill in; bodyParts
	// is the configured body cut at each {retry_after}, and grpcStatus the rejection's gRPC
	// status: all worked out once, at plugin start.
	pairs      wire.PairsTemplate
	bodyParts  []string
	grpcStatus int32
}

func (p *pluginContext) OnPluginStart(pluginConfigurationSize int) types.OnPluginStartStatus {
	// Set again once this configuration has started.
	p.leanAdmission, p.leanAdmitted, p.leanRejection, p.leanLimited, p.leanKeyHeader, p.letsGo = nil, nil, nil, nil, "", false
	if pluginConfigurationSize > config.MaxSize {
		// Refused before it is copied into the VM's memory.
		abi.Log(abi.LogLevelCritical, "tollgate: invalid configuration: "+config.ErrTooLarge.Problems[0].String())
		return types.OnPluginStartStatusFailed
	}
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
	namespace, found := keyNamespace()
	if !found {
		return types.OnPluginStartStatusFailed
	}
	policy, err := admission.Compile(cfg, namespace)
	if err != nil {
		abi.Log(abi.LogLevelCritical, "tollgate: invalid configuration: "+err.Error())
		return types.OnPluginStartStatusFailed
	}
	// The hash secret every worker VM shares; math/rand/v2's generator is seeded by the runtime
	// from WASI random_get (crypto/rand would link crypto packages that cost megabytes of
	// memory in every VM).
	if err := policy.LoadSecret(sharedData, rand.Uint64); err != nil {
		abi.Log(abi.LogLevelCritical, "tollgate: cannot read or store the key table's secret in shared data: "+err.Error())
		return types.OnPluginStartStatusFailed
	}
	p.cfg, p.gate = cfg, admission.NewGate(policy)
	p.reply.pairs = wire.NewPairsTemplate(append([][2]string{{"retry-after", ""}, {"content-type", cfg.Response.ContentType}},
		cfg.Response.Headers...))
	p.reply.bodyParts = strings.Split(cfg.Response.Body, retryAfterPlaceholder)
	p.reply.builtFor = notBuilt
	p.refused = refusal{}
	p.reply.grpcStatus = int32(cfg.Response.RejectionGrpcStatus())
	p.gate.SetWallClock(abi.WallNanos) // read only by calendar windows
	p.settles = policy.SettlesAtResponse()
	p.hasConcurrency = policy.HasConcurrency()
	define := p.defineCounter
	if !define("tollgate.exempt", &p.exempt) || !define("tollgate.internal_errors", &p.internalErrors) ||
		!define("tollgate.key_table_full", &p.tableFull) || !define("tollgate.escaped_slashes_rejected", &p.escapedSlashes) ||
		!p.compileRules(cfg, define) {
		return types.OnPluginStartStatusFailed
	}
	if p.hasUsage {
		abi.ReadResponseBodies() // the body and trailer callbacks reach the streams from now on
	}
	// OnHttpResponseHeaders settles charges and adds the rate-limit headers; without either it
	// has nothing to do, and the callback returns at once in the ABI layer.
	if p.settles || p.hasUsage || cfg.RateLimitHeaders != config.HeadersOff || faultsBuilt {
		abi.ReadResponseHeaders()
	}
	if !p.startOperator(cfg, namespace, define) {
		return types.OnPluginStartStatusFailed
	}
	level, _ := abi.GetLogLevel()
	p.debug = level <= abi.LogLevelDebug
	if err := abi.SetTickPeriod(p.tickPeriodMilliseconds()); err != nil {
		abi.Log(abi.LogLevelCritical, "tollgate: cannot set the tick period, on which counters are flushed: "+err.Error())
		return types.OnPluginStartStatusFailed
	}
	p.gate.RememberRejected() // started: this configuration's rejections are remembered from now
	// All OnHttpRequestHeaders does after the decision (AdmitLean, or Admit) for a lean admission,
	// whose shape leaves nothing else to do (admission.Gate.LeanAdmission), is to count it, and to
	// log it at debug level; then it lets the stream go (release). For a lean rejection, it counts
	// it, tells the operator endpoint's top list, logs it at debug level and sends the rejection.
	// A step added there that such an admission or rejection may need must be added to these
	// conditions.
	if out := p.gate.LeanAdmission(); out != nil && !p.debug {
		p.leanAdmission, p.leanAdmitted = out, &p.rules[out.Admitted[0]].admitted
		p.letsGo = !faultsBuilt
		if p.operator == nil {
			out := p.gate.LeanRejection()
			p.leanRejection, p.leanLimited = out, &p.rules[out.Rule].limited
		}
	}
	// The lean shape's key header, unless it is the shadow marker: a client's marker is removed
	// before the general way decides, so that a rule keyed on it finds none.
	if p.leanKeyHeader = p.gate.LeanKeyHeader(); p.leanKeyHeader == ShadowHeader {
		p.leanKeyHeader = ""
	}
	abi.Log(abi.LogLevelInfo, "tollgate "+version.Version+": started with "+strconv.Itoa(len(cfg.Rules))+" rule(s), failure_mode "+cfg.FailureMode.String())
	return types.OnPluginStartStatusOK
}

// defaultKeyNamespace namespaces the shared-data keys on a host that names the plugin neither by
// plugin_name nor by plugin_root_id.
const defaultKeyNamespace = "tollgate"

// keyNamespace is the name that keeps the shared-data keys of two plugins sharing one vm_id (as
// all WasmPlugins of an Istio proxy do) apart: Envoy's plugin_name (config.name, Istio's
// namespace.name). A host without that property (a proxy-wasm host other than Envoy) gets
// plugin_root_id, else a fixed name, with one warning. Any other failure to read it refuses
// the start: the keys would land in another namespace, and every limit could double.
func keyNamespace() (string, bool) {
	name, err := abi.GetProperty("plugin_name")
	if err == nil {
		return string(name), true
	}
	if !errors.Is(err, types.ErrorStatusNotFound) {
		abi.Log(abi.LogLevelCritical, "tollgate: cannot read the plugin_name property, which namespaces the shared-data keys: "+err.Error())
		return "", false
	}
	namespace, source := defaultKeyNamespace, "the fixed name "+strconv.Quote(defaultKeyNamespace)
	if root, err := abi.GetProperty("plugin_root_id"); err == nil && len(root) > 0 {
		namespace, source = string(root), "plugin_root_id "+strconv.Quote(string(root))
	}
	abi.Log(abi.LogLevelWarn, "tollgate: the host has no plugin_name property; the shared-data keys are namespaced by "+
		source+" (two plugins with the same namespace and vm_id would share their buckets)")
	return namespace, true
}

func (p *pluginContext) NewHttpContext(contextID uint32) types.HttpContext {
	faultPoint("context")
	if n := len(p.free); n > 0 {
		h := p.free[n-1]
		p.free = p.free[:n-1]
		h.id = contextID
		return h
	}
	return &httpContext{plugin: p, id: contextID}
}

// OnHttpStreamDone runs when Envoy deletes the stream's context (unless the stream was let go:
// release): the context goes back to its plugin's free list.
func (h *httpContext) OnHttpStreamDone() {
	// Each step is checked here: a call on every stream's end otherwise.
	if h.held {
		h.releaseHeld()
	}
	if h.global != nil {
		h.leaveLeases() // gives back the whole charge, a count or refund rule's hold with it
	}
	switch {
	case h.metering: // the stream ended before its response did (usage.go)
		h.finishMetering(false)
	case h.pending.Empty():
	case h.plugin.hasUsage: // forwarded, and no response headers came: unknown usage
		h.meterUnanswered()
	default:
		h.pending.Clear() // forwarded, and no response headers came: the charge stands (settle.go)
	}
	if len(h.inFlight) > 0 {
		h.releaseSlots()
	}
	h.responseHeaders, h.global = nil, nil
	h.plugin.free = append(h.plugin.free, h)
}

// release lets the stream go at the end of a request the lean shape decided
// (admission.Gate.LeanAdmission, letsGo): nothing of it is held, settled, checked again or
// rendered later, so the stream needs no more callbacks, and abi.ReleaseStream spares them,
// OnHttpStreamDone's own at its delete included. The ABI keeps the context for the plugin's next
// stream, or gives it back, and it goes on the free list as OnHttpStreamDone would put it.
func (h *httpContext) release() {
	if released, kept := abi.ReleaseStream(); released && !kept {
		h.plugin.free = append(h.plugin.free, h)
	}
}

// ruleName is the name of the rule with the given index in the configuration.
func (p *pluginContext) ruleName(rule int) string { return p.rules[rule].name }

// failed logs an internal error once per distinct message and counts every occurrence.
func (p *pluginContext) failed(msg string) {
	p.internalErrors.add(1)
	if p.logged[msg] {
		return
	}
	if p.logged == nil || len(p.logged) >= maxLoggedFailures {
		p.logged = map[string]bool{}
	}
	p.logged[msg] = true
	abi.Log(abi.LogLevelError, "tollgate: "+msg+" (failure_mode "+p.cfg.FailureMode.String()+")")
}

// maxLoggedFailures bounds the distinct errors remembered as logged.
const maxLoggedFailures = 32

// OnHttpStreamLost answers a stream whose context could not be created (a panic in
// NewHttpContext): like any internal error, by the failure mode.
func (p *pluginContext) OnHttpStreamLost() types.Action {
	p.failed("recovered panic while creating a stream context")
	return (&httpContext{plugin: p}).failRequest()
}

type httpContext struct {
	types.DefaultHttpContext
	plugin *pluginContext
	// responseHeaders are added to the response of an admitted request.
	responseHeaders [][2]string
	// rateLimit holds the rate-limit headers of the stream's answer, which responseHeaders or the
	// rejection shows; the context's next request renders them again in place.
	rateLimit rateLimitText

	id     uint32
	global *globalWait // a request held for the rate limit service (global.go)
	held   bool        // in the plugin's held set (held.go)
	// pending is the charge kept until the response (settle.go).
	pending admission.Pending
	// inFlight are the concurrency slots the request holds until its stream ends (concurrency.go).
	inFlight []admission.InFlight
	// slotWait is set while a request waiting for a free slot is decided again (slotwait.go).
	slotWait *slotWait
	// meter reads the response's usage for rules with usage, while metering (usage.go).
	meter    *usageMeter
	metering bool
}

// OnHttpRequestHeadersPanic answers a request whose decision panicked (a bug): it must not trap
// the VM, and the request gets the failure mode. The ABI layer recovers and calls it.
func (h *httpContext) OnHttpRequestHeadersPanic() types.Action {
	h.plugin.failed("recovered panic while deciding a request")
	return h.failRequest()
}

// OnHttpRequestHeaders decides a request. The operator endpoint's requests are answered before
// anything else: never charged, and never forwarded (so the shadow marker is nothing to them).
// The shadow marker a client sent is removed from every other request that may reach the
// upstream, whatever the configuration and whether the request is exempt: an upstream must be
// able to trust it (a request decided again while it waits for a slot lost it already). Looking
// costs no host call (the headers are read once, all of them, for the decision too), so only a
// request that carries one pays for the removal; one whose headers cannot be read is treated as
// carrying one. The general way removes it before the decision, which then reads the headers
// without it. The lean shape decides by its key header alone, which is never the marker
// (OnPluginStart), so the marker changes nothing of its decision: it looks after deciding, and
// a request its decision answers at once, which never reaches the upstream, spares the look. A
// request the failure mode lets through before the look loses the marker too (failRequest).
func (h *httpContext) OnHttpRequestHeaders(numHeaders int, endOfStream bool) types.Action {
	p := h.plugin
	faultPoint("request")
	if p.operator != nil && h.slotWait == nil {
		if action, answered := h.operatorRequest(); answered {
			return action
		}
	}
	p.req.err = nil
	// The lean shape's key, read with the headers as they are.
	var key []byte
	keyRead, keyFound := false, false
	if h.slotWait == nil {
		h.id = abi.RequestStreamID() // a context let go serves another stream (release)
		headers, err := abi.GetHttpRequestHeaders()
		if err == nil && p.leanKeyHeader != "" {
			key, keyFound = wire.PairsValue(headers, p.leanKeyHeader)
			keyRead = true
		} else if err != nil || hasShadowMarker(headers) {
			h.unmark()
		}
	}
	now, err := abi.MonotonicNanos()
	if err != nil {
		p.failed("cannot read the monotonic clock: " + err.Error())
		if keyRead { // the lean shape, before its look for the marker
			return h.failRequest()
		}
		return h.failOpenOrDeny()
	}
	var out *admission.Outcome
	switch w := h.slotWait; {
	case keyRead:
		out = p.gate.AdmitLean(&p.req, arenaString(key), keyFound, sharedData, now)
	case w == nil:
		out = p.gate.Admit(&p.req, sharedData, now)
	default: // decided again while it waits for a free slot (slotwait.go)
		out = p.gate.AdmitBy(&p.req, sharedData, now, w.deadline)
	}
	// The lean admission, when the configuration leaves nothing else to do for it (OnPluginStart
	// says when): counted and continued without the checks below, each a load and a branch
	// that, together, cost an admitted request about 3 % of its time (BENCHMARKS.md, section 1).
	if out == p.leanAdmission && p.req.err == nil {
		if headers, err := abi.GetHttpRequestHeaders(); err != nil || hasShadowMarker(headers) {
			h.unmark()
		}
		p.leanAdmitted.add(1)
		if !faultsBuilt { // letsGo, known here
			h.release()
		}
		return types.ActionContinue
	}
	// The lean rejection, likewise: counted and answered without the checks below (answerLimited
	// without its own), and without a look for the marker.
	if out == p.leanRejection {
		p.leanLimited.add(1)
		h.sendRejection(detailsRateLimited, out.RetryAfterSeconds(), nil)
		if !faultsBuilt { // letsGo, known here
			h.release()
		}
		return types.ActionPause
	}
	if keyRead { // any other decision of the lean shape's
		if headers, err := abi.GetHttpRequestHeaders(); err != nil || hasShadowMarker(headers) {
			h.unmark()
		}
	}
	if p.hasConcurrency {
		h.holdSlots(out)
	}
	if out.InFlightLimited && h.waitsForSlot(out, now) {
		return types.ActionPause // counted when it is finally decided
	}
	if p.req.err != nil && out.Verdict != admission.Limited && out.Verdict != admission.BadCost {
		// Not merely absent: the decision may rest on a key that is not missing.
		p.failed("cannot read a request attribute: " + p.req.err.Error())
		return h.failOpenOrDeny()
	}
	if p.debug {
		h.logDecision(out)
	}
	if out.Corrupt > 0 || out.TableFull > 0 || out.ShadowErr != nil || len(out.MissingKeys) > 0 || len(out.InvalidCost) > 0 {
		p.countAside(out) // checked here: a call on every request otherwise
	}
	switch out.Verdict {
	case admission.Allow:
		if out.Delay > 0 {
			return h.delay(out, now)
		}
		if p.settles {
			h.holdCharge(out)
		}
		if p.hasGlobal {
			if action, held := h.checkGlobal(out, now); held {
				return action
			}
		}
		for _, i := range out.Admitted {
			p.rules[i].admitted.add(1)
		}
		if p.shadowRules {
			h.markShadow(out)
		}
		if len(out.Limits) > 0 { // rate-limit headers are configured
			h.responseHeaders = h.rateLimit.render(p.cfg.RateLimitHeaders, p.rules, out)
		}
		if p.letsGo { // the lean shape's admission the general way (a new key)
			h.release()
		}
		return types.ActionContinue
	case admission.Exempt:
		p.exempt.add(1)
		return types.ActionContinue
	case admission.Limited:
		h.answerLimited(out)
		if p.letsGo {
			h.release()
		}
		return types.ActionPause
	default:
		action := h.answerRefused(out)
		if p.letsGo { // a missing key refused, or a failure: nothing is held either
			h.release()
		}
		return action
	}
}

// countAside counts and logs what a decision met besides its verdict: keys missing or costs
// invalid for rules that let the request through, a full key table, a shadow rule's failure, a
// value in shared data that Tollgate did not write.
func (p *pluginContext) countAside(out *admission.Outcome) {
	if out.Corrupt > 0 {
		p.failed("a value under Tollgate's shared-data keys was not written by Tollgate and was replaced " +
			"(another plugin with the same name and vm_id?)")
	}
	for _, i := range out.MissingKeys {
		p.rules[i].missingKey.add(1)
	}
	if out.TableFull > 0 {
		p.tableFull.add(uint64(out.TableFull))
	}
	for _, i := range out.InvalidCost {
		p.rules[i].invalidCost.add(1)
	}
	if out.ShadowErr != nil {
		p.failed("shadow rule: " + out.ShadowErr.Error())
	}
}

// answerRefused answers a request that is neither admitted nor limited: its key is missing, its
// path or cost header is refused, or the decision failed.
func (h *httpContext) answerRefused(out *admission.Outcome) types.Action {
	p := h.plugin
	switch out.Verdict {
	case admission.MissingKey:
		p.rules[out.Rule].missingKey.add(1)
	case admission.EscapedSlash:
		p.escapedSlashes.add(1)
	case admission.BadCost:
		p.rules[out.Rule].invalidCost.add(1)
	default:
		p.failed(out.Err.Error())
		return h.failOpenOrDeny()
	}
	r := &p.refused
	if !r.answers(out) {
		r.build(p, out)
	}
	grpc := isGrpcRequest()
	if st := abi.SendEncodedLocalReply(r.status, r.details, r.pairs, grpcBody(grpc, r.body), replyGrpcStatus(grpc, r.grpcStatus)); st != wire.StatusOK {
		p.failed("cannot send a local reply: " + abi.StatusError(st).Error())
	}
	return types.ActionPause
}

// failOpenOrDeny applies the failure mode: allow lets the request through; deny answers 503.
func (h *httpContext) failOpenOrDeny() types.Action {
	if h.plugin.cfg == nil || h.plugin.cfg.FailureMode == config.FailureDeny {
		h.reply(503, detailsFailureDenied, grpcNone, "the rate limiter failed\n")
		return types.ActionPause
	}
	return types.ActionContinue
}

func (h *httpContext) OnHttpResponseHeaders(numHeaders int, endOfStream bool) types.Action {
	faultPoint("response")
	if !h.pending.Empty() {
		h.settleByStatus(endOfStream)
	}
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
		msg += " rule " + h.plugin.ruleName(out.Rule)
	}
	if out.Verdict == admission.Limited {
		msg += " retry_after " + out.RetryAfter.String()
	}
	for _, l := range out.Limits {
		msg += " [" + h.plugin.ruleName(l.Rule) + "." + strconv.Itoa(l.Limit) + " key#" +
			strconv.FormatUint(l.PartitionHash, 16) + " remaining " + strconv.FormatInt(l.Remaining, 10) + "]"
	}
	abi.Log(abi.LogLevelDebug, msg)
}

// verdictNames are the verdicts' names in the debug log, by value (an array: a map's initializer
// would cost the module more than a kilobyte).
var verdictNames = [...]string{
	admission.Allow: "allow", admission.Limited: "limited", admission.MissingKey: "missing_key",
	admission.Exempt: "exempt", admission.BadCost: "invalid_cost", admission.Failed: "failed",
	admission.EscapedSlash: "escaped_slash",
}
