package simulate

import (
	"container/heap"
	"fmt"

	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"

	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// The plugin's side of leases (internal/plugin/lease.go), modelled: a request takes its cost
// from its replica's lease (admission's TakeLease, on the replica's shared data); when the lease
// does not cover it, it waits for its VM's lease request for the key in flight, or sends one.
// The answer serves the requests that waited, in order, while the grant lasts, puts what is left
// into the lease (PutLease), and sends the ones it did not cover on again, the first lease
// request asking for all of them (at most max_tokens).

// leaseCall is a lease request in flight with the requests of its VM that wait for it.
type leaseCall struct {
	replica *fleetReplica
	worker  int
	id      ruleKey
	ask     int64
	sent    int64
	due     int64 // when the answer arrives
	seq     int64 // order of sending, among calls due at once
	answer  serviceAnswer
	waiters []leaseWaiter
}

type leaseWaiter struct {
	h    *heldRequest
	cost int64
}

// checkLease decides one global check of a leased rule at now; a lease request it sends asks for
// at least minAsk.
func (f *fleet) checkLease(h *heldRequest, c admission.GlobalCheck, now, minAsk int64) {
	r := h.replica
	take, err := r.gates[h.worker].TakeLease(r.store, c.Rule, c.Key, c.Cost, now)
	if err != nil {
		// The lease table failed (contention): the plugin asks the service for this request alone.
		f.direct(h, c, now)
		return
	}
	switch take.Verdict {
	case admission.LeaseServed:
		f.stats.spent(c.Rule, c.Cost)
		return
	case admission.LeaseOverLimit:
		h.rejected = true
		return
	}
	id := ruleKey{c.Rule, c.Key}
	h.waits++
	if call := r.inFlight[h.worker][id]; call != nil {
		call.waiters = append(call.waiters, leaseWaiter{h, c.Cost})
		return
	}
	ask := max(take.Ask, minAsk)
	f.call(c.Rule, c.Key, now)
	f.sent++
	call := &leaseCall{replica: r, worker: h.worker, id: id, ask: ask, sent: now,
		due: now + int64(f.opts.ServiceLatency), seq: f.sent,
		answer:  f.service.hit(id, f.rules[c.Rule].limit, ask, now),
		waiters: []leaseWaiter{{h, c.Cost}}}
	r.inFlight[h.worker][id] = call
	heap.Push(&f.answers, call)
}

// answered decides the requests that waited for a lease request, at its answer.
func (f *fleet) answered(call *leaseCall) {
	r, now := call.replica, call.due
	delete(r.inFlight[call.worker], call.id)
	g := r.gates[call.worker]
	rule := &f.rules[call.id.rule]
	if call.answer.over {
		_ = g.RefuseLease(r.store, call.id.rule, call.id.key, duration.Duration(call.answer.untilReset),
			uint32(rule.limit.RequestsPerUnit), rule.limit.code, now)
		for _, w := range call.waiters {
			w.h.rejected = true
			w.h.waits--
			f.settle(w.h, now)
		}
		return
	}
	f.stats.granted(call.id.rule, call.ask)
	left := call.ask
	var uncovered []leaseWaiter
	for _, w := range call.waiters {
		if w.cost > left {
			uncovered = append(uncovered, w)
			continue
		}
		left -= w.cost
		f.stats.spent(call.id.rule, w.cost)
		w.h.waits--
		f.settle(w.h, now)
	}
	grant := admission.LeaseGrant{Tokens: left, Asked: call.ask, SentAt: call.sent,
		UntilReset: duration.Duration(call.answer.untilReset), Remaining: call.answer.remaining,
		Quota: uint32(rule.limit.RequestsPerUnit), Unit: rule.limit.code}
	_, _ = g.PutLease(r.store, call.id.rule, call.id.key, grant, now) // tokens it cannot keep are stranded
	need := int64(0)
	for _, w := range uncovered {
		need += w.cost
	}
	for _, w := range uncovered {
		w.h.waits--
		f.checkLease(w.h, admission.GlobalCheck{Rule: call.id.rule, Key: call.id.key, Cost: w.cost}, now, min(need, rule.maxTokens))
		need -= w.cost
		f.settle(w.h, now)
	}
}

// answerQueue orders the calls in flight by when they are answered, then by when they were sent.
type answerQueue []*leaseCall

func (q answerQueue) Len() int { return len(q) }
func (q answerQueue) Less(i, j int) bool {
	if q[i].due != q[j].due {
		return q[i].due < q[j].due
	}
	return q[i].seq < q[j].seq
}
func (q answerQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *answerQueue) Push(x any)   { *q = append(*q, x.(*leaseCall)) }
func (q *answerQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return x
}

// fleetStore is one replica's shared data, with Envoy's rules (hostcore.SharedData).
type fleetStore struct{ data *hostcore.SharedData }

func newFleetStore() *fleetStore { return &fleetStore{data: hostcore.NewSharedData()} }

// Get implements admission.Store.
func (s *fleetStore) Get(key string) ([]byte, uint32, error) {
	v, cas, st := s.data.Get(pluginName, key)
	return v, cas, storeError(st)
}

// Set implements admission.Store.
func (s *fleetStore) Set(key string, value []byte, cas uint32) error {
	return storeError(s.data.Set(pluginName, key, value, cas))
}

// storeError is the Store error of a shared-data status, as the filter maps them.
func storeError(st wire.Status) error {
	switch st {
	case wire.StatusOK:
		return nil
	case wire.StatusNotFound:
		return admission.ErrNotFound
	case wire.StatusCasMismatch:
		return admission.ErrCasMismatch
	}
	return fmt.Errorf("shared data: status %d", st)
}
