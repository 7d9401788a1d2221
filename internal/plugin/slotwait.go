package plugin

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// Waiting for a free slot. A request of a rule with on_limit delay that finds every slot of its
// rule's concurrency limit taken is held (held.go) instead of answered, and decided again on
// every tick of its VM: nothing predicts when a slot frees, so it tries at each one.
//
//   - Its whole hold is bounded by the rule's max_delay from its first decision: decided again,
//     it reserves only tokens due by then (admission.Gate.AdmitBy); tokens due later reject it
//     at once, with their Retry-After. A request still finding no free slot at a tick at or
//     after that instant gets the rejection of a full concurrency limit (429, Retry-After 1).
//   - Once admitted it goes on as any admitted request (or waits for its tokens, held in turn,
//     keeping its place), and holds its slot until its stream ends (OnHttpStreamDone).
//   - It is counted once: the counters of its decision (admitted or limited, missing keys,
//     table full...) and the decision's debug line are those of its last decision only. The
//     time it waited counts in its rule's delay counters when it is admitted.
//   - While it waits it holds nothing: a client that goes away takes it out of the held set,
//     and nothing is given back or counted.
//   - Cost: on a tick, once a request finds the slots of its key (of its concurrency limit)
//     all taken, the other requests waiting for the same slots are not decided again until
//     the next tick: a VM decides about one request per waited-for key and tick, however many
//     wait for it.
//   - Order: each VM retries its waiting requests in the order they arrived, so among one VM's
//     waiters of a key the oldest gets the first slot that VM's tick finds free. A freed slot is
//     not reserved for waiters, though: a new request (on any VM) that arrives between the
//     release and the next tick, or another VM's tick, may take it first; whoever writes the
//     shared slot first wins its compare-and-swap.

// slotWaitFor is how long a rule's requests may wait for a free slot: the rule's max_delay when
// it delays and has a concurrency limit (its tiers' included), 0 otherwise.
func slotWaitFor(cfg *config.Config, r *config.Rule) duration.Duration {
	if !r.Delays(cfg) || !r.HasConcurrency() {
		return 0
	}
	return r.OnLimit.MaxDelay
}

// slotWaiting is what the plugin keeps for the requests waiting for a free slot.
type slotWaiting struct {
	// full lists the owners of the concurrency limits (limit and key) found full on the held
	// set's wake round fullRound: their other waiters are not decided again in that round.
	full      []uint64
	fullRound uint64
}

// noteFull records that the concurrency limit of owner was full in the current round.
func (p *pluginContext) noteFull(owner uint64) {
	s := &p.slots
	if s.fullRound != p.held.round {
		s.full, s.fullRound = s.full[:0], p.held.round
	}
	if len(s.full) < maxHeld {
		s.full = append(s.full, owner)
	}
}

// foundFull reports whether the concurrency limit of owner was found full in the current round.
func (p *pluginContext) foundFull(owner uint64) bool {
	s := &p.slots
	if s.fullRound != p.held.round {
		return false
	}
	for _, o := range s.full {
		if o == owner {
			return true
		}
	}
	return false
}

// slotWait is a request waiting for a free slot.
type slotWait struct {
	rule     int    // the rule whose slot it waits for
	since    int64  // monotonic ns of its first decision
	deadline int64  // since + the rule's max_delay
	owner    uint64 // the concurrency limit (and key) that found no free slot last
	// again is set when a decision made while waking it found no free slot still.
	again bool
}

// waitsForSlot reports whether a request a concurrency limit rejected waits for a free slot:
// then it is held (or still held) and the request-headers callback returns ActionPause, having
// counted nothing. False when the request is rejected now.
func (h *httpContext) waitsForSlot(out *admission.Outcome, now int64) bool {
	p := h.plugin
	wait := p.rules[out.Rule].slotWait
	if wait == 0 {
		return false
	}
	if w := h.slotWait; w != nil { // decided again on a tick
		if now >= w.deadline || out.Rule != w.rule && now-w.since >= wait {
			return false
		}
		w.again, w.owner = true, out.InFlightOwner
		p.noteFull(w.owner)
		return true
	}
	if !p.hold(h, now, &slotWait{rule: out.Rule, since: now, deadline: now + wait, owner: out.InFlightOwner}) {
		return false // the VM holds maxHeld requests already: rejected at once
	}
	if p.debug {
		abi.Log(abi.LogLevelDebug, "tollgate: decision waiting for a free slot rule "+p.ruleName(out.Rule)+
			" for at most "+duration.Duration(wait).String())
	}
	return true
}

// slotWaited is how long the request has waited for a slot, 0 if it did not.
func (h *httpContext) slotWaited(now int64) duration.Duration {
	if w := h.slotWait; w != nil {
		return duration.Duration(now - w.since)
	}
	return 0
}

// wake decides the request again, with its stream as the effective context (Envoy keeps a
// stopped request's headers until it is continued, so they are read again as at first).
func (w *slotWait) wake(h *httpContext, now int64) (wakeResult, int64) {
	p := h.plugin
	if now < w.deadline && p.foundFull(w.owner) {
		return stillHeld, now + 1 // an earlier waiter found its slots all taken on this tick
	}
	h.slotWait = w
	defer func() { h.slotWait = nil }()
	action := h.OnHttpRequestHeaders(0, false)
	switch {
	case w.again:
		w.again = false
		return stillHeld, now + 1 // the next tick
	case p.held.rehold.h != nil:
		return stillHeld, 0 // admitted, and held for its tokens (delay counted the wait)
	}
	if len(h.inFlight) > 0 { // admitted: going on, or asking the rate limit service
		p.countDelay(w.rule, duration.Duration(now-w.since))
	}
	if action == types.ActionContinue {
		return goOn, 0
	}
	return answered, 0 // answered, or held for the rate limit service, whose answer resumes it
}

// gone: a request waiting for a slot holds nothing.
func (*slotWait) gone(*httpContext, int64) {}
