package plugin

import (
	"strconv"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// on_limit delay. A request the Gate admitted with a Delay (its tokens are reserved, due that
// much later) is held (held.go) and let go on the first tick at or after its due instant: at
// most one tick period late. Order with the other stages: the local limits decide first (the
// reservation); a rule's global limit is asked when the request is due, so that the rate limit
// service counts it when it goes on; a global rejection then gives the reservation back as for
// any admitted request. A held request whose client goes away gives its reservation back. A
// request that would be held while the VM holds maxHeld already is rejected at once, its
// reservation given back.

// delayMetrics are a delaying rule's counters, named tollgate.rule.<rule>.<name>: requests held,
// their total delay in milliseconds, and (a gauge) the longest delay so far.
type delayMetrics struct {
	delayed, delayMs counter
	maxDelayMs       abi.Gauge
	longest          uint64 // the longest delay this VM held a request, in ms
	reported         uint64 // what this VM last found or set in the gauge
}

// compileDelay defines the counters of a rule that delays; nil for a rule that does not.
func compileDelay(cfg *config.Config, r *config.Rule, define defineFunc) (*delayMetrics, bool) {
	if !r.Delays(cfg) {
		return nil, true
	}
	m := &delayMetrics{}
	prefix := "tollgate.rule." + r.Name + "."
	if !define(prefix+"delayed", &m.delayed) || !define(prefix+"delay_ms", &m.delayMs) {
		return nil, false
	}
	gauge, err := abi.DefineGauge(prefix + "max_delay_ms")
	if err != nil {
		abi.Log(abi.LogLevelCritical, "tollgate: cannot define metric "+prefix+"max_delay_ms: "+err.Error())
		return nil, false
	}
	m.maxDelayMs = gauge
	return m, true
}

// delayWait is a request held until its reserved tokens are due.
type delayWait struct {
	charge   admission.Charge
	admitted []int
	global   []admission.GlobalCheck
}

// delay holds an admitted request until out.Delay has passed, or rejects it at once when the VM
// holds too many.
func (h *httpContext) delay(out *admission.Outcome, now int64) types.Action {
	p := h.plugin
	w := &delayWait{charge: out.Charge(), admitted: append([]int(nil), out.Admitted...)}
	if len(out.Global) > 0 {
		w.global = append([]admission.GlobalCheck(nil), out.Global...)
	}
	rule := out.DelayRule
	if !p.hold(h, now+int64(out.Delay), w) {
		p.gate.GiveBack(sharedData, w.charge, now)
		if p.settles {
			// The shadow rules' part is not in the charge: it settles as without a response.
			h.holdCharge(out)
			h.chargeGivenBack()
		}
		p.rules[rule].limited.add(1)
		out.Verdict, out.Rule, out.RetryAfter = admission.Limited, rule, out.Delay
		if p.debug {
			abi.Log(abi.LogLevelDebug, "tollgate: decision limited rule "+p.ruleName(rule)+": "+strconv.Itoa(maxHeld)+
				" requests held already, retry_after "+out.Delay.String())
		}
		h.rejectLimited(out)
		return types.ActionPause
	}
	if p.settles {
		h.holdCharge(out) // settled at the response, as for a request admitted at once
	}
	if p.shadowRules {
		h.markShadow(out)
	}
	if len(out.Limits) > 0 {
		h.responseHeaders = h.rateLimit.render(p.cfg.RateLimitHeaders, p.rules, out)
	}
	p.countDelay(rule, out.Delay+h.slotWaited(now)) // with the wait for a slot before, if any
	if p.debug {
		abi.Log(abi.LogLevelDebug, "tollgate: decision delayed rule "+p.ruleName(rule)+" owner#"+
			strconv.FormatUint(out.DelayOwner, 16)+" for "+out.Delay.String()+" ("+strconv.Itoa(p.heldCount())+" held)")
	}
	return types.ActionPause
}

// countDelay counts a request of a delaying rule held for d in all.
func (p *pluginContext) countDelay(rule int, d duration.Duration) {
	m := p.rules[rule].delay
	ms := uint64((d + duration.Millisecond - 1) / duration.Millisecond)
	m.delayed.add(1)
	m.delayMs.add(ms)
	m.longest = max(m.longest, ms)
}

// wake lets the request go on, after its global checks if it has any.
func (w *delayWait) wake(h *httpContext, now int64) (wakeResult, int64) {
	p := h.plugin
	if len(w.global) > 0 && p.hasGlobal {
		action, held := h.askGlobal(w.global, w.charge, w.admitted, now)
		switch {
		case !held:
		case action == types.ActionContinue:
			return goOn, 0 // nothing was sent: admitted, and counted, by askGlobal
		default:
			return answered, 0 // answered, or held for the service, whose answer resumes it
		}
	}
	p.countAdmitted(w.admitted)
	return goOn, 0
}

// gone gives the reservation back: the client went away while its request was held.
func (w *delayWait) gone(h *httpContext, now int64) {
	// The whole reservation is given back here: a count rule's hold, settled when the stream
	// ends, must not give its part back again.
	h.chargeGivenBack()
	h.plugin.gate.GiveBack(sharedData, w.charge, now)
	if h.plugin.debug {
		abi.Log(abi.LogLevelDebug, "tollgate: a delayed request's client went away; its reservation was given back")
	}
}

// flushDelayGauges raises each max_delay_ms gauge to this VM's longest delay. Every worker VM
// sets the same stat, so each only raises what it reads there: the gauge is the longest delay
// any worker held a request (a race between two raises can leave the lower one, until the
// other VM's next flush).
func (p *pluginContext) flushDelayGauges() {
	for i := range p.rules {
		m := p.rules[i].delay
		if m == nil || m.longest <= m.reported {
			continue
		}
		current, err := m.maxDelayMs.Value()
		if err == nil && current >= m.longest {
			m.reported = current
			continue
		}
		if err := m.maxDelayMs.Set(m.longest); err == nil {
			m.reported = m.longest
		}
	}
}
