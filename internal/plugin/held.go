package plugin

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
)

// Held requests. A feature that makes a request wait before it goes on (on_limit delay, a
// concurrency limit waiting for a free slot) holds it: the request-headers callback registers it
// with hold and returns ActionPause. The plugin's tick then wakes every held request whose due
// instant has passed, with the request's stream as the effective context
// (proxy_set_effective_context), and the waiter decides: let it go on (proxy_continue_stream,
// which the host runs once the tick has returned), keep it held until a later instant, or answer
// it itself (a local reply). A request whose client goes away while it is held ends its stream
// (Envoy calls proxy_on_log, proxy_on_done, proxy_on_delete): the waiter is told, and gives back
// what it reserved.
//
// Each worker VM holds and wakes its own requests: the held set is the VM's, never shared. It is
// bounded (maxHeld), and a request past the bound is not held: the caller rejects it.

const (
	// heldTickPeriod is the tick period, in milliseconds, of a plugin that may hold requests: a
	// held request goes on at most one period after it is due. The counters are flushed on
	// every tick, as with the slower tickPeriod; only the counters that changed cost a host
	// call.
	heldTickPeriod = 10
	// maxHeld bounds the requests one VM holds at once: each costs an entry here and, in Envoy,
	// a stream with its buffers. Past it, requests that would wait are rejected.
	maxHeld = 1024
)

// wakeResult is what a waiter decided when woken.
type wakeResult uint8

const (
	stillHeld wakeResult = iota // keep it held; wake it again at the instant returned
	goOn                        // let the request go on upstream
	answered                    // the waiter answered it (a local reply) or let it go itself
)

// waiter is what a held request waits for.
type waiter interface {
	// wake runs on a tick at or after the request's due instant, with its stream as the
	// effective context: the request's headers can be read and a local reply sent. With
	// stillHeld it returns the next instant to wake at.
	wake(h *httpContext, now int64) (wakeResult, int64)
	// gone runs when the request's stream ends while it is held: the client went away.
	gone(h *httpContext, now int64)
}

// heldRequest is one request in the held set.
type heldRequest struct {
	h   *httpContext
	due int64 // monotonic nanoseconds
	w   waiter
}

// heldSet is a VM's held requests, in the order they were held: requests due at the same tick go
// on in that order.
type heldSet struct {
	list []heldRequest
	// round counts the wakes (ticks) that found a request due.
	round uint64
	// waking is the request whose waiter runs (wakeOne). A hold of it meanwhile (a request
	// that waited for a slot, admitted with its tokens due later) is kept in rehold, and
	// replaces its wait in place: it keeps its place in the order.
	waking *httpContext
	rehold heldRequest
}

// hold registers h as held until due (monotonic nanoseconds), waiting for w; false when the VM
// holds maxHeld requests already: then nothing was registered, and the caller rejects the
// request. The caller returns ActionPause from the request-headers callback.
func (p *pluginContext) hold(h *httpContext, due int64, w waiter) bool {
	if h == p.held.waking && h.held {
		p.held.rehold = heldRequest{h: h, due: due, w: w}
		return true
	}
	if len(p.held.list) >= maxHeld || h.held {
		return false
	}
	p.held.list = append(p.held.list, heldRequest{h: h, due: due, w: w})
	h.held = true
	return true
}

// heldCount is the number of requests the VM holds.
func (p *pluginContext) heldCount() int { return len(p.held.list) }

// tickPeriodMilliseconds is the plugin's tick period: fast when its rules may hold requests
// (mayHold), else the counters' flush period.
func (p *pluginContext) tickPeriodMilliseconds() uint32 {
	if p.mayHold {
		return heldTickPeriod
	}
	return tickPeriod
}

// wakeHeld wakes the held requests due at now (from the plugin's tick).
func (p *pluginContext) wakeHeld(now int64) {
	p.held.round++
	list := p.held.list
	kept := list[:0]
	for _, r := range list {
		if r.due > now || !r.h.held {
			if r.h.held {
				kept = append(kept, r)
			}
			continue
		}
		if result, next := p.wakeOne(&r, now); result == stillHeld {
			r.due = next
			kept = append(kept, r)
			continue
		}
		r.h.held = false
	}
	clear(list[len(kept):]) // drop the references to the streams that left
	p.held.list = kept
}

// wakeOne wakes one due request with its stream as the effective context. A request its waiter
// held again gets the new waiter in r.
func (p *pluginContext) wakeOne(r *heldRequest, now int64) (result wakeResult, next int64) {
	h := r.h
	if err := abi.SetEffectiveContext(h.id); err != nil {
		// The host no longer knows the stream (it ended without telling us): nothing to resume.
		p.failed("cannot resume a held request: " + err.Error())
		r.w.gone(h, now)
		return answered, 0
	}
	p.held.waking = h
	defer func() {
		p.held.waking, p.held.rehold = nil, heldRequest{}
		if recovered := recover(); recovered != nil {
			p.failed("recovered panic while waking a held request")
			if h.failOpenOrDeny() == types.ActionContinue {
				p.resume(h)
			}
			result = answered
		}
	}()
	result, next = r.w.wake(h, now)
	if again := p.held.rehold; again.h != nil {
		r.w = again.w
		return stillHeld, again.due
	}
	if result == goOn {
		p.resume(h)
	}
	return result, next
}

// resume lets the effective context's held request go on.
func (p *pluginContext) resume(h *httpContext) {
	if err := abi.ResumeHttpRequest(); err != nil {
		p.failed("cannot continue a held request: " + err.Error())
	}
}

// releaseHeld takes a stream that ends while held out of the held set, and tells its waiter
// (from OnHttpStreamDone, which calls it only for a held stream).
func (h *httpContext) releaseHeld() {
	p := h.plugin
	h.held = false
	list := p.held.list
	for i := range list {
		if list[i].h != h {
			continue
		}
		w := list[i].w
		copy(list[i:], list[i+1:])
		list[len(list)-1] = heldRequest{}
		p.held.list = list[:len(list)-1]
		now, err := abi.MonotonicNanos()
		if err != nil {
			now = 0 // a give-back at an old instant only refunds less
		}
		w.gone(h, now)
		return
	}
}
