package admission

import (
	"encoding/binary"
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
// The slots are kept in rows of rowSlots, each row one shared-data value. A (rule, limit,
// partition key) bucket is named by its owner hash, which selects a row; the bucket may live in
// any slot of that row. docs/design.md gives the argument in full; in short:
//
//   - A lookup reads the owner's row, one read, and finds its live bucket there, or none.
//   - Every write of a row is a compare-and-swap against the value read, so a request that
//     finds no bucket of its key and writes one into a free slot does so only if the row is
//     still as it read it: of two workers creating one key's bucket at once, the second write
//     fails and that worker decides again, on the first one's bucket. Two live buckets of one
//     key cannot exist.
//   - A row never written (absent) is created with the bucket, against the CAS of an absent key.
//   - A slot is free when it holds nothing or an idle bucket of another key (a token bucket
//     full again, a window with nothing counted): its owner would find exactly that state, so
//     reuse hands nobody a token. Every slot written carries a stamp, the latest now any writer
//     of that slot used; a new bucket starts at the latest stamp in its row, so a worker whose
//     now is older than a takeover it observed cannot start the key's next bucket before the
//     old one was idle.
//   - A key whose row is full is the when_full policy's case; the default charges one overflow
//     bucket per rule and limit, kept under its own key, so a flood of new keys throttles itself
//     and never touches the buckets in use. The overflow bucket marks its drawers since it was
//     last idle in a 64-bit mask; a new bucket whose owner is marked starts from the overflow
//     bucket's state instead of a fresh one, so a key that moves from the overflow bucket to a
//     bucket of its own gets no more than its limit from both together. A draw writes the key's
//     row after writing the overflow bucket (as it read it, or with what other limits of the
//     request staged in it), with the key's marks added to the row's drawers, against the CAS
//     of a read of the row that found no bucket of the key; a new bucket whose row carries its
//     key's marks reads the overflow bucket after its row and before writing the row: of a draw
//     and a bucket created at the same time, one always sees the other.
//
// Owners are SipHash-2-4 of the rule, the limit and the partition key, keyed with a secret the
// first VM draws and stores in shared data: clients cannot aim their keys at someone else's
// row or bucket. Two keys share a bucket only if their 64-bit hashes are equal.

// Where a limit's bucket is, after its lookup.
const (
	placeLive     = iota // the key's bucket is in slot
	placeFree            // slot is free: the new bucket goes there
	placeOverflow        // the row is full: the overflow bucket
	placeNone            // the row is full and when_full is allow (not counted) or reject
)

// rowCopy is a row as a decision read it, with the slots it has staged for writing.
type rowCopy struct {
	index  uint64
	cas    uint32 // CasCreate when the row was absent
	absent bool   // never written: a CAS read can be CasCreate too, so this is not cas's to tell
	staged uint16 // the slots this decision writes: its admitted limits' buckets
	// drawn: a limit of the decision draws from an overflow bucket, so the row is written after
	// that bucket, with the key's marks added to its drawers (or there already).
	drawn bool
	value []byte                                // as the Store returned it, or own
	own   [maxRowSlots*SlotSize + markSize]byte // for a row grown or marked by this decision
}

// decide charges every limit of a group or none. It finds every limit's bucket and decides; if
// one rejects, nothing is written and the rejection with the longest wait is returned.
// Otherwise the new states are written: first the overflow buckets drawn from, then every row
// changed or drawn beside, once each, with the CAS it was read with. A draw's row is written
// after the draw, with the key's marks (its slots unchanged), so that a bucket the key got in
// its row meanwhile either fails that write or read the overflow bucket after the draw
// (docs/design.md, "Moving between the overflow bucket and a bucket of its own"). If another
// worker wrote one of them first, the writes already made are undone and the whole group is
// decided again.
func (g *Gate) decide(store Store, group []applied, now int64) (Verdict, *applied, error) {
	return g.decideFrom(store, group, now, 0)
}

// decideFrom is decide from its attempt first on (decideFast made the first).
func (g *Gate) decideFrom(store Store, group []applied, now int64, first int) (Verdict, *applied, error) {
	for attempt := first; attempt < MaxAttempts; attempt++ {
		g.rows = g.rows[:0]
		var worst *applied
		for i := range group {
			a := &group[i]
			if err := g.read(store, group, a, now); err != nil {
				return Failed, nil, err
			}
			if !a.skip && !a.decision.Allowed && (worst == nil || a.decision.RetryAfter > worst.decision.RetryAfter) {
				worst = a
			}
		}
		if worst != nil {
			return Limited, worst, nil
		}
		// The overflow buckets drawn from are written, and every other new state goes into its slot
		// of its row's copy; then the rows are written, in order, up to the first that fails.
		var err error
		for i := range group {
			a := &group[i]
			switch {
			case a.cost == 0:
			case a.place == placeOverflow:
				if err == nil {
					encodeSlot(g.buf[:SlotSize], &slot{kind: kindLive, algorithm: a.limit.tag, fingerprint: a.limit.fingerprint,
						owner: a.writeOwner, idleAt: int64(a.drawers), cells: a.next, stamp: a.stamp})
					if err = store.Set(a.limit.overflowKey, g.buf[:SlotSize], a.cas); err == nil {
						a.drew = true
					}
				}
			case a.place == placeLive || a.place == placeFree:
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
				r := &g.rows[a.row]
				at := int(a.slot-r.index*uint64(g.rowSlots)) * SlotSize
				encodeSlot(r.value[at:at+SlotSize], &slot{kind: kindLive, algorithm: a.limit.tag,
					fingerprint: a.limit.fingerprint, owner: a.owner, idleAt: idleAt, cells: a.next, stamp: a.stamp})
			}
		}
		rowsWritten := 0
		for err == nil && rowsWritten < len(g.rows) {
			if r := &g.rows[rowsWritten]; r.staged != 0 || r.drawn {
				if err = store.Set(g.rowKey(r.index), r.value, r.cas); err != nil && r.staged == 0 && isCasMismatch(err) {
					err = g.retouch(store, group, rowsWritten)
				}
				if err != nil {
					break
				}
			}
			rowsWritten++
		}
		if err == nil {
			return Allow, nil, nil
		}
		for i := range group {
			a := &group[i]
			if a.drew || a.row < rowsWritten && a.cost > 0 && (a.place == placeLive || a.place == placeFree) {
				g.refund(store, group[i:i+1], now)
			}
		}
		if !isCasMismatch(err) {
			return Failed, nil, wrapError("cannot write to shared data", err)
		}
	}
	return Failed, nil, errContended
}

var errContended = errors.New("shared data stayed contended for " + strconv.Itoa(MaxAttempts) + " attempts")

// read finds a limit's bucket in its owner's row and decides the limit on it: its own live
// bucket, or a fresh one in a free slot, or, when the row is full, what the when_full policy
// says. A slot that holds the bucket of another limit of the group is never free for it, idle or
// not: that limit decides on it, whether it comes before or after in the group.
func (g *Gate) read(store Store, group []applied, a *applied, now int64) error {
	l := a.limit
	a.skip, a.drew, a.writeOwner, a.stamp = false, false, a.owner, now
	if l.wall || l.wallPeer {
		at, err := g.wallNow()
		if err != nil {
			return err
		}
		a.at = at
	}
	// The owner's row: the copy another limit of the request read, or read now. The limits of one
	// request whose owners share a row decide on one copy, and the row is written once.
	index := g.rowOf(a.owner)
	a.row = 0
	for a.row < len(g.rows) && g.rows[a.row].index != index {
		a.row++
	}
	if a.row == len(g.rows) {
		var value []byte
		var cas uint32
		var err error
		if p := &g.preread; p.ok && p.index == index {
			value, cas, err = p.value, p.cas, p.err
			p.ok = false
		} else {
			value, cas, err = store.Get(g.rowKey(index))
		}
		absent := isNotFound(err)
		switch {
		case absent:
			cas = CasCreate
		case err != nil:
			return wrapError("cannot read shared data", err)
		}
		if a.row < cap(g.rows) {
			g.rows = g.rows[:a.row+1]
		} else {
			g.rows = append(g.rows, rowCopy{})
		}
		r := &g.rows[a.row]
		r.index, r.cas, r.absent, r.staged, r.drawn = index, cas, absent, 0, false
		if err == nil && g.isRow(value) {
			r.value = value
		} else {
			if err == nil {
				g.out.Corrupt++ // not a row: replaced, as if empty
			}
			r.value = r.own[:0]
		}
	}
	r := &g.rows[a.row]
	first := index * uint64(g.rowSlots)
	// The owner's bucket first: an owner is 8 bytes at a fixed place in each slot.
	slots := len(r.value) / SlotSize
	for i := 0; i < slots; i++ {
		v := r.value[i*SlotSize : (i+1)*SlotSize]
		if binary.LittleEndian.Uint64(v[8:]) != a.owner {
			continue
		}
		s, ok := decodeSlot(v)
		if !ok {
			continue
		}
		a.place, a.slot, a.stamp = placeLive, first+uint64(i), max(now, s.stamp)
		if a.cost > 0 {
			r.staged |= 1 << i
		}
		// resume and decideOn, written out for a token bucket that only rejects and whose
		// stored state is its own (a known key): one direct call to the bucket.
		if tb, ok := l.algo.(*tokenBucket); ok && !l.wall && l.maxWait == 0 && a.cost > 0 && s.algorithm == l.tag &&
			s.fingerprint == l.fingerprint && tb.b.Valid(bucketState(s.cells)) {
			var next limiter.BucketState
			next, a.decision = tb.b.Take(bucketState(s.cells), now, a.cost)
			a.next = bucketCells(next)
			return nil
		}
		return g.decideOn(a, l.resume(&s, a, now), a.when(now))
	}
	// A new bucket: the first free slot, as of the latest stamp in the row; past the row's end, if
	// none is free before it, the slot after its last.
	free, busyUntil := -1, int64(math.MaxInt64)
	for i := 0; i < slots; i++ {
		v := r.value[i*SlotSize : (i+1)*SlotSize]
		s, ok := decodeSlot(v)
		if ok {
			a.stamp = max(a.stamp, s.stamp)
		} else if [SlotSize]byte(v) != emptySlot {
			g.out.Corrupt++ // not a slot: replaced, as if empty
		}
		switch {
		case r.staged&(1<<i) != 0: // another limit of this request
		case ok && s.idleAt > now:
			busyUntil = min(busyUntil, s.idleAt)
		case free < 0 && (!ok || !heldBy(group, s.owner)): // not an idle bucket of another limit of the request
			free = i
		}
	}
	if free < 0 && slots < g.rowSlots {
		free = slots
	}
	if free < 0 {
		if err := g.whenFull(store, a, busyUntil, now); err != nil || a.place != placeOverflow || a.cost == 0 {
			return err
		}
		r.drawn = true
		r.mark(drawerMarks(a.owner))
		return nil
	}
	a.place, a.slot = placeFree, first+uint64(free)
	r.take(free, a.cost)
	start := l.algo.initial(a.when(a.stamp))
	// A key drew only from a full row, which then carries its marks: an absent row was never
	// full, and a row without the key's marks saw no draw of it (the argument is the draw's, in
	// docs/design.md).
	if marks := drawerMarks(a.owner); !r.absent && rowDrawers(r.value)&marks == marks {
		var err error
		if start, err = g.startState(store, a); err != nil {
			return err
		}
	}
	_ = g.decideOn(a, start, a.when(a.stamp)) // a.cost > 0: a take, or a reservation (delay.go)
	if !a.decision.Allowed && !a.limit.wall { // a calendar window's wait is counted from the wall clock
		// The wait was counted from the stamp: from now it is that much longer.
		a.decision.RetryAfter = duration.Duration(satAdd(int64(a.decision.RetryAfter), a.stamp-now))
	}
	return nil
}

var emptySlot [SlotSize]byte

// heldBy reports whether owner is the owner of a limit of group.
func heldBy(group []applied, owner uint64) bool {
	for i := range group {
		if group[i].owner == owner {
			return true
		}
	}
	return false
}

// mark adds a drawer's marks to the drawers after the row's slots, in the copy's own buffer.
// Only a full row is marked (a key draws only when its row is full, and retouch checks that it
// still is), and a full row does not grow, so the drawers stay last.
func (r *rowCopy) mark(marks uint64) {
	drawers := rowDrawers(r.value)
	if drawers&marks == marks {
		return
	}
	n := len(r.value) - len(r.value)%SlotSize
	copy(r.own[:n], r.value[:n])
	r.value = binary.LittleEndian.AppendUint64(r.own[:n], drawers|marks)
}

// take stages slot i for a limit's new bucket, if a request of cost writes it (one that costs
// nothing leaves the row as it is). The slot after the row's end lengthens the copy, in its own
// buffer, empty until it is written (another limit of the request reads it meanwhile). A row
// with drawers is full: it has no slot after its end.
func (r *rowCopy) take(i int, cost int64) {
	if cost == 0 {
		return
	}
	r.staged |= 1 << i
	if end := (i + 1) * SlotSize; end > len(r.value) {
		if n := len(r.value); n > 0 {
			copy(r.own[:n], r.value)
		}
		*(*[SlotSize]byte)(r.own[i*SlotSize : end]) = emptySlot
		r.value = r.own[:end]
	}
}

// retouch writes a row that only draws from the overflow bucket need written, which another
// worker changed since their lookup: it reads the row again and writes it back as it is, with
// the drawers' marks, unless it now holds a bucket of a key that drew (then the draw is a lost
// race, to decide again on that bucket). The argument needs only the row unchanged from some read
// after the draw until this write, so writing what a later read found will do.
func (g *Gate) retouch(store Store, group []applied, ri int) error {
	r := &g.rows[ri]
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		value, cas, err := store.Get(g.rowKey(r.index))
		if err != nil || !g.isRow(value) || len(value) < g.rowSize() {
			// Decided again, which reads the row and reports a failure, or finds the room a row
			// no longer full has (only one replaced as not a row can be shorter).
			return ErrCasMismatch
		}
		r.value = value
		for i := range group {
			a := &group[i]
			if a.place != placeOverflow || a.row != ri || a.cost == 0 {
				continue
			}
			if _, _, found := bucketIn(r.value, a.owner); found {
				return ErrCasMismatch
			}
			r.mark(drawerMarks(a.owner))
		}
		if err = store.Set(g.rowKey(r.index), r.value, cas); err == nil || !isCasMismatch(err) {
			return err
		}
	}
	return ErrCasMismatch
}

// whenFull decides a limit whose row has no free slot, as the when_full policy says: not counted
// (allow), on the overflow bucket (overflow), or rejected until the first slot of the row is
// idle, at busyUntil (reject).
func (g *Gate) whenFull(store Store, a *applied, busyUntil, now int64) error {
	g.out.TableFull++
	switch g.table.WhenFull {
	case config.WhenFullAllow:
		a.place, a.skip = placeNone, true
		a.decision = limiter.Decision{Allowed: true}
		return nil
	case config.WhenFullOverflow:
		return g.readOverflow(store, a, now)
	default:
		wait := int64(1) // every slot the request's own: no slot's end to wait for
		if busyUntil != math.MaxInt64 {
			wait = max(busyUntil-now, 1)
		}
		a.place, a.next = placeNone, a.limit.algo.initial(a.when(now))
		a.decision = limiter.Decision{RetryAfter: duration.Duration(wait)}
		return nil
	}
}

// readOverflow decides a limit on the bucket its rule and limit share among all keys that found
// their row full. The write marks the key among the bucket's drawers, which are forgotten
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
		} else if s.owner == l.overflowOwner {
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
// from the owner's top bits (its row is the owner modulo the number of rows). A key
// none of whose draws is felt any more may find its bits set by others: it then starts its
// own bucket from the overflow bucket's state, which errs towards admitting less.
func drawerMarks(owner uint64) uint64 {
	return 1<<(owner>>58) | 1<<(owner>>52&63)
}

// startState is the state a new bucket starts from, as of the latest stamp seen: a fresh one,
// unless the key drew from the overflow bucket since that was last idle (its marks are among the
// drawers). Then it starts from the overflow bucket's state: whatever the key drew there is
// still missing from it, so its draws from both together stay within one limit. Only that read
// is added to a new bucket's path, only under when_full overflow, and only when the row carries
// the key's marks (Gate.read). It comes after the read of the row the bucket is written into
// with that read's CAS: a draw of the same key either wrote the overflow bucket and its marked
// row before it, or writes the row after the bucket is there and fails.
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
	if !ok || s.owner != l.overflowOwner {
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
			whole, part, ok := g.slotIn(a.slot, value)
			if !ok {
				break
			}
			s, ok := decodeSlot(part)
			if !ok || s.owner != a.writeOwner || s.fingerprint != a.limit.fingerprint || !a.limit.algo.valid(s.cells) {
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
			encodeSlot(part, &s)
			if err := store.Set(key, whole, cas); err == nil || !isCasMismatch(err) {
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
