package plugin

import (
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
)

// Concurrency limits: an admitted request holds a slot of each concurrency limit it passed
// until its stream ends. Envoy calls proxy_on_delete for every stream whose context was
// created, however it ends (response complete, reset, local reply: envoy
// source/extensions/common/wasm/context.cc, Context::onDestroy, run from the connection
// manager's deferred stream destroy on every path), and the ABI layer turns it into
// OnHttpStreamDone, where the slots are released (a configuration with a concurrency limit never
// lets its streams go: release). The slots are kept right after the
// decision, before anything else can answer the request (a failure mode, a global limit), so
// every later end releases them; a slot whose end never comes (the VM died) is freed once
// its slot_timeout has passed (twice at most).

// holdSlots keeps the slots the decision took with the stream. The context's slice is reused
// from stream to stream: holding allocates nothing once it has grown.
func (h *httpContext) holdSlots(out *admission.Outcome) {
	h.inFlight = out.AppendInFlight(h.inFlight[:0])
}

// releaseSlots gives the stream's slots back: at its end, or earlier when the request is
// rejected after all (a global limit).
func (h *httpContext) releaseSlots() {
	if len(h.inFlight) == 0 {
		return
	}
	p := h.plugin
	now, err := abi.MonotonicNanos()
	if err != nil {
		// The slots stay taken until their slot_timeout has passed.
		p.failed("cannot read the monotonic clock to release a request's slots: " + err.Error())
	} else {
		p.gate.Release(sharedData, h.inFlight, now)
	}
	clear(h.inFlight)
	h.inFlight = h.inFlight[:0]
}
