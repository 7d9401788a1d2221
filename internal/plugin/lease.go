package plugin

import (
	"strconv"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/rls"
)

// Leases (global.lease): a request of a rule with a lease first takes its cost from the tokens
// its replica leased for the key (admission/lease.go, in shared data, spent by every VM); only
// when they do not cover it does it wait for a lease request, which asks the service for the
// next lease's size at once (hits_addend). On one VM, requests of a key wait on the lease request
// in flight for it instead of sending their own, and are decided together when it is answered:
// in order, each takes its cost from the grant while it lasts, and what is left goes to the
// pool; one that the grant does not cover takes from the pool or asks again. Other VMs do not
// wait for it (a VM cannot be woken by another): a VM that finds the pool dry sends its own
// request, so a replica has at most one lease request per key and worker VM in flight, and the
// grants all go to the same pool.
//
// Deciding several streams in one callback is what Envoy provides for: the lease request is the
// plugin's own (not a stream's), and its callback selects each waiting stream with
// proxy_set_effective_context (proxy-wasm-cpp-host src/exports.cc set_effective_context) before
// continuing or answering it; Envoy queues each continue and each local reply until the callback
// returns (source/extensions/common/wasm/context.cc continueStream and sendLocalResponse, through
// addAfterVmCallAction), one per stream.

// leaseMetrics are a lease rule's counters, named tollgate.rule.<rule>.global_lease_<event>.
type leaseMetrics struct {
	requests, tokens, expired, served, remembered counter
}

// leaseCall is a lease request in flight, with the requests of this VM that wait for it.
type leaseCall struct {
	rule    int
	key     string
	ask     int64
	sent    int64
	waiters []leaseWaiter
}

// leaseWaiter is a request waiting for a lease request; it still waits while its stream's wait
// is w and undecided (a finished stream's context is reused for another request).
type leaseWaiter struct {
	h    *httpContext
	w    *globalWait
	cost int64
}

func (lw *leaseWaiter) waiting() bool { return lw.h.global == lw.w && !lw.w.decided }

// setUpLease defines a lease rule's counters.
func setUpLease(g *globalRule, name string, define defineFunc) bool {
	g.inFlight = map[string]*leaseCall{}
	prefix := "tollgate.rule." + name + ".global_"
	m := &g.lease
	return define(prefix+"lease_requests", &m.requests) && define(prefix+"lease_tokens", &m.tokens) &&
		define(prefix+"lease_expired", &m.expired) && define(prefix+"lease_served", &m.served) &&
		define(prefix+"over_limit_remembered", &m.remembered)
}

// leaseOutcome is what checkLease did with one global check.
type leaseOutcome uint8

const (
	leaseServed   leaseOutcome = iota // covered by the lease: nothing to wait for
	leaseWaiting                      // waits for a lease request
	leaseRejected                     // rejected (answered) by a remembered OVER_LIMIT
	leaseDirect                       // the lease cannot be used: ask the service as without one
	leaseFailed                       // the lease request could not start; failure mode deny answered
)

// checkLease decides one global check of a rule with a lease for the held request h. A lease
// request it sends asks for at least minAsk: what the requests it is sent for need together.
func (h *httpContext) checkLease(g *globalRule, c admission.GlobalCheck, now, minAsk int64) leaseOutcome {
	p := h.plugin
	take, err := p.gate.TakeLease(sharedData, c.Rule, c.Key, c.Cost, now)
	if take.Expired > 0 {
		g.lease.expired.add(uint64(take.Expired))
	}
	if err != nil {
		p.failed("rule " + p.ruleName(c.Rule) + ": cannot use the lease, asking the service for the request alone: " + err.Error())
		return leaseDirect
	}
	switch take.Verdict {
	case admission.LeaseServed:
		g.lease.served.add(1)
		h.showGlobalQuota(c.Rule, quotaFromLease(take))
		return leaseServed
	case admission.LeaseOverLimit:
		g.lease.remembered.add(1)
		h.rejectGlobal(c.Rule, rememberedOverLimit(take), now)
		return leaseRejected
	}
	w := h.global
	if call := g.inFlight[c.Key]; call != nil {
		call.waiters = append(call.waiters, leaseWaiter{h: h, w: w, cost: c.Cost})
		w.leases++
		return leaseWaiting
	}
	call := &leaseCall{rule: c.Rule, key: c.Key, ask: max(take.Ask, minAsk), sent: now, waiters: []leaseWaiter{{h: h, w: w, cost: c.Cost}}}
	if !p.sendLease(g, call) {
		if g.config.FailureMode == config.FailureDeny {
			h.denyGlobal(c.Rule)
			return leaseFailed
		}
		return leaseServed // failure mode allow: nothing to wait for
	}
	w.leases++
	return leaseWaiting
}

// rememberedOverLimit is the answer a remembered OVER_LIMIT stands for, for the reply.
func rememberedOverLimit(take admission.LeaseTake) rls.Response {
	return rls.Response{OverallCode: rls.CodeOverLimit, Statuses: 1, Status: rls.Status{Code: rls.CodeOverLimit,
		RequestsPerUnit: take.Quota, Unit: rls.Unit(take.Unit), DurationUntilReset: take.RetryAfter, HasReset: true}}
}

// sendLease sends a lease request; false (counted and logged) if it could not start.
func (p *pluginContext) sendLease(g *globalRule, call *leaseCall) bool {
	g.entries[len(g.entries)-1].Value = call.key
	msg := rls.AppendRequest(nil, g.config.Domain, g.entries, uint32(call.ask))
	_, err := abi.DispatchGrpcCall(0, g.config.Cluster, rls.Service, rls.Method, nil, msg, g.timeoutMs,
		func(status uint32, message string, response []byte) { p.onLeaseAnswer(call, status, message, response) })
	if err != nil {
		g.metrics.failed.add(1)
		p.globalFailed(call.rule, "cannot call cluster "+strconv.Quote(g.config.Cluster)+": "+err.Error())
		return false
	}
	g.lease.requests.add(1)
	g.inFlight[call.key] = call
	return true
}

// onLeaseAnswer decides the requests that waited for a lease request, together.
func (p *pluginContext) onLeaseAnswer(call *leaseCall, status uint32, message string, response []byte) {
	g := p.rules[call.rule].global
	if g.inFlight[call.key] == call {
		delete(g.inFlight, call.key)
	}
	now, err := abi.MonotonicNanos()
	if err != nil {
		now = call.sent
	}
	defer func() {
		if r := recover(); r != nil {
			p.failed("recovered panic while handling the rate limit service's answer to a lease request")
			for i := range call.waiters {
				if lw := &call.waiters[i]; lw.waiting() && abi.SetEffectiveContext(lw.h.id) == nil {
					lw.h.leaseDone()
				}
			}
		}
	}()
	switch kind, resp := p.readAnswer(call.rule, status, message, response, now-call.sent); kind {
	case answeredOverLimit:
		p.leaseRefused(g, call, resp, now)
		return
	case answeredOK:
		p.leaseGranted(g, call, resp, now)
		return
	}
	// The call failed: every request that waited follows the failure mode, together.
	for i := range call.waiters {
		lw := &call.waiters[i]
		if !lw.waiting() || abi.SetEffectiveContext(lw.h.id) != nil {
			continue
		}
		if g.config.FailureMode == config.FailureDeny {
			lw.h.denyGlobal(call.rule)
		} else {
			lw.h.leaseDone()
		}
	}
}

// leaseGranted serves the waiting requests from a grant, in order, puts what is left in the
// pool, and sends the requests the grant did not cover on their way again.
func (p *pluginContext) leaseGranted(g *globalRule, call *leaseCall, resp rls.Response, now int64) {
	g.lease.tokens.add(uint64(call.ask))
	left := call.ask
	var uncovered []leaseWaiter
	for _, lw := range call.waiters {
		switch {
		case !lw.waiting():
		case lw.cost <= left:
			left -= lw.cost
			if abi.SetEffectiveContext(lw.h.id) == nil {
				lw.h.showGlobalQuota(call.rule, quotaFromAnswer(resp, left))
				lw.h.leaseDone()
			}
		default:
			uncovered = append(uncovered, lw)
		}
	}
	grant := admission.LeaseGrant{Tokens: left, Asked: call.ask, SentAt: call.sent, Remaining: -1}
	if s := resp.Status; resp.Statuses > 0 {
		if s.HasReset && s.DurationUntilReset > 0 {
			grant.UntilReset = s.DurationUntilReset
		}
		if s.RequestsPerUnit > 0 {
			grant.Remaining, grant.Quota, grant.Unit = int64(s.LimitRemaining), s.RequestsPerUnit, uint8(s.Unit)
		}
	}
	expired, err := p.gate.PutLease(sharedData, call.rule, call.key, grant, now)
	if expired > 0 {
		g.lease.expired.add(uint64(expired))
	}
	if err != nil {
		p.failed("rule " + p.ruleName(call.rule) + ": cannot keep leased tokens: " + err.Error())
	}
	// The requests the grant did not cover go again, the first one that asks the service asking
	// for all of them.
	need := int64(0)
	for _, lw := range uncovered {
		need += lw.cost
	}
	for _, lw := range uncovered {
		if !lw.waiting() || abi.SetEffectiveContext(lw.h.id) != nil {
			continue
		}
		lw.w.leases--
		result := lw.h.checkLease(g, admission.GlobalCheck{Rule: call.rule, Key: call.key, Cost: lw.cost}, now, min(need, g.config.Lease.MaxTokens))
		need -= lw.cost
		switch result {
		case leaseServed:
			lw.h.admitIfSettled()
		case leaseDirect:
			// The pool failed: the request goes on as the failure mode allows.
			if g.config.FailureMode == config.FailureDeny {
				lw.h.denyGlobal(call.rule)
			} else {
				lw.h.admitIfSettled()
			}
		}
	}
}

// leaseRefused remembers the service's OVER_LIMIT and rejects every request that waited.
func (p *pluginContext) leaseRefused(g *globalRule, call *leaseCall, resp rls.Response, now int64) {
	if s := resp.Status; resp.Statuses > 0 && s.HasReset && s.DurationUntilReset > 0 {
		if err := p.gate.RefuseLease(sharedData, call.rule, call.key, s.DurationUntilReset, s.RequestsPerUnit, uint8(s.Unit), now); err != nil {
			p.failed("rule " + p.ruleName(call.rule) + ": cannot remember the service's OVER_LIMIT: " + err.Error())
		}
	}
	for i := range call.waiters {
		lw := &call.waiters[i]
		if lw.waiting() && abi.SetEffectiveContext(lw.h.id) == nil {
			lw.h.rejectGlobal(call.rule, resp, now)
		}
	}
}

// leaseDone ends one lease wait of a held request; the request goes on once nothing else is
// outstanding.
func (h *httpContext) leaseDone() {
	h.global.leases--
	h.admitIfSettled()
}

// admitIfSettled lets a held request go on once no lease and no call is outstanding any more.
func (h *httpContext) admitIfSettled() {
	if w := h.global; !w.decided && w.leases == 0 && len(w.pending) == 0 {
		h.admitGlobal()
	}
}

// leaveLeases ends the lease waits of a stream that ends while held: its local charge goes back.
func (h *httpContext) leaveLeases() {
	w := h.global // not nil: OnHttpStreamDone calls it only for a stream with global checks
	if w.decided || w.leases == 0 {
		return
	}
	w.decided = true
	now, err := abi.MonotonicNanos()
	if err != nil {
		now = w.sent
	}
	h.plugin.gate.GiveBack(sharedData, w.charge, now)
	h.chargeGivenBack() // the enforced part with the rest
}
