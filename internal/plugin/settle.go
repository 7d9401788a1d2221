package plugin

import (
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
)

// Rules with count or refund settle at the response: an admitted request's charge by them is
// held with the stream (httpContext.pending) until its response headers, whose :status decides
// whether it is given back (admission.Gate.Settle). Envoy passes every response through the
// filter's encoder, the upstream's and the local replies of the filters after this one (the
// router's 503 and 504) alike, so each counts by its status.
//
// A request forwarded to the upstream whose stream ends without response headers (the client
// went away or reset the stream) keeps its charge, for count and refund rules alike: the
// upstream may have done the work, and a count rule that gave the charge back could be escaped
// by hanging up before every response (a password guesser would never be counted). A request
// that never reached the upstream (its client went away while it was held, or a global limit
// rejected it) settles as status 0, which no rule lists: a count rule gives its charge back,
// a refund rule keeps it, and a usage rule gets its reserve back (nothing was used).

// settle settles the charge the stream holds, for a response with status (0: the request never
// reached the upstream).
func (h *httpContext) settle(status int) {
	p := h.plugin
	now, err := abi.MonotonicNanos()
	if err != nil {
		// The charge stands: that errs towards admitting less.
		p.failed("cannot read the monotonic clock: " + err.Error())
		h.pending.Clear()
		return
	}
	for _, i := range p.gate.Settle(sharedData, &h.pending, status, now) {
		p.rules[i].refunded.add(1)
	}
}

// settleByStatus settles the charge the stream holds by its response's :status. A status that
// cannot be read settles nothing: the request was forwarded, so the charge stands, as for a
// stream without a response (status 0 would mean it never reached the upstream).
// The rules with usage start reading the response's usage then (usage.go); endOfStream: the
// response has no body.
func (h *httpContext) settleByStatus(endOfStream bool) {
	status, err := abi.GetHttpResponseStatus()
	if err != nil {
		h.plugin.failed("cannot read the response's :status to settle a count, refund or usage rule: " + err.Error())
		h.pending.Clear()
		return
	}
	h.settle(status)
	if !h.pending.Empty() {
		h.startMetering(status, endOfStream, false)
	}
}

// holdCharge keeps what an admitted request was charged by the rules that settle at the
// response.
func (h *httpContext) holdCharge(out *admission.Outcome) {
	out.Hold(&h.pending)
	h.holdUsage(out)
}

// chargeGivenBack settles what the stream holds once the request's whole charge was given back
// without a response (its client went away while it was held, or a global limit or failure
// rejected it): the enforced rules' part is back already, and must not be given back twice; the
// shadow rules' part is not in that charge, and settles as status 0, as a request that never
// reached the upstream.
func (h *httpContext) chargeGivenBack() {
	h.pending.DropEnforced()
	if !h.pending.Empty() {
		h.settle(0) // a shadow rule with usage gets its reserve back too: nothing was used
	}
}
