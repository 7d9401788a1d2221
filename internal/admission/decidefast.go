package admission

import (
	"encoding/binary"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// A known key's decision, written out: the common case of the request path (a rule of the fast
// shape whose one limit is a plain token bucket, and a key whose bucket is in its row) without
// decide's general machinery, which it hands every other case to (table.go). A rule of the lean
// shape (no rate-limit headers, nothing settled) has its common case decided by AdmitLean
// instead (lean.go), with the same steps and no applied limit (but for a remembered rejection,
// which it answers from its retry instant, rejectsAt, where this takes from the state,
// takeAgain); decideFast decides it for the rules with rate-limit headers or count and refund,
// whose Outcome needs the applied limit and the bucket's level.

// decideFast is decide for the fast rule's one limit when it is a plain token bucket
// (Policy.fastBucket) and the key has its bucket in its row, the common case of a known key:
// read's and decide's steps for that case written out, on the row as the Store returned it,
// with no copy of the slot. Anything else (a row absent, unreadable or not a row, no bucket of
// the key in it, a slot of another limit or out of range) goes to decide, with the row read
// here, and a write that finds the row changed goes to decide's next attempt, as decide's own
// would. TestFastPathMatchesGeneral holds both to the same Outcome and the same shared data.
func (g *Gate) decideFast(store Store, group []applied, now int64) (Verdict, *applied, error) {
	a, l, tb := &group[0], group[0].limit, g.fastBucket
	m := g.remembered() // the VM's memory of buckets found too low (rejected.go), or nil
	if m != nil {
		if e := m.find(a.owner); e != nil && g.rejectedAgain(a, e, now) {
			return Limited, a, nil
		}
	}
	index := g.rowOf(a.owner)
	key := g.rowKey(index)
	value, cas, err := store.Get(key)
	slots := 0
	if err == nil && g.isRow(value) {
		slots = len(value) / SlotSize
	}
	tag := [4]byte{'T', 'G', slotVersion, slotKind(kindLive, l.tag)}
	for i := 0; i < slots; i++ {
		v := value[i*SlotSize : (i+1)*SlotSize]
		if binary.LittleEndian.Uint64(v[8:]) != a.owner {
			continue
		}
		state := bucketState(cells{cell(v, 0), cell(v, 1), cell(v, 2)})
		if [4]byte(v) != tag || binary.LittleEndian.Uint32(v[4:]) != l.fingerprint || !tb.b.Valid(state) {
			break // read decides on it, or on the slot after it
		}
		// What read records of a live bucket, and its decision. From here to the write, AdmitLean
		// (lean.go) does the same on the lean shape: a change to one is a change to both.
		a.skip, a.drew, a.writeOwner, a.row = false, false, a.owner, 0
		a.place, a.slot, a.stamp = placeLive, index*uint64(g.rowSlots)+uint64(i), max(now, int64(binary.LittleEndian.Uint64(v[48:])))
		var next limiter.BucketState
		next, a.decision = tb.b.Take(state, now, a.cost)
		a.next = bucketCells(next)
		if !a.decision.Allowed {
			if m != nil {
				m.remember(a.owner, state, a.decision, now)
			}
			return Limited, a, nil
		}
		// The slot as encodeSlot writes it: its tag, fingerprint and owner are as read.
		idleAt, ok := a.decision.IdleAt(next)
		if !ok {
			idleAt = tb.b.IdleAt(next)
		}
		binary.LittleEndian.PutUint64(v[16:], uint64(idleAt))
		putCell(v, 0, a.next[0])
		putCell(v, 1, a.next[1])
		putCell(v, 2, a.next[2])
		binary.LittleEndian.PutUint64(v[48:], uint64(a.stamp))
		switch err := store.Set(key, value, cas); {
		case err == nil:
			return Allow, nil, nil
		case isCasMismatch(err):
			return g.decideFrom(store, group, now, 1)
		default:
			return Failed, nil, wrapError("cannot write to shared data", err)
		}
	}
	// Anything else is decide's, whose first read takes this one.
	g.preread = prereadRow{index: index, value: value, cas: cas, err: err, ok: true}
	verdict, worst, err := g.decide(store, group, now)
	g.preread.ok = false
	return verdict, worst, err
}

// prereadRow is a row decideFast read and left to decide, whose read takes it instead of
// reading it again.
type prereadRow struct {
	index uint64
	value []byte
	cas   uint32
	err   error
	ok    bool
}
