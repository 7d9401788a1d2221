package admission

import (
	"math"
	"math/bits"

	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// The buckets this VM found too low lately, remembered: a key that keeps asking while its
// bucket is empty (a client hammering its limit, a flood) is rejected from the VM's memory, with
// no read of shared data, until its bucket could admit it again.
//
// It is kept for one limit: the fast rule's plain token bucket (Policy.fastBucket), whose
// requests all cost the same and whose rule gives nothing back (no count, refund, global limit,
// delay or debt). Such a bucket only ever gains by its refill, and loses only by a request it
// admits. Its level at any later instant is therefore at most the level remembered refilled to
// that instant; while that is below the cost, no worker can admit a request of the key (each
// would need the cost), so nothing is taken either, and the level is exactly the remembered one
// refilled: the decision and its Retry-After are those a read of shared data would give, in the
// order of the workers' clock readings. (A worker whose reading is older than a write another
// worker made since is decided at its own reading, where a read would decide at the write's: it
// may then be rejected where the read would admit it, never the other way.) The first instant
// the refill reaches the cost, the memory answers nothing and the decision reads shared data
// again. A remembered rejection needs no shared data, so it stands while shared data fails.
//
// What can add to a bucket from outside that argument is an operator's reset (Gate.Reset,
// through any worker) and a bucket written by another configuration of the same namespace during
// a rollout. The VM that resets forgets at once; every other forgets all it remembers on its tick
// (ForgetRejected), so a reset reaches every worker within one tick period.
//
// A VM has one memory, in the module's static memory (vmrejected_wasm.go: a heap object of its
// size grows every VM's linear memory by far more), held by the Gate of the configuration that
// started last (RememberRejected): a Gate of the plugin's previous configuration, still deciding
// while its streams finish, then remembers nothing, and neither does a second plugin of the
// module in the same VM; both read shared data, as without the memory. Natively (tests, the
// simulator, many Gates on goroutines of their own) a Gate remembers only in a memory it is
// given (holdRejected): its decisions are a read's anyway.

// The memory's shape: 1 << rejectedSetBits sets of rejectedWays buckets, a set chosen by the
// owner's top bits (the owner is a keyed hash, so clients cannot aim at a set).
const (
	rejectedSetBits = 10
	rejectedWays    = 4
)

// rejectedBucket is one remembered bucket: its owner (0 for none; an owner of 0 is never
// remembered), its state as read when it rejected, and the instant from which the rejected
// request's cost is admitted (limiter.Decision.RetryAt; math.MinInt64 when there is none).
type rejectedBucket struct {
	owner   uint64
	state   limiter.BucketState
	retryAt int64
}

// rejectedBuckets is the memory: 4,096 buckets, 160 KiB.
type rejectedBuckets struct {
	holder *Gate // the Gate that remembers in it (holdRejected)
	sets   [1 << rejectedSetBits][rejectedWays]rejectedBucket
	// used has a bit per set that a bucket was remembered in since the memory was last emptied:
	// a request whose set has none (all of them while no key is limited) looks no further, and
	// the set's line of memory is not read.
	used [1 << rejectedSetBits / 64]uint64
	// victim is the way of each set that the next bucket remembered there replaces, in turn.
	victim [1 << rejectedSetBits]uint8
}

// holdRejected makes g remember in m, emptied, or in no memory if m is nil: a Gate that
// remembered in m before no longer does (remembered), and nothing it remembered is used.
func (g *Gate) holdRejected(m *rejectedBuckets) {
	g.rejected = m
	if m != nil {
		m.holder = g
		m.forget()
	}
}

// RememberRejected makes g the Gate that remembers, in the VM's memory, the buckets it finds too
// low, if its policy allows (a rule of the fast shape with a plain token bucket): the plugin
// calls it once its configuration has started, so a configuration that fails to start takes the
// memory from none. Natively there is no VM's memory, and g remembers nothing.
func (g *Gate) RememberRejected() {
	if g.remembersRejected {
		g.holdRejected(vmRejectedBuckets())
	}
}

// remembered is g's memory of rejected buckets, nil when it holds none.
func (g *Gate) remembered() *rejectedBuckets {
	if m := g.rejected; m != nil && m.holder == g {
		return m
	}
	return nil
}

// setOf is the number of owner's set: its top bits.
func setOf(owner uint64) uint64 { return owner >> (64 - rejectedSetBits) }

// find is owner's remembered bucket, or nil.
func (m *rejectedBuckets) find(owner uint64) *rejectedBucket {
	s := setOf(owner)
	if m.used[s/64]&(1<<(s%64)) == 0 || owner == 0 { // 0: the owner of an empty place
		return nil
	}
	set := &m.sets[s]
	for i := range set {
		if set[i].owner == owner {
			return &set[i]
		}
	}
	return nil
}

// remember keeps state as owner's bucket, which rejected a request at now with d, in place of
// what it remembered of owner, or else in an empty place of the set, or else in place of the
// set's next victim.
func (m *rejectedBuckets) remember(owner uint64, state limiter.BucketState, d limiter.Decision, now int64) {
	if owner == 0 {
		return
	}
	retryAt, ok := d.RetryAt(state, now)
	if !ok {
		// No instant below math.MaxInt64 (a wait beyond int64's nanoseconds): rejectsAt never
		// answers, and the lean path reads the key's bucket again, as exact as a read is
		// (takeAgain still answers from the state).
		retryAt = math.MinInt64
	}
	s := setOf(owner)
	set, place := &m.sets[s], -1
	for i := range set {
		switch {
		case set[i].owner == owner:
			set[i].state, set[i].retryAt = state, retryAt
			return
		case set[i].owner == 0 && place < 0:
			place = i
		}
	}
	if place < 0 {
		v := &m.victim[s]
		place, *v = int(*v), (*v+1)%rejectedWays
	}
	set[place] = rejectedBucket{owner: owner, state: state, retryAt: retryAt}
	m.used[s/64] |= 1 << (s % 64)
}

// forget empties the memory: the sets used since it was last emptied.
func (m *rejectedBuckets) forget() {
	for w, word := range m.used {
		for ; word != 0; word &= word - 1 {
			m.sets[w*64+bits.TrailingZeros64(word)] = [rejectedWays]rejectedBucket{}
		}
		m.used[w] = 0
	}
}

// rejectsAt decides the request of e's rule at now on e, a bucket remembered as too low, from
// the instant its refill reaches the request's cost (limiter.Decision.RetryAt), with no Take:
// rejected while now is before it, after the wait to it (the RetryAfter Take would give), not
// from it on, when e is forgotten and shared data is to decide. AdmitLean's way, whose Outcome
// reads no more of the decision; decideFast's (rejectedAgain) needs the bucket's level too.
func (e *rejectedBucket) rejectsAt(now int64) (wait duration.Duration, rejected bool) {
	if t := max(now, e.state.Last); t < e.retryAt {
		return duration.Duration(e.retryAt - t), true
	}
	e.owner = 0
	return 0, false
}

// takeAgain decides a request of cost at now on e, a bucket remembered as too low, with tb, the
// bucket's algorithm: rejected while e still rejects it (next and decision say how), not once
// the refill since reaches the cost, when e is forgotten and shared data is to decide. Small
// enough to be inlined in decideFast's rejectedAgain.
func (e *rejectedBucket) takeAgain(tb *tokenBucket, now, cost int64) (next limiter.BucketState, decision limiter.Decision, rejected bool) {
	next, decision = tb.b.Take(e.state, now, cost)
	if decision.Allowed {
		e.owner = 0
	}
	return next, decision, !decision.Allowed
}

// rejectedAgain decides a's request on e, the bucket remembered of its owner: true when that
// still rejects it (a.decision says how), false when the refill since reaches the cost, and
// shared data is to decide (e is then forgotten).
func (g *Gate) rejectedAgain(a *applied, e *rejectedBucket, now int64) bool {
	next, decision, rejected := e.takeAgain(g.fastBucket, now, a.cost)
	if !rejected {
		return false
	}
	// What decideFast records of a live bucket that rejects, as far as a rejection's Outcome
	// reads it (the slot and its stamp are only read to write it).
	a.skip, a.drew, a.writeOwner, a.row, a.place = false, false, a.owner, 0, placeLive
	a.next, a.decision = bucketCells(next), decision
	return true
}

// ForgetRejected forgets every bucket remembered as too low, so that the next request of each
// key reads shared data: the plugin calls it on every tick, which bounds how long a bucket
// written from outside (an operator's reset through another worker) goes unseen.
func (g *Gate) ForgetRejected() {
	if m := g.remembered(); m != nil {
		m.forget()
	}
}
