package admission

import "slices"

// Usage. A rule with usage is charged its reserve when a request is admitted, as any rule is
// charged its cost, and the charge is kept with the stream (Pending) until the response has told
// what the request used. SettleUsage then settles each charge to that amount: what was reserved
// beyond it is given back as a refund is (no more than the limit still lacks), and what it used
// beyond the reserve is taken whatever the level (owe). A token bucket goes into debt for it,
// down to minus its capacity, and admits nothing until the refill has repaid the debt (its
// Retry-After counts the debt: limiter.Bucket.Reserve decides on a level in debt); a window
// counts it up to its capacity, and is full until it ends.
//
// The bound: over any interval T, a token bucket admits at most capacity + rate × T units of
// reserves; settled usage beyond the reserves is repaid before the bucket admits again, so what
// the requests admitted in T used exceeds capacity + rate × T by at most the usage beyond their
// reserves of those still in flight at the end of T, plus the debt still owed then (and what a
// debt past minus the capacity had forgiven). Both are zero when every request reserves what it
// can use. TestUsageBoundHolds checks it against a model.

// owe takes n more units from a limit's state at now, past its limit: a token bucket into debt,
// down to minus its capacity; a window up to its capacity.
func owe(l *limit, c cells, now, n int64) cells {
	if tb, ok := l.algo.(*tokenBucket); ok {
		return bucketCells(tb.b.Owe(bucketState(c), now, n, tb.debt))
	}
	room := peek(l.algo, c, now).Remaining
	if room < 1 {
		return c // full: the rest is not counted
	}
	next, _ := l.algo.take(c, now, min(n, room))
	return next
}

// idleOwing is when a usage rule's bucket, just charged a reserve, may be given to another key:
// not before it could have repaid the most a settlement may owe (its capacity) on top of the
// state written. A response that ends within a refill of the capacity beyond the bucket's
// being full again is so always settled in the key's own bucket; one that ends later may find
// the slot given to another key, and then its usage beyond the reserve is not counted.
func (t *tokenBucket) idleOwing(c cells) int64 {
	s := bucketState(c)
	s.Tokens = max(s.Tokens-t.debt, -2*t.debt)
	return t.b.IdleAtOwing(s)
}

// owe makes the rule's token buckets (its tiers' too) owe what a response used beyond a reserve,
// down to minus their capacity.
func (r *rule) owe() {
	set := func(limits []limit) {
		for i := range limits {
			if t, ok := limits[i].algo.(*tokenBucket); ok {
				t.debt, limits[i].owes = t.capacity, true
			}
		}
	}
	set(r.limits)
	if r.tiers != nil {
		for _, limits := range r.tiers.limits {
			set(limits)
		}
	}
}

// SettleUsage settles what p holds for the rules with usage to the amounts their responses
// reported, by rule index (amounts[i] for rule i, at least 0), at now (monotonic nanoseconds),
// and leaves p empty.
func (g *Gate) SettleUsage(store Store, p *Pending, amounts []int64, now int64) {
	g.wallRead = false
	give, take := g.settleBuf[:0], g.oweBuf[:0]
	for i := range p.entries {
		e := &p.entries[i]
		if !e.rule.settle.usage || e.rule.index >= len(amounts) {
			continue
		}
		amount := max(amounts[e.rule.index], 0)
		switch a := e.undo(); {
		case amount < a.cost:
			if g.chargedWindowOver(e, p.at, now) {
				continue // counted in a window that is over: nothing of it is felt any more
			}
			a.cost -= amount
			give = append(give, a)
		case amount > a.cost:
			a.cost = amount - a.cost
			take = append(take, a)
		}
	}
	if len(give) > 0 {
		g.refund(store, give, now)
	}
	if len(take) > 0 {
		g.chargeMore(store, take, now)
	}
	clear(give)
	clear(take)
	g.settleBuf, g.oweBuf = give[:0], take[:0]
	p.Clear()
}

// AppendUsageRules appends to dst the indexes of the rules with usage whose charge p holds, each
// once.
func (p *Pending) AppendUsageRules(dst []int) []int {
	for i := range p.entries {
		e := &p.entries[i]
		if e.rule.settle.usage && !slices.Contains(dst, e.rule.index) {
			dst = append(dst, e.rule.index)
		}
	}
	return dst
}
