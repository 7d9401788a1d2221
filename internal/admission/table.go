package admission

import (
	"errors"
	"math"
	"strconv"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// MaxAttempts bounds the read-decide-write loop. Each retry means another worker VM updated one
// of the request's keys in between, so the bound is only reached under extreme contention; then
// the configured failure mode applies.
const MaxAttempts = 16

// CasCreate is the CAS passed when writing a key that did not exist. Envoy stores a value for an
// absent key whatever the CAS argument, but CAS 0 would overwrite unconditionally if another
// worker created the key in between; any non-zero CAS makes that case a CasMismatch instead. The
// one collision left is a concurrently created key whose CAS is exactly this value.
const CasCreate = math.MaxUint32

// The key table. Envoy's shared data has no delete, so buckets live in a fixed table of MaxKeys
// slots per plugin, and the table's size bounds the shared memory whatever keys clients send.
// A (rule, limit, partition key) bucket is named by its owner hash and may live in any of a few
// candidate slots the owner selects (choices of them, in a fixed order). docs/design.md
// gives the argument in full; in short:
//
//   - A lookup reads the candidates in order and stops at the first live bucket of its owner:
//     a known key whose bucket sits in its first candidate costs one read, as with one slot.
//   - A first candidate never written (absent) means no bucket, claim or overflow draw of the
//     key exists, as each would have needed it taken: the new bucket is written there at once,
//     against the CAS of an absent key (placeNew), one read and one write.
//   - Otherwise a new bucket is first written as a pending claim (owner, claim time) into the first
//     candidate that is empty, holds something that is not a slot, a released claim, an idle
//     bucket of another key or an abandoned claim. Then the claim and every other candidate
//     are read again: if one holds a bucket of the owner, or a claim of it in an earlier
//     candidate, the claim is given up (a claim in a later candidate is released on the way);
//     otherwise it becomes the live bucket with a write against the claim's CAS. Of two
//     claims of one key, the one written later is checked after the earlier one was written,
//     so it sees it (pending, or live) and yields, or releases it, whose commit then fails:
//     two workers never both turn claims of one key into live buckets. Every worker that
//     finds a claim of its key checks and commits it the same way, so nobody waits for a
//     stalled claimer.
//   - A bucket of another key is taken over only when idle (a token bucket full again, a
//     window with nothing counted): its owner would find exactly that state, so reuse hands
//     nobody a token. Every value written carries a stamp, the latest now any writer of that
//     slot used; a new bucket starts at the latest stamp its lookup and check saw, so a
//     worker whose now is older than a takeover it observed cannot start the key's next
//     bucket before the old one was idle.
//   - A key none of whose candidates is free is the when_full policy's case; the default
//     charges one overflow bucket per rule and limit, kept under its own key, so a flood of
//     new keys throttles itself and never touches the buckets in use. The overflow bucket
//     marks its drawers since it was last idle in a 64-bit mask; a new bucket whose owner is
//     marked starts from the overflow bucket's state instead of a fresh one, so a key that
//     moves from the overflow bucket to a bucket of its own gets no more than its limit from
//     both together. An admission from the overflow bucket reads the key's candidates again
//     after its write, and the new bucket's check reads the overflow bucket after its claim:
//     of a draw and a bucket created at the same time, one always sees the other.
//
// Owners are SipHash-2-4 of the rule, the limit and the partition key, keyed with a secret the
// first VM draws and stores in shared data: clients cannot aim their keys at someone else's
// slots or bucket. Two keys share a bucket only if their 64-bit hashes are equal.

// Where a limit's bucket is, after its lookup.
const (
	placeLive     = iota // the key's bucket is in slot
	placeClaim           // a claim of the key's is in slot: check it and commit it
	placeFree            // slot is free: claim it, check and commit
	placeNew             // slot, the first candidate, was never written: create the bucket there
	placeOverflow        // no candidate is free: the overflow bucket
	placeSkip            // no candidate is free and when_full is allow: not counted
	placeFull            // no candidate is free and when_full is reject
)

// decide charges every limit of a group or none. It finds every limit's bucket and decides; if
// one rejects, nothing is written and the rejection with the longest wait is returned.
// Otherwise the new buckets are claimed and checked (a new bucket that rejects on its start state
// rejects the group), but for one in a first candidate never written, which is written at once
// (placeNew); each new state is written with the CAS it was read (or claimed) with; if another
// worker wrote one of them first, or a draw from the overflow bucket finds its key's bucket
// created meanwhile (drawRaced), the writes already made are undone, the claims given up, and the
// whole group is decided again. claims (a new bucket is to be claimed) and overflow (a draw from
// the overflow bucket) are false for a known key and for a bucket written at once: claim and
// drawRaced are not called.
func (g *Gate) decide(store Store, group []applied, now int64) (Verdict, *applied, error) {
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		var worst *applied
		claims, overflow := false, false
		for i := range group {
			a := &group[i]
			if err := g.read(store, a, now); err != nil {
				return Failed, nil, err
			}
			if !a.skip && !a.decision.Allowed && (worst == nil || a.decision.RetryAfter > worst.decision.RetryAfter) {
				worst = a
			}
			claims = claims || a.place == placeFree || a.place == placeClaim
			overflow = overflow || a.place == placeOverflow
		}
		if worst != nil {
			return Limited, worst, nil
		}
		ok, limited, err := true, (*applied)(nil), error(nil)
		if claims {
			ok, limited, err = g.claim(store, group, now)
		}
		if limited != nil {
			g.release(store, group, now)
			return Limited, limited, nil
		}
		if err == nil && ok {
			written := 0
			for ; written < len(group); written++ {
				a := &group[written]
				if a.skip || a.cost == 0 {
					continue // nothing to charge; the slot stays as it is
				}
				var idleAt int64
				switch tb, ok := a.limit.algo.(*tokenBucket); {
				case ok && tb.debt == 0:
					idleAt = tb.b.IdleAt(bucketState(a.next)) // a direct call
				case ok && a.limit.owes:
					idleAt = tb.idleOwing(a.next) // kept for a settlement to come (usage.go)
				default:
					idleAt = a.limit.algo.idleAt(a.next)
				}
				if a.limit.wall {
					idleAt = a.idleOnMonotonic(idleAt, now)
				}
				key := a.limit.overflowKey
				if a.place == placeOverflow {
					idleAt = int64(a.drawers)
				} else {
					key = g.slotKey(a.slot)
				}
				encodeSlot(g.buf[:], &slot{kind: kindLive, algorithm: a.limit.tag, fingerprint: a.limit.fingerprint,
					owner: a.writeOwner, idleAt: idleAt, cells: a.next, stamp: a.stamp})
				if err = store.Set(key, g.buf[:], a.cas); err != nil {
					break
				}
				a.held = false
			}
			if err == nil {
				raced, readErr := false, error(nil)
				if overflow {
					raced, readErr = g.drawRaced(store, group)
				}
				if readErr == nil && !raced {
					return Allow, nil, nil
				}
				if readErr != nil {
					g.refund(store, group, now)
					return Failed, nil, readErr
				}
			}
			g.refund(store, group[:written], now)
		}
		g.release(store, group, now)
		if err != nil && !isCasMismatch(err) {
			return Failed, nil, wrapError("cannot write to shared data", err)
		}
	}
	return Failed, nil, errContended
}

var errContended = errors.New("shared data stayed contended for " + strconv.Itoa(MaxAttempts) + " attempts")

// read finds a limit's bucket and decides the limit on it: its own live bucket in a candidate,
// or a fresh one for a claim or a free candidate, or, when none is free, what the when_full
// policy says. A first candidate never written means no bucket, claim or overflow draw of the
// key exists, as each needed it taken (docs/design.md, "A first candidate never written"): the
// bucket is written there at once, against the CAS of an absent key; of two workers that both
// saw it absent, the second write fails and that worker decides again.
func (g *Gate) read(store Store, a *applied, now int64) error {
	l := a.limit
	a.skip, a.held, a.writeOwner, a.stamp = false, false, a.owner, now
	if l.wall || l.wallPeer {
		at, err := g.wallNow()
		if err != nil {
			return err
		}
		a.at = at
	}
	// The first candidate is the owner mod the table's size (candidateSlots); the others are
	// only worked out when the first is not the key's bucket.
	var slots [maxChoices]uint64
	slots[0] = a.owner % uint64(g.table.MaxKeys)
	a.place = placeFull
	busyUntil := int64(math.MaxInt64)
	for i := 0; i < g.choices; i++ {
		if i == 1 {
			slots = candidateSlots(a.owner, g.table.MaxKeys, g.choices)
		}
		value, cas, err := store.Get(g.slotKey(slots[i]))
		free := false
		switch {
		case isNotFound(err) && i == 0: // never written: the bucket is created there (placeNew)
			a.place, a.slot, a.choice, a.cas = placeNew, slots[0], 0, CasCreate
			return g.decideOn(a, l.algo.initial(a.when(a.stamp)), a.when(a.stamp))
		case isNotFound(err):
			free, cas = true, CasCreate
		case err != nil:
			return wrapError("cannot read shared data", err)
		default:
			s, ok := decodeSlot(value)
			if !ok {
				// Not a slot value: replaced; reported unless it is a slot of the previous
				// layout (an upgrade), which a new bucket replaces like an empty slot.
				if !previousLayout(value) {
					g.out.Corrupt++
				}
				free = true
				break
			}
			a.stamp = max(a.stamp, s.stamp)
			switch {
			case s.owner == a.owner && s.kind == kindLive:
				a.place, a.slot, a.choice, a.cas = placeLive, slots[i], i, cas
				// resume and decideOn, written out for a token bucket that only rejects and
				// whose stored state is its own (a known key): one direct call to the bucket.
				if tb, ok := l.algo.(*tokenBucket); ok && !l.wall && l.maxWait == 0 && a.cost > 0 && s.algorithm == l.tag &&
					s.fingerprint == l.fingerprint && tb.b.Valid(bucketState(s.cells)) {
					var next limiter.BucketState
					next, a.decision = tb.b.Take(bucketState(s.cells), now, a.cost)
					a.next = bucketCells(next)
					return nil
				}
				return g.decideOn(a, l.resume(&s, a, now), a.when(now))
			case s.owner == a.owner && s.kind == kindPending:
				if a.place != placeClaim {
					// A claim of this key: it is checked and committed like one's own, unless
					// the key's bucket turns up in a later candidate.
					a.place, a.slot, a.choice, a.cas = placeClaim, slots[i], i, cas
				}
			case s.kind == kindReleased || s.idleAt <= now:
				free = true
			default:
				busyUntil = min(busyUntil, s.idleAt)
			}
		}
		if free && a.place == placeFull {
			a.place, a.slot, a.choice, a.cas = placeFree, slots[i], i, cas
		}
	}
	if a.place != placeFull {
		// A new bucket, as of the latest stamp seen; checked again after the claim.
		return g.decideOn(a, l.algo.initial(a.when(a.stamp)), a.when(a.stamp))
	}
	return g.whenFull(store, a, busyUntil, now)
}

// whenFull decides a limit none of whose candidate slots is free, as the when_full policy says:
// not counted (allow), on the overflow bucket (overflow), or rejected until the first of the
// candidates is idle, at busyUntil (reject).
func (g *Gate) whenFull(store Store, a *applied, busyUntil, now int64) error {
	g.out.TableFull++
	switch g.table.WhenFull {
	case config.WhenFullAllow:
		a.place, a.skip = placeSkip, true
		a.decision = limiter.Decision{Allowed: true}
		return nil
	case config.WhenFullOverflow:
		return g.readOverflow(store, a, now)
	default:
		a.next = a.limit.algo.initial(a.when(now))
		a.decision = limiter.Decision{RetryAfter: duration.Duration(max(busyUntil-now, 1))}
		return nil
	}
}

// readOverflow decides a limit on the bucket its rule and limit share among all keys that found
// no free candidate. The write marks the key among the bucket's drawers, which are forgotten
// when the bucket is idle again.
func (g *Gate) readOverflow(store Store, a *applied, now int64) error {
	l := a.limit
	a.place, a.slot, a.writeOwner, a.stamp = placeOverflow, overflowSlot, l.overflowOwner, now
	a.drawers = drawerMarks(a.owner)
	value, cas, err := store.Get(l.overflowKey)
	at := a.when(now)
	state := l.algo.initial(at)
	switch {
	case isNotFound(err):
		cas = CasCreate
	case err != nil:
		return wrapError("cannot read shared data", err)
	default:
		if s, ok := decodeSlot(value); !ok {
			g.out.Corrupt++
		} else if s.kind == kindLive && s.owner == l.overflowOwner {
			state, a.stamp = l.resume(&s, a, now), max(now, s.stamp)
			if l.algo.idleAt(state) > at {
				a.drawers |= uint64(s.idleAt)
			}
		}
	}
	a.cas = cas
	return g.decideOn(a, state, at)
}

// drawerMarks are the bits of the overflow bucket's drawers that stand for owner: two of 64,
// from the owner's top bits (its candidates come from the low bits and further mixes). A key
// none of whose draws is felt any more may find its bits set by others: it then starts its
// own bucket from the overflow bucket's state, which errs towards admitting less.
func drawerMarks(owner uint64) uint64 {
	return 1<<(owner>>58) | 1<<(owner>>52&63)
}

// drawRaced reads the candidates of every key the group charged to the overflow bucket again,
// after the write. If one holds a bucket or a claim of the key by now, that bucket may have
// started from the overflow bucket's state as it was before this draw (startState reads it
// after the claim): the caller undoes the group's writes and decides it again, on the key's own
// bucket. Either the new bucket's read of the overflow bucket comes after this draw and starts
// from it, or these reads come after the claim and see it.
func (g *Gate) drawRaced(store Store, group []applied) (bool, error) {
	for i := range group {
		a := &group[i]
		if a.place != placeOverflow || a.cost == 0 {
			continue
		}
		slots := candidateSlots(a.owner, g.table.MaxKeys, g.choices)
		for j := 0; j < g.choices; j++ {
			value, _, err := store.Get(g.slotKey(slots[j]))
			switch {
			case isNotFound(err):
				continue
			case err != nil:
				return false, wrapError("cannot read shared data", err)
			}
			if s, ok := decodeSlot(value); ok && s.owner == a.owner && (s.kind == kindLive || s.kind == kindPending) {
				return true, nil
			}
		}
	}
	return false, nil
}

// startState is the state a checked claim's new bucket starts from, as of the latest stamp
// seen: a fresh one, unless the key drew from the overflow bucket since that was last idle (its
// marks are among the drawers). Then it starts from the overflow bucket's state: whatever the
// key drew there is still missing from it, so its draws from both together stay within one
// limit. Only that read is added to a new bucket's path, and only under when_full overflow.
func (g *Gate) startState(store Store, a *applied) (cells, error) {
	l := a.limit
	if g.table.WhenFull != config.WhenFullOverflow {
		return l.algo.initial(a.when(a.stamp)), nil
	}
	value, _, err := store.Get(l.overflowKey)
	switch {
	case isNotFound(err):
		return l.algo.initial(a.when(a.stamp)), nil
	case err != nil:
		return cells{}, wrapError("cannot read shared data", err)
	}
	s, ok := decodeSlot(value)
	if !ok || s.kind != kindLive || s.owner != l.overflowOwner {
		return l.algo.initial(a.when(a.stamp)), nil
	}
	a.stamp = max(a.stamp, s.stamp)
	if marks := drawerMarks(a.owner); uint64(s.idleAt)&marks != marks {
		return l.algo.initial(a.when(a.stamp)), nil
	}
	return l.resume(&s, a, a.stamp), nil
}

// resume is the state of a limit's live bucket as stored: as it is, converted if a changed
// version of the limit wrote it (a new configuration), or fresh if the limit changed algorithm.
// monotonic is the key table's time for the decision; the limit decides at a.when(monotonic).
func (l *limit) resume(s *slot, a *applied, monotonic int64) cells {
	now := a.when(monotonic)
	if l.peers != nil && s.fingerprint != l.fingerprint {
		if carried, ok := l.switchTier(s, now, monotonic, a.at); ok {
			return carried // another tier of the rule wrote it: the key changed tier
		}
	}
	if s.algorithm == l.tag {
		if s.fingerprint == l.fingerprint && l.algo.valid(s.cells) {
			return s.cells
		}
		if converted, ok := l.algo.convert(s.cells, now); ok {
			return converted
		}
	}
	return l.algo.initial(now)
}

func (g *Gate) decideOn(a *applied, state cells, now int64) error {
	if a.cost == 0 {
		a.next, a.decision = state, peek(a.limit.algo, state, now)
		return nil
	}
	if a.limit.maxWait > 0 || a.limit.owes {
		return g.reserveOn(a, state, now)
	}
	if tb, ok := a.limit.algo.(*tokenBucket); ok {
		// A direct call: the interface's would go through tokenBucket.take, one call more.
		var next limiter.BucketState
		next, a.decision = tb.b.Take(bucketState(state), now, a.cost)
		a.next = bucketCells(next)
		return nil
	}
	a.next, a.decision = a.limit.algo.take(state, now, a.cost)
	return nil
}

// claim turns the group's new buckets into checked claims: it writes a claim into each free
// candidate, then checks each claim (its own or another worker's of the same key). ok is false
// when a claim was lost or another bucket or earlier claim of the key turned up; the caller
// releases the claims held and starts again. A checked claim's new bucket is decided again on
// its start state (startState) as of the latest stamp seen; limited is the claim whose new
// bucket rejects with the longest wait, if any: the caller releases the claims and rejects.
func (g *Gate) claim(store Store, group []applied, now int64) (ok bool, limited *applied, err error) {
	for i := range group {
		a := &group[i]
		if a.place != placeFree || a.cost == 0 {
			continue
		}
		encodeSlot(g.buf[:], &slot{kind: kindPending, algorithm: a.limit.tag, fingerprint: a.limit.fingerprint,
			owner: a.owner, idleAt: satAdd(a.stamp, claimTimeout), stamp: a.stamp})
		if err := store.Set(g.slotKey(a.slot), g.buf[:], a.cas); err != nil {
			return false, nil, err
		}
		a.place = placeClaim
	}
	for i := range group {
		a := &group[i]
		if a.place != placeClaim || a.cost == 0 {
			continue
		}
		ok, err := g.check(store, a, now)
		if err != nil || !ok {
			return false, nil, err
		}
		start, err := g.startState(store, a)
		if err != nil {
			return false, nil, err
		}
		_ = g.decideOn(a, start, a.when(a.stamp)) // a.cost > 0: a take, or a reservation (delay.go)
		if !a.decision.Allowed {
			if !a.limit.wall { // a calendar window's wait is counted from the wall clock's now
				// The wait was counted from the stamp: from now it is that much longer.
				a.decision.RetryAfter = duration.Duration(satAdd(int64(a.decision.RetryAfter), a.stamp-now))
			}
			if limited == nil || a.decision.RetryAfter > limited.decision.RetryAfter {
				limited = a
			}
		}
	}
	return limited == nil, limited, nil
}

// check reads a claim's slot, then every other candidate of its key. The claim stands if the
// slot still holds a claim of the key and no other candidate holds the key's bucket or an
// earlier claim of it; later claims of the key are released on the way. Reading the claim first
// makes every other read come after the claim was written, which is what the argument needs.
func (g *Gate) check(store Store, a *applied, now int64) (bool, error) {
	value, cas, err := store.Get(g.slotKey(a.slot))
	switch {
	case isNotFound(err):
		return false, nil
	case err != nil:
		return false, wrapError("cannot read shared data", err)
	}
	s, ok := decodeSlot(value)
	if !ok || s.kind != kindPending || s.owner != a.owner {
		return false, nil // lost: released, taken over when abandoned, or committed by another worker
	}
	a.cas, a.held, a.stamp = cas, true, max(a.stamp, s.stamp)
	slots := candidateSlots(a.owner, g.table.MaxKeys, g.choices)
	for i := 0; i < g.choices; i++ {
		if i == a.choice {
			continue
		}
		value, cas, err := store.Get(g.slotKey(slots[i]))
		switch {
		case isNotFound(err):
			continue
		case err != nil:
			return false, wrapError("cannot read shared data", err)
		}
		s, ok := decodeSlot(value)
		if !ok {
			continue
		}
		a.stamp = max(a.stamp, s.stamp)
		if s.owner != a.owner || s.kind == kindReleased {
			continue
		}
		if s.kind == kindLive || i < a.choice {
			return false, nil // the key's bucket, or an earlier claim: the next attempt finds it
		}
		// A later claim of the same key: it can only yield to this one, so release it now.
		if err := g.releaseSlot(store, slots[i], cas, max(now, s.stamp)); err != nil {
			return false, err
		}
	}
	return true, nil
}

// release gives up the claims a failed attempt holds. It is best effort: a claim left behind is
// committed by the key's next request, released by its check, or abandoned after claimTimeout.
func (g *Gate) release(store Store, group []applied, now int64) {
	for i := range group {
		a := &group[i]
		if a.held {
			_ = g.releaseSlot(store, a.slot, a.cas, max(now, a.stamp))
			a.held = false
		}
	}
}

func (g *Gate) releaseSlot(store Store, index uint64, cas uint32, stamp int64) error {
	encodeSlot(g.buf[:], &slot{kind: kindReleased, idleAt: math.MinInt64, stamp: stamp})
	return store.Set(g.slotKey(index), g.buf[:], cas)
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// peek is the decision for a request that costs nothing: always admitted, and what is left is
// what a one-unit request would find.
func peek(algo algorithm, state cells, now int64) limiter.Decision {
	_, d := algo.take(state, now, 1)
	if d.Allowed {
		d.Remaining++
	}
	d.Allowed, d.RetryAfter = true, 0
	return d
}

// refund gives back what a group's first limits were charged before a later write failed, or
// what an admitted request was charged (GiveBack): no more than the buckets still lack (see
// algorithm.undo). It is best effort: if it fails, the charge stands, which errs towards
// admitting less, never more. The idle time stays: a refund only makes the bucket idle sooner.
func (g *Gate) refund(store Store, charged []applied, now int64) {
	g.recharge(store, charged, now, false)
}

// chargeMore takes each a.cost more from the buckets of charged, past the limit (owe, usage.go):
// the slot stays the key's until the debt is repaid. Best effort, as refund.
func (g *Gate) chargeMore(store Store, charged []applied, now int64) {
	g.recharge(store, charged, now, true)
}

// recharge rewrites the bucket of each charged limit at the limit's time for now, retrying on a
// CAS mismatch: more (chargeMore) takes a.cost more, otherwise (refund) it gives a.cost back. A
// slot that holds another bucket by now is left alone.
func (g *Gate) recharge(store Store, charged []applied, now int64, more bool) {
	for i := range charged {
		a := &charged[i]
		if a.skip || a.cost == 0 {
			continue
		}
		for attempt := 0; attempt < MaxAttempts; attempt++ {
			key := g.keyOf(a.limit, a.slot)
			value, cas, err := store.Get(key)
			if err != nil {
				break
			}
			s, ok := decodeSlot(value)
			if !ok || s.kind != kindLive || s.owner != a.writeOwner || s.fingerprint != a.limit.fingerprint || !a.limit.algo.valid(s.cells) {
				break
			}
			at, err := g.timeFor(a.limit, now)
			if err != nil {
				break
			}
			if !more {
				s.cells = a.limit.algo.undo(s.cells, a.next, at, a.cost)
			} else {
				s.cells = owe(a.limit, s.cells, at, a.cost)
				if a.slot != overflowSlot { // the overflow bucket's idleAt holds its drawers
					a.at = at
					s.idleAt = max(s.idleAt, a.idleOnMonotonic(a.limit.algo.idleAt(s.cells), now))
				}
			}
			s.stamp = max(s.stamp, now)
			encodeSlot(g.buf[:], &s)
			if err := store.Set(g.keyOf(a.limit, a.slot), g.buf[:], cas); err == nil || !isCasMismatch(err) {
				break
			}
		}
	}
}

// The Store returns the errors themselves (the filter's does); errors.Is, a call, only for a
// wrapped one.
func isNotFound(err error) bool {
	return err == ErrNotFound || err != nil && errors.Is(err, ErrNotFound)
}
func isCasMismatch(err error) bool {
	return err == ErrCasMismatch || err != nil && errors.Is(err, ErrCasMismatch)
}
