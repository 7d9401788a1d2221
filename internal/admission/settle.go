package admission

import (
	"github.com/tollgate-proxy/tollgate/config"
)

// Rules that settle at the response (count and refund) are charged when the request is admitted,
// exactly as any rule, and the charge is kept with the stream (Pending) until the response
// headers say the status. Then a count rule gives the charge back unless the status is one it
// counts, and a refund rule gives it back if the status is one it refunds. Charging first keeps
// the decision before the upstream exact: a request in flight holds its tokens, so however many
// requests run at once, no more are admitted than the limits allow, and the price is that a
// request in flight holds its tokens until its response even if it will not be counted.
//
// A give-back is the one a global rejection uses (undo): all of a rule's limits or none; a token
// bucket gets the cost back, or only the room between its capacity and the level the request
// left plus the refill since, whichever is less (so never a refill the full bucket would have
// lost, which errs towards admitting less when other requests drew meanwhile); a window only
// while the window charged lasts.

// settlement is what a rule does with its charge at the response.
type settlement struct {
	statuses statusBits
	// refund: give back when the status is in the set (refund); otherwise give back when it is
	// not (count).
	refund bool
	// usage: the charge is settled to the amount the response reports (SettleUsage), not by
	// the status.
	usage bool
}

// statusBits holds one bit per status 0..639.
type statusBits [10]uint64

func compileSettlement(r *config.Rule) *settlement {
	if r.Usage != nil {
		return &settlement{usage: true}
	}
	s, refund := r.Count, false
	if s == nil {
		s, refund = r.Refund, true
	}
	if s == nil {
		return nil
	}
	out := &settlement{refund: refund}
	for status := 100; status <= 599; status++ {
		if s.Match(status) {
			out.statuses[status>>6] |= 1 << (status & 63)
		}
	}
	return out
}

// givesBack reports whether a response with status returns the charge; status 0 stands for a
// request that never reached the upstream, which matches no status.
func (s *settlement) givesBack(status int) bool {
	in := status > 0 && status < 640 && s.statuses[status>>6]&(1<<(status&63)) != 0
	return in == s.refund
}

// SettlesAtResponse reports whether some rule has count or refund: then an admitted request's
// charge by those rules is kept (Outcome.Hold) and settled at the response (Gate.Settle).
func (p *Policy) SettlesAtResponse() bool { return p.settles }

// Pending is what an admitted request was charged by the rules that settle at the response, kept
// with the stream until then. Its zero value holds nothing; it is reused from one request to the
// next, so keeping a charge allocates only until its buffer has grown.
type Pending struct {
	entries []pendingCharge
	at      int64 // when the charge was taken
}

type pendingCharge struct {
	charged
	rule   *rule
	shadow bool // a shadow rule's: not part of the request's Charge
}

// Empty reports whether nothing is held.
func (p *Pending) Empty() bool { return len(p.entries) == 0 }

// Clear forgets what is held, without giving it back.
func (p *Pending) Clear() {
	clear(p.entries)
	p.entries = p.entries[:0]
}

// DropEnforced forgets what the enforced rules were charged and keeps the shadow rules' part:
// for a request whose Charge (the enforced part) was given back whole, which the shadow rules'
// charge is not part of.
func (p *Pending) DropEnforced() {
	kept := p.entries[:0]
	for _, e := range p.entries {
		if e.shadow {
			kept = append(kept, e)
		}
	}
	clear(p.entries[len(kept):])
	p.entries = kept
}

// Hold replaces what dst holds with what an admitted request (Allow) was charged by the rules
// that settle at the response, enforced and shadow rules alike.
func (o *Outcome) Hold(dst *Pending) {
	dst.Clear()
	if o.Verdict != Allow {
		return
	}
	dst.at = o.decidedAt
	dst.entries = appendPending(dst.entries, o.enforced, false)
	for _, group := range o.shadowCharged {
		dst.entries = appendPending(dst.entries, group, true)
	}
}

func appendPending(dst []pendingCharge, group []applied, shadow bool) []pendingCharge {
	for i := range group {
		a := &group[i]
		if a.rule.settle == nil || a.skip || a.cost == 0 || a.limit.isConcurrency() {
			continue
		}
		dst = append(dst, pendingCharge{rule: a.rule, shadow: shadow, charged: a.charge()})
	}
	return dst
}

// Settle ends what p holds, for a response with status at now (monotonic nanoseconds): every
// rule whose settlement says so gets its charge back, and the others keep it. status 0 means the
// request never reached the upstream (it was given back or rejected while held): a count rule
// then gives its charge back (nothing it counts happened), as a rule with usage does (nothing
// was used), and a refund rule keeps it. A request that was forwarded and got no response is not
// settled at all: its charge stands (Clear). It returns the indexes of the count and refund rules
// that gave their charge back, in a buffer of the Gate's valid until the next call, and leaves in
// p only the charges of rules with usage, for a response (status not 0) to SettleUsage.
func (g *Gate) Settle(store Store, p *Pending, status int, now int64) []int {
	g.wallRead = false // a calendar window's refund reads the wall clock of now, once
	given := g.settledRules[:0]
	group := g.settleBuf[:0]
	kept := p.entries[:0]
	for i := range p.entries {
		e := &p.entries[i]
		switch {
		case e.rule.settle.usage && status != 0:
			kept = append(kept, *e) // settled when the response's usage is known (SettleUsage)
			continue
		case e.rule.settle.usage:
			// Never reached the upstream: nothing was used. Not a refund the rule counts.
		case !e.rule.settle.givesBack(status):
			continue
		default:
			if n := len(given); n == 0 || given[n-1] != e.rule.index {
				given = append(given, e.rule.index)
			}
		}
		if g.chargedWindowOver(e, p.at, now) {
			continue // counted in a window that is over: nothing of it is felt any more
		}
		group = append(group, e.undo())
	}
	if len(group) > 0 {
		g.refund(store, group, now)
	}
	clear(group)
	g.settleBuf, g.settledRules = group[:0], given
	clear(p.entries[len(kept):])
	p.entries = kept
	return given
}

// chargedWindowOver reports whether a window limit's charge, taken at at, was counted in a
// window that is over by now; a token bucket's never is. A window of the monotonic clock is
// found from at, a calendar window from the state the charge wrote (its window's start), against
// the wall clock of now: a refund must never be taken off what a later window counted.
func (g *Gate) chargedWindowOver(e *pendingCharge, at, now int64) bool {
	switch w := e.limit.algo.(type) {
	case window:
		length := int64(w.limit.Window)
		return floorDiv(at, length) != floorDiv(now, length)
	case calendarWindow:
		wall, err := g.wallNow()
		if err != nil {
			return true // the charge stands: that errs towards admitting less
		}
		start, _ := w.algo.Bounds(wall)
		return start != e.next[0]
	}
	return false
}
