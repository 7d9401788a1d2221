package admission

import (
	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// Delay. A rule with on_limit delay reserves a request's tokens when it is decided, even when
// they are not there yet: its buckets may go below zero, by at most the refill over max_delay
// (limiter.Bucket.Reserve), and the request is admitted with Outcome.Delay, the time until its
// tokens are due, for the filter to hold it that long. Because the reservation is written with
// the same read-decide-write loop as any take (all or nothing over the request's limits, CAS
// against every other worker), requests let go at their due instants never exceed
// capacity + rate × T over any interval T, whichever worker holds them. A request whose tokens
// would be due later than max_delay is Limited at once, with Retry-After the time until they
// would be there without waiting. A held request whose client goes away gives its reservation
// back like any charge (Outcome.Charge, Gate.GiveBack).
//
// Only token buckets delay (config refuses windows with on_limit delay); shadow rules never
// hold: their limits are decided as rejecting ones. In a request matched by several rules, the
// limits of a rule that rejects must admit at once, those of delaying rules within their own
// max_delay, and the request waits for the latest of them.

// delay makes the rule's limits (its tiers' too) reserve up to maxWait ahead.
func (r *rule) delay(maxWait duration.Duration) {
	set := func(limits []limit) {
		for i := range limits {
			limits[i].algo, limits[i].maxWait = withDelay(limits[i].algo, maxWait), maxWait
		}
	}
	set(r.limits)
	if r.tiers != nil {
		for _, limits := range r.tiers.limits {
			set(limits)
		}
	}
}

// withDelay makes a token bucket reserve up to maxDelay ahead.
func withDelay(a algorithm, maxDelay duration.Duration) algorithm {
	if t, ok := a.(*tokenBucket); ok {
		t.maxWait, t.debt = maxDelay, t.b.DebtTokens(maxDelay)
	}
	return a
}

// ruleDelay is how long a rule's requests may be held: 0 for a rule that rejects, a shadow
// rule, or one whose limits cannot reserve.
func ruleDelay(cfg *config.Config, r *config.Rule) duration.Duration {
	if !r.Delays(cfg) {
		return 0
	}
	return r.OnLimit.MaxDelay
}

// reserveOn decides a delaying limit on state: its tokens are taken if they are there or due
// within the rule's max_delay, and a.due is when they are.
func (g *Gate) reserveOn(a *applied, state cells, now int64) error {
	t, ok := a.limit.algo.(*tokenBucket)
	if !ok {
		a.next, a.decision = a.limit.algo.take(state, now, a.cost)
		a.due = now
		return nil
	}
	s, r := t.b.Reserve(bucketState(state), now, a.cost, g.reservable(t.maxWait, now))
	a.next = bucketCells(s)
	a.decision.Allowed, a.decision.RetryAfter, a.decision.Remaining, a.decision.Reset = r.OK, r.RetryAfter, r.Remaining, r.Reset
	a.due = satAdd(now, int64(r.Wait))
	return nil
}

// requestDelay sets how long an admitted request must be held: until the latest instant its
// reserved tokens are due.
func requestDelay(out *Outcome, enforced []applied, now int64) {
	for i := range enforced {
		a := &enforced[i]
		if a.limit.maxWait > 0 && !a.skip && a.cost > 0 && a.due-now > int64(out.Delay) {
			out.Delay, out.DelayRule, out.DelayOwner = duration.Duration(a.due-now), a.rule.index, a.owner
		}
	}
}

// undoReservation gives back what a delaying bucket's write took, only if nothing was written
// to the bucket since: every later request's tokens are due at instants computed from the level
// this write left, and tokens given back under them would make a new request due together with
// one of them, over capacity + rate × T. So a request held behind another keeps the tokens of a
// request before it that went away spent (erring towards admitting less), and the latest one
// gives back all it took, as if it had never come.
func (t *tokenBucket) undoReservation(c, written cells, now, n int64) cells {
	if c != written {
		return c
	}
	return bucketCells(t.b.Unreserve(bucketState(c), now, n))
}
