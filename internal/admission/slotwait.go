package admission

import "github.com/tollgate-proxy/tollgate/internal/duration"

// A request that waited for a free slot of a concurrency limit (the filter holds it and decides
// it again until a slot frees) must not then wait a whole max_delay more for its tokens: its
// whole hold is bounded by max_delay from its first decision. AdmitBy decides it with its
// delaying limits reserving only tokens due by that instant; tokens due later reject it, with
// the Retry-After of any such rejection (the time until they would be there without waiting).

// AdmitBy is Admit for a request that may be held only until dueBy (monotonic nanoseconds): a
// delaying limit reserves tokens only if they are due by then, however far its rule's
// max_delay reaches from now.
func (g *Gate) AdmitBy(req Request, store Store, now, dueBy int64) *Outcome {
	g.reserveBy, g.bounded = dueBy, true
	defer func() { g.reserveBy, g.bounded = 0, false }()
	return g.Admit(req, store, now)
}

// reservable is how far ahead of now a delaying limit whose rule allows maxWait may reserve.
func (g *Gate) reservable(maxWait duration.Duration, now int64) duration.Duration {
	if g.bounded {
		return min(maxWait, duration.Duration(max(g.reserveBy-now, 0)))
	}
	return maxWait
}
