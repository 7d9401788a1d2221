package admission

import (
	"encoding/binary"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// The lean shape's common case, decided in one function: one rule, one header key, one plain
// token bucket at a constant cost, nothing settled at the response and no rate-limit headers
// (every option at its default), for a key whose bucket is live in its row or remembered as too
// low. It does what gatherFast, decideFast and Admit do for that case, top-down, without
// listing the limit in Gate.applied or emptying the whole Outcome first: its answers are two
// Outcomes kept for it, whose few varying fields it sets. In Tollgate's module, where every
// function entered and every field stored costs more than natively, that saves 6 to 9 % of an
// admitted request's time (BENCHMARKS.md, section 1, has the figures; docs/design.md, "The lean
// path", the reasons). Anything else goes the way it went before; TestFastPathMatchesGeneral
// holds all ways to the same answers, reads and shared data.

// leanOutcomes are the lean shape's Outcomes and its one limit as applied, made by NewGate for
// a policy whose fast rule has a plain token bucket (whether or not the rest of the lean shape
// holds: Policy.lean is read on every decision).
type leanOutcomes struct {
	allowed, limited Outcome
	// charged is the limit as the last admission charged it: enforced of allowed, which
	// Charge reads.
	charged [1]applied
}

// newLeanOutcomes fills the Outcomes a policy of the lean shape answers with.
func (g *Gate) newLeanOutcomes() {
	r := g.fast
	o := &g.leanOut
	o.charged[0] = applied{rule: r, limit: &r.limits[0], cost: r.cost.Units, place: placeLive}
	o.allowed = Outcome{Verdict: Allow, Rule: -1, Admitted: []int{r.index}, enforced: o.charged[:]}
	o.limited = Outcome{Verdict: Limited, Rule: r.index}
}

// LeanAdmission is the Outcome Admit answers every admission of the lean path with, nil when
// the policy has no lean shape: its one rule admitted (Admitted), nothing aside counted, no delay,
// no limit described. The lean shape has no other rule, shadow rule, concurrency limit, global
// limit, usage, count or refund, or rate-limit headers (fastShape, lean), so nothing of the
// admission is held, settled, checked again or rendered later either: a caller may know it by its
// address, and count and answer it without reading its fields.
func (g *Gate) LeanAdmission() *Outcome {
	if !g.lean() || g.fastBucket == nil {
		return nil
	}
	return &g.leanOut.allowed
}

// LeanRejection is the Outcome Admit answers every rejection of the lean path with, nil when the
// policy has no lean shape: Limited by its one rule, with the RetryAfter of the rejection it
// answers last (set anew for each), nothing aside counted, no limit described, nothing held.
// As LeanAdmission's, a caller may know it by its address.
func (g *Gate) LeanRejection() *Outcome {
	if !g.lean() || g.fastBucket == nil {
		return nil
	}
	return &g.leanOut.limited
}

// LeanKeyHeader is the header whose value is the lean shape's one key, "" when the policy has no
// lean shape: a caller that has the request's headers at hand reads it and decides by AdmitLean.
func (g *Gate) LeanKeyHeader() string {
	if !g.lean() {
		return ""
	}
	return g.fast.key[0].Header
}

// AdmitLean is Admit for a request whose key header (LeanKeyHeader) the caller read already:
// value and found as req.Header would answer them. The plugin reads it with the headers it reads
// anyway, and spares the call through Request. A policy that has no lean shape is decided the
// general way, whatever value says.
//
// For the lean shape it decides the common cases itself, the uncommon ones as gatherFast and
// decideFast would (a missing key refused, a row without the key's live bucket decided by
// decide), and a key header missing or empty that the rule lets through, or too long, the general
// way (leanAside).
func (g *Gate) AdmitLean(req Request, value string, found bool, store Store, now int64) *Outcome {
	if !g.lean() {
		return g.admitGeneral(req, store, now, false)
	}
	r, tb := g.fast, g.fastBucket
	l := &r.limits[0]
	if !found || value == "" || len(value) > fastKeyBytes {
		return g.leanAside(req, value, found, store, now)
	}
	// The partition key, written after the owner-hash prefix and hashed there (writeOneKey).
	buf := g.writeOneKey(l, value)
	if len(buf)-len(l.ownerPrefix) > g.table.MaxKeyBytes {
		return g.leanAside(req, value, found, store, now)
	}
	owner, cost := sipHash24(g.secret[0], g.secret[1], buf), r.cost.Units

	m := g.remembered()
	if m != nil {
		if e := m.find(owner); e != nil {
			if wait, rejected := e.rejectsAt(now); rejected {
				return g.leanLimited(wait)
			}
		}
	}
	index := g.rowOf(owner)
	key := g.rowKey(index)
	row, cas, err := store.Get(key)
	slots := 0
	if err == nil && g.isRow(row) {
		slots = len(row) / SlotSize
	}
	tag := [4]byte{'T', 'G', slotVersion, slotKind(kindLive, l.tag)}
	for i := 0; i < slots; i++ {
		v := row[i*SlotSize : (i+1)*SlotSize]
		if binary.LittleEndian.Uint64(v[8:]) != owner {
			continue
		}
		state := bucketState(cells{cell(v, 0), cell(v, 1), cell(v, 2)})
		if [4]byte(v) != tag || binary.LittleEndian.Uint32(v[4:]) != l.fingerprint || !tb.b.Valid(state) {
			break // decide decides on it, or on the slot after it
		}
		// From here to the write, what decideFast does on a live bucket: a change to one is a
		// change to both.
		next, decision := tb.b.Take(state, now, cost)
		if !decision.Allowed {
			if m != nil {
				m.remember(owner, state, decision, now)
			}
			return g.leanLimited(decision.RetryAfter)
		}
		stamp := max(now, int64(binary.LittleEndian.Uint64(v[48:])))
		// The slot as encodeSlot writes it: its tag, fingerprint and owner are as read.
		idleAt, ok := decision.IdleAt(next)
		if !ok {
			idleAt = tb.b.IdleAt(next)
		}
		binary.LittleEndian.PutUint64(v[16:], uint64(idleAt))
		c := bucketCells(next)
		putCell(v, 0, c[0])
		putCell(v, 1, c[1])
		putCell(v, 2, c[2])
		binary.LittleEndian.PutUint64(v[48:], uint64(stamp))
		if err := store.Set(key, row, cas); err != nil {
			return g.leanWriteFailed(store, owner, err, now)
		}
		return g.leanAllowed(owner, index*uint64(g.rowSlots)+uint64(i), next, now)
	}
	// Anything else is decide's, whose first read takes this one.
	g.preread = prereadRow{index: index, value: row, cas: cas, err: err, ok: true}
	return g.leanGeneral(store, owner, now)
}

// The lean path's uncommon ends, functions of their own that AdmitLean only calls (noinline, else
// some come back inlined): AdmitLean's body is half as long without them ("Uncommon ends").

// leanAside answers a request whose key header is missing, empty or too long for the lean path:
// a missing key refused here, as gatherFast refuses it (not the general way's matcher and key
// builder for every request of a flood without the key), anything else the general way, with
// the header as read (g.held).
//
//go:noinline
func (g *Gate) leanAside(req Request, value string, found bool, store Store, now int64) *Outcome {
	r := g.fast
	if (!found || value == "") && r.missingKey.Action == config.MissingKeyReject {
		out := g.resetOutcome()
		g.refuseMissing(r, g.describe(&r.key[0]))
		return out
	}
	g.held = heldHeader{Request: req, name: r.key[0].Header, value: value, found: found}
	return g.admitGeneral(&g.held, store, now, true)
}

// leanWriteFailed decides a request whose lean write failed: a write that lost its race goes to
// decide's next attempt, as decideFast's; any other error fails the decision.
//
//go:noinline
func (g *Gate) leanWriteFailed(store Store, owner uint64, err error, now int64) *Outcome {
	group := g.leanApplied(owner)
	g.resetOutcome()
	if isCasMismatch(err) {
		verdict, worst, err := g.decideFrom(store, group, now, 1)
		return g.finish(store, group, verdict, worst, err, now)
	}
	return g.finish(store, group, Failed, nil, wrapError("cannot write to shared data", err), now)
}

// leanGeneral decides by decide what the lean path found no live bucket of the key for, with the
// row it read (g.preread, set there: passed by value, the row would be copied).
//
//go:noinline
func (g *Gate) leanGeneral(store Store, owner uint64, now int64) *Outcome {
	group := g.leanApplied(owner)
	g.resetOutcome()
	verdict, worst, err := g.decide(store, group, now)
	g.preread.ok = false
	return g.finish(store, group, verdict, worst, err, now)
}

// leanLimited is the Outcome of a lean rejection, which the request may retry after wait.
func (g *Gate) leanLimited(wait duration.Duration) *Outcome {
	out := &g.leanOut.limited
	out.RetryAfter = wait
	return out
}

// leanAllowed is the Outcome of a lean admission, which charged the bucket at slot.
func (g *Gate) leanAllowed(owner, slot uint64, next limiter.BucketState, now int64) *Outcome {
	a := &g.leanOut.charged[0]
	a.owner, a.writeOwner, a.slot = owner, owner, slot
	setBucketCells(&a.next, next)
	out := &g.leanOut.allowed
	out.decidedAt = now
	return out
}

// leanApplied lists the lean rule's limit in g.applied, as gatherFast would, for decide.
func (g *Gate) leanApplied(owner uint64) []applied {
	r := g.fast
	a := applied{rule: r, limit: &r.limits[0], owner: owner, cost: r.cost.Units}
	g.applied = append(g.applied[:0], a)
	g.starts = g.starts[:0]
	return g.applied
}
