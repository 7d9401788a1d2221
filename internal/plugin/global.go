package plugin

import (
	"strconv"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/internal/rls"
)

// Global limits: a request the local limits admitted, with a rule that has a global limit, is
// held while the rate limit service is asked (one ShouldRateLimit per such rule, through
// proxy_grpc_call). OK from every service lets it go on; OVER_LIMIT from one rejects it as the
// local limits do, with Retry-After from the service's duration_until_reset; an error or a
// timeout follows the rule's global failure_mode. A request rejected after all gets back what
// its local limits were charged, and so does one whose stream ends while it is held.

// globalMetrics are a global rule's counters, named tollgate.rule.<rule>.global_<result>.
type globalMetrics struct {
	ok, overLimit, failed, timeout, cancelled counter
}

// globalRule is what a rule with a global limit needs per call.
type globalRule struct {
	config    *config.Global
	entries   []rls.Entry // the constant entries, with room for the rule and key entries
	timeoutMs uint32
	metrics   globalMetrics
	// With a lease (lease.go): its counters, and this VM's lease requests in flight by key.
	lease    leaseMetrics
	inFlight map[string]*leaseCall
}

// compileGlobal prepares the calls of a rule with a global limit and defines its counters; nil
// for a rule without one.
func compileGlobal(r *config.Rule, define defineFunc) (*globalRule, bool) {
	if r.Global == nil {
		return nil, true
	}
	g := &globalRule{config: r.Global, timeoutMs: uint32(r.Global.Timeout / duration.Millisecond)}
	for _, e := range r.Global.Entries {
		g.entries = append(g.entries, rls.Entry{Key: e.Key, Value: e.Value})
	}
	g.entries = append(g.entries, rls.Entry{Key: r.Global.RuleEntry, Value: r.Name}, rls.Entry{Key: r.Global.KeyEntry})
	prefix := "tollgate.rule." + r.Name + ".global_"
	if !define(prefix+"ok", &g.metrics.ok) || !define(prefix+"over_limit", &g.metrics.overLimit) ||
		!define(prefix+"error", &g.metrics.failed) || !define(prefix+"timeout", &g.metrics.timeout) ||
		!define(prefix+"cancelled", &g.metrics.cancelled) {
		return nil, false
	}
	if r.Global.Lease != nil && !setUpLease(g, r.Name, define) {
		return nil, false
	}
	return g, true
}

// globalWait is a request held for the rate limit service.
type globalWait struct {
	pending  map[uint32]int // tokens of the calls not answered yet, to their rule
	charge   admission.Charge
	admitted []int // rules to count as admitted if the request goes on
	sent     int64 // monotonic time the calls went out
	decided  bool
	leases   int // lease requests it waits for (lease.go)
}

// checkGlobal asks the rate limit service about the global limits of an admitted request. held
// is false when there is nothing to ask; otherwise action is what the request-headers callback
// returns.
func (h *httpContext) checkGlobal(out *admission.Outcome, now int64) (action types.Action, held bool) {
	p := h.plugin
	if !p.hasGlobal {
		return types.ActionContinue, false
	}
	if len(out.Global) == 0 {
		return types.ActionContinue, false
	}
	if p.shadowRules {
		h.markShadow(out)
	}
	h.responseHeaders = h.rateLimit.render(p.cfg.RateLimitHeaders, p.rules, out)
	return h.askGlobal(out.Global, out.Charge(), append([]int(nil), out.Admitted...), now)
}

// askGlobal makes a request's global checks; it is checkGlobal after the request was marked,
// also for a request held by on_limit delay (delay.go), whose checks are made when it is due.
func (h *httpContext) askGlobal(checks []admission.GlobalCheck, charge admission.Charge, admitted []int, now int64) (action types.Action, held bool) {
	p := h.plugin
	w := &globalWait{pending: map[uint32]int{}, charge: charge, admitted: admitted, sent: now}
	h.global = w
	deny := -1 // a rule whose call could not start and whose failure mode is deny
	for _, c := range checks {
		g := p.rules[c.Rule].global
		if g.inFlight != nil {
			switch h.checkLease(g, c, now, 0) {
			case leaseServed, leaseWaiting:
				continue
			case leaseRejected, leaseFailed:
				return types.ActionPause, true
			}
		}
		g.entries[len(g.entries)-1].Value = c.Key
		msg := rls.AppendRequest(nil, g.config.Domain, g.entries, uint32(c.Cost))
		rule := c.Rule
		token, err := abi.DispatchGrpcCall(h.id, g.config.Cluster, rls.Service, rls.Method, nil, msg, g.timeoutMs,
			func(status uint32, message string, response []byte) {
				h.onGlobalAnswer(rule, status, message, response)
			})
		if err != nil {
			g.metrics.failed.add(1)
			p.globalFailed(rule, "cannot call cluster "+strconv.Quote(g.config.Cluster)+": "+err.Error())
			if g.config.FailureMode == config.FailureDeny && deny < 0 {
				deny = rule
			}
			continue
		}
		w.pending[token] = rule
	}
	switch {
	case deny >= 0:
		h.denyGlobal(deny)
		return types.ActionPause, true
	case len(w.pending) == 0 && w.leases == 0:
		// Nothing was sent, so the request is decided here: the callback's Continue lets it
		// go on. Continuing the stream as well would continue it twice: Envoy runs a
		// proxy_continue_stream after the callback, on a filter chain that already went on.
		w.decided = true
		p.countAdmitted(w.admitted)
		return types.ActionContinue, true
	}
	return types.ActionPause, true
}

// countAdmitted counts a request that goes on as admitted by each of its rules.
func (p *pluginContext) countAdmitted(rules []int) {
	for _, i := range rules {
		p.rules[i].admitted.add(1)
	}
}

// onGlobalAnswer handles the end of one call, with the request's stream as the effective context.
func (h *httpContext) onGlobalAnswer(rule int, status uint32, message string, response []byte) {
	p, w := h.plugin, h.global
	if w == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			p.failed("recovered panic while handling the rate limit service's answer")
			if !w.decided {
				h.admitGlobal()
			}
		}
	}()
	g := p.rules[rule].global
	now, err := abi.MonotonicNanos()
	if err != nil {
		now = w.sent
	}
	for token, r := range w.pending {
		if r == rule {
			delete(w.pending, token)
			break
		}
	}
	if status == abi.GrpcStatusStreamEnded {
		g.metrics.cancelled.add(1)
		if !w.decided {
			w.decided = true
			p.gate.GiveBack(sharedData, w.charge, now)
			h.chargeGivenBack() // the enforced part with the rest
			h.releaseSlots()
		}
		return
	}
	if w.decided {
		return
	}
	switch kind, resp := p.readAnswer(rule, status, message, response, now-w.sent); {
	case kind == answeredOverLimit:
		h.rejectGlobal(rule, resp, now)
		return
	case kind == callFailed && g.config.FailureMode == config.FailureDeny:
		h.denyGlobal(rule)
		return
	case kind == answeredOK:
		h.showGlobalQuota(rule, quotaFromAnswer(resp, 0))
	}
	if len(w.pending) == 0 && w.leases == 0 {
		h.admitGlobal()
	}
}

// answerKind is what a call to the rate limit service came to.
type answerKind uint8

const (
	answeredOK answerKind = iota
	answeredOverLimit
	callFailed // the call failed, or its answer cannot be used: the rule's failure mode applies
)

// readAnswer reads what a call to the rate limit service for a rule came to, elapsed
// nanoseconds after it was made, and counts it in the rule's global_ok, global_over_limit,
// global_timeout or global_error; a failure is logged once per distinct message.
func (p *pluginContext) readAnswer(rule int, status uint32, message string, response []byte, elapsed int64) (answerKind, rls.Response) {
	g := p.rules[rule].global
	var resp rls.Response
	var failure string
	timedOut := false
	if status != abi.GrpcStatusOK {
		failure, timedOut = callFailure(status, message, elapsed, g.config.Timeout)
	} else {
		var err error
		resp, err = rls.DecodeResponse(response)
		switch {
		case err != nil:
			failure = "the rate limit service's answer cannot be read: " + err.Error()
		case resp.OverallCode == rls.CodeOverLimit:
			g.metrics.overLimit.add(1)
			return answeredOverLimit, resp
		case resp.OverallCode == rls.CodeOK:
			g.metrics.ok.add(1)
			return answeredOK, resp
		default:
			failure = "the rate limit service answered UNKNOWN"
		}
	}
	if timedOut {
		g.metrics.timeout.add(1)
		failure = "the rate limit service did not answer within " + g.config.Timeout.String()
	} else {
		g.metrics.failed.add(1)
	}
	p.globalFailed(rule, failure)
	return callFailed, resp
}

// callFailure describes a call to the rate limit service that ended with a gRPC status other than
// OK, and whether it timed out. Envoy reports its own timeout as UNAVAILABLE "upstream request
// timeout"; the clock tells it apart from an unavailable service whatever the message.
func callFailure(status uint32, message string, elapsed int64, timeout duration.Duration) (failure string, timedOut bool) {
	timedOut = status == abi.GrpcStatusDeadlineExceeded || elapsed >= int64(timeout) ||
		status == abi.GrpcStatusUnavailable && message == "upstream request timeout"
	failure = "the rate limit service failed: gRPC status " + strconv.FormatUint(uint64(status), 10)
	if message != "" {
		failure += " (" + message + ")"
	}
	return failure, timedOut
}

// admitGlobal lets the held request go on.
func (h *httpContext) admitGlobal() {
	p, w := h.plugin, h.global
	w.decided = true
	p.countAdmitted(w.admitted)
	if err := abi.ResumeHttpRequest(); err != nil {
		p.failed("cannot continue a request after the rate limit service's answer: " + err.Error())
	}
}

// finish decides a held request that will not go on: the calls still out are cancelled and the
// local charge is given back.
func (h *httpContext) finish(now int64) {
	w := h.global
	w.decided = true
	// The headers of an admitted response: the reply carries its own.
	h.responseHeaders = nil
	for token := range w.pending {
		_ = abi.CancelGrpcCall(token)
		delete(w.pending, token)
	}
	h.plugin.gate.GiveBack(sharedData, w.charge, now)
	h.chargeGivenBack() // the enforced part with the rest: the reply settles nothing
	h.releaseSlots()
}

// rejectGlobal answers a request a global limit rejected as local rejections are answered, with
// Retry-After from the service's duration_until_reset (rounded up, at least 1 second).
func (h *httpContext) rejectGlobal(rule int, resp rls.Response, now int64) {
	p := h.plugin
	h.finish(now)
	p.rules[rule].limited.add(1)
	retryAfter := int64(1)
	if s := resp.Status; resp.Statuses > 0 && s.HasReset && s.DurationUntilReset > 0 {
		retryAfter = max(ceilSeconds(s.DurationUntilReset), 1)
	}
	if p.debug {
		abi.Log(abi.LogLevelDebug, "tollgate: decision limited rule "+p.ruleName(rule)+" by the global limit, retry_after "+
			strconv.FormatInt(retryAfter, 10)+"s")
	}
	h.sendRejection(detailsGlobalRateLimited, retryAfter, globalRateLimitHeaders(p.cfg.RateLimitHeaders, p.ruleName(rule), resp, retryAfter))
}

// denyGlobal answers 503 for a rule whose service failed with failure_mode deny.
func (h *httpContext) denyGlobal(rule int) {
	now, err := abi.MonotonicNanos()
	if err != nil {
		now = h.global.sent
	}
	h.finish(now)
	h.reply(503, detailsGlobalFailureDenied, grpcNone,
		"the global rate limit service failed (rate limit rule "+h.plugin.ruleName(rule)+")\n")
}

// globalRateLimitHeaders describe the global limit that rejected a request, when the service
// said which limit applied: its policy is named "<rule>/global" ('/' cannot occur in a rule
// name), with the quota per unit and the unit in seconds.
func globalRateLimitHeaders(style config.HeaderStyle, rule string, resp rls.Response, retryAfter int64) [][2]string {
	s := resp.Status
	window := s.Unit.Seconds()
	if resp.Statuses == 0 || s.RequestsPerUnit == 0 || window == 0 {
		return nil
	}
	quota, t := strconv.FormatUint(uint64(s.RequestsPerUnit), 10), strconv.FormatInt(retryAfter, 10)
	switch style {
	case config.HeadersDraft:
		name := `"` + rule + `/global"`
		return [][2]string{
			{"ratelimit-policy", name + ";q=" + quota + ";w=" + strconv.FormatInt(window, 10)},
			{"ratelimit", name + ";r=0;t=" + t},
		}
	case config.HeadersXRateLimit:
		return [][2]string{{"x-ratelimit-limit", quota}, {"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", t}}
	}
	return nil
}

// globalFailed logs a failure of the rate limit service once per distinct message (it is
// counted in the rule's global_error or global_timeout).
func (p *pluginContext) globalFailed(rule int, msg string) {
	msg = "tollgate: rule " + p.ruleName(rule) + ": " + msg + " (global failure_mode " +
		p.rules[rule].global.config.FailureMode.String() + ")"
	if msg != p.lastGlobalFailure {
		p.lastGlobalFailure = msg
		abi.Log(abi.LogLevelWarn, msg)
	}
}

func ceilSeconds(d duration.Duration) int64 {
	return int64((d + duration.Second - 1) / duration.Second)
}
