package admission

import (
	"github.com/tollgate-proxy/tollgate/limiter"
)

// The buckets this VM found too low lately, remembered: a key that keeps asking while its
// bucket is empty (a client hammering its limit, a flood) is rejected from the VM's memory, with
// no read of shared data, until its bucket could admit it again.
//
// This is exact, not a cache that may be stale, for the one limit it is kept for: the fast
// rule's plain token bucket (Policy.fastBucket), whose requests all cost the same and whose
// rule gives nothing back (no count, refund, global limit, delay or debt). Such a bucket only
// ever gains by its refill, and loses only by a request it admits. Its level at any later instant
// is therefore at most the level remembered refilled to that instant; while that is below the
// cost, no worker can admit a request of the key (each would need the cost), so nothing is taken
// either, and the level is exactly the remembered one refilled: the decision and its Retry-After
// are those a read of shared data would give. The first instant the refill reaches the cost, the
// memory answers nothing and the decision reads shared data again.
//
// What can add to a bucket from outside that argument is an operator's reset (Gate.Reset,
// through any worker) and a bucket written by another configuration of the same namespace during
// a rollout. The VM that resets forgets at once; every other forgets all it remembers on its tick
// (ForgetRejected), so a reset reaches every worker within one tick period.

// The memory's shape: rejectedSets sets of rejectedWays buckets, chosen by the owner's top
// bits (the owner is a keyed hash, so clients cannot aim at a set).
const (
	rejectedSetBits = 10
	rejectedWays    = 4
)

// rejectedBucket is one remembered bucket: its owner (0 for none; an owner of 0 is never
// remembered) and its state as read when it rejected.
type rejectedBucket struct {
	owner uint64
	state limiter.BucketState
}

// rejectedBuckets is the memory: 4,096 buckets, 128 KiB, allocated once per Gate.
type rejectedBuckets struct {
	entries [rejectedWays << rejectedSetBits]rejectedBucket
	// victim is the way of each set that the next bucket remembered there replaces.
	victim [1 << rejectedSetBits]uint8
	// count is how many buckets were remembered since the memory was last emptied.
	count int
}

// set is the ways of owner's set.
func (m *rejectedBuckets) set(owner uint64) *[rejectedWays]rejectedBucket {
	i := (owner >> (64 - rejectedSetBits)) * rejectedWays
	return (*[rejectedWays]rejectedBucket)(m.entries[i : i+rejectedWays])
}

// find is owner's remembered bucket, or nil.
func (m *rejectedBuckets) find(owner uint64) *rejectedBucket {
	if owner == 0 {
		return nil // the owner of an empty place
	}
	set := m.set(owner)
	for i := range set {
		if set[i].owner == owner {
			return &set[i]
		}
	}
	return nil
}

// remember keeps state as owner's bucket, in place of what it remembered of owner, or else in
// an empty place of the set, or else in place of the set's next victim.
func (m *rejectedBuckets) remember(owner uint64, state limiter.BucketState) {
	if owner == 0 {
		return
	}
	set, place := m.set(owner), -1
	for i := range set {
		switch {
		case set[i].owner == owner:
			set[i].state = state
			return
		case set[i].owner == 0 && place < 0:
			place = i
		}
	}
	if place < 0 {
		v := &m.victim[owner>>(64-rejectedSetBits)]
		place, *v = int(*v), (*v+1)%rejectedWays
	}
	set[place] = rejectedBucket{owner: owner, state: state}
	m.count++
}

// forget empties the memory.
func (m *rejectedBuckets) forget() {
	if m.count > 0 {
		clear(m.entries[:])
		m.count = 0
	}
}

// rejectedAgain decides a's request on e, the bucket remembered of its owner: true when that
// still rejects it (a.decision says how), false when the refill since reaches the cost, and
// shared data is to decide (e is then forgotten).
func (g *Gate) rejectedAgain(a *applied, e *rejectedBucket, now int64) bool {
	next, decision := g.fastBucket.b.Take(e.state, now, a.cost)
	if decision.Allowed {
		e.owner = 0
		return false
	}
	// What decideFast records of a live bucket that rejects.
	a.skip, a.drew, a.writeOwner, a.row, a.place = false, false, a.owner, 0, placeLive
	a.next, a.decision = bucketCells(next), decision
	return true
}

// ForgetRejected forgets every bucket remembered as too low, so that the next request of each
// key reads shared data: the plugin calls it on every tick, which bounds how long a bucket
// written from outside (an operator's reset through another worker) goes unseen.
func (g *Gate) ForgetRejected() {
	if g.rejected != nil {
		g.rejected.forget()
	}
}
