package simulate

import (
	"container/heap"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/admission"
)

// The fleet model (tollgate simulate --replicas): the log replayed as a load balancer would
// spread it over N replicas of W worker VMs each, for the cost of the rules' global limits.
//
// It runs Tollgate's own decision code natively, not the module: each replica has its own shared
// data (an in-memory store), each worker VM its own admission.Gate, so the local limits decide
// per replica and the leases live in each replica's lease table (admission/lease.go), exactly as
// in Envoy. What the plugin does around them (internal/plugin/lease.go: the requests of one VM
// waiting for that VM's lease request, decided together when it is answered; at most one lease
// request per key and VM in flight) and the rate limit service (fleetservice.go) are modelled
// here. A call is counted by the service when it is sent and answered serviceLatency later;
// nothing fails and nothing times out.

// Balance is how the load balancer in front of the replicas spreads requests.
type Balance uint8

const (
	// RoundRobin sends request i to replica i mod N.
	RoundRobin Balance = iota
	// HashClient sends each client address (without its port) to one replica, by a hash of it, as
	// a ring hash or Maglev balancer on the source address does; requests without an address go
	// round-robin.
	HashClient
)

// FleetOptions configure the fleet model.
type FleetOptions struct {
	Replicas, Workers int
	Balance           Balance
	// Limits are the global limits of the rules, by rule name, as the service holds them.
	Limits map[string]GlobalLimit
	// ServiceLatency is the time from sending a call to its answer.
	ServiceLatency time.Duration
	// RedisShards is the number of masters of the service's Redis Cluster (1: one Redis).
	RedisShards int
	// Seed seeds each replica's hash secret (which lease slots keys share).
	Seed uint64
}

// CheckFleet checks that opts fit the configuration: it has a rule with a global limit, and
// every such rule (and only those) has its limit in opts.Limits.
func CheckFleet(cfg *config.Config, opts FleetOptions) error {
	var errs []error
	global := map[string]bool{}
	for _, r := range cfg.Rules {
		if r.Global == nil {
			continue
		}
		global[r.Name] = true
		if _, ok := opts.Limits[r.Name]; !ok {
			errs = append(errs, fmt.Errorf("rule %s has a global limit but no limit in the service for the fleet model: give --ratelimit-config with the service's descriptor file, or --global-limit %s=N/UNIT (its descriptor's requests_per_unit and unit)", r.Name, r.Name))
		}
	}
	if len(global) == 0 {
		return ErrNoGlobalRule
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Limits)) {
		if !global[name] {
			errs = append(errs, fmt.Errorf("--global-limit %s: the configuration has no rule %s with a global limit", name, name))
		}
	}
	return errors.Join(errs...)
}

// fleet is one run of the model over one configuration: with leases as configured, or without.
type fleet struct {
	opts     FleetOptions
	rules    []fleetRule // by rule index
	replicas []*fleetReplica
	service  *fleetService
	answers  answerQueue
	next     int   // the round-robin balancer's next replica
	sent     int64 // calls sent, to order answers due at once
	req      request
	stats    *fleetStats
	shards   clusterShards
}

// fleetRule is what the model needs of a rule.
type fleetRule struct {
	leased    bool
	maxTokens int64
	limit     GlobalLimit
	prefix    string // the Redis key of its counters up to the partition key (fleetshard.go)
}

// fleetReplica is one Envoy: its shared data, a Gate per worker VM, and each VM's lease requests
// in flight by rule and key.
type fleetReplica struct {
	store    *fleetStore
	gates    []*admission.Gate
	inFlight []map[ruleKey]*leaseCall
	next     int // the next worker VM
}

// newFleet compiles cfg once per replica (each replica draws its own secret) and starts the
// model. withLeases false removes every rule's lease, for the figures without leases.
func newFleet(cfg *config.Config, opts FleetOptions, withLeases bool, stats *fleetStats) (*fleet, error) {
	f := &fleet{opts: opts, service: newFleetService(), stats: stats, shards: newClusterShards(max(opts.RedisShards, 1))}
	for _, r := range cfg.Rules {
		var fr fleetRule
		if r.Global != nil {
			fr.limit, fr.prefix = opts.Limits[r.Name], counterPrefix(&r)
			if r.Global.Lease != nil && withLeases {
				fr.leased, fr.maxTokens = true, r.Global.Lease.MaxTokens
			}
		}
		f.rules = append(f.rules, fr)
	}
	random := seeded(opts.Seed)
	for i := 0; i < opts.Replicas; i++ {
		policy, err := admission.Compile(cfg, pluginName)
		if err != nil {
			return nil, err
		}
		r := &fleetReplica{store: newFleetStore()}
		if err := policy.LoadSecret(r.store, random.Uint64); err != nil {
			return nil, err
		}
		for w := 0; w < opts.Workers; w++ {
			r.gates = append(r.gates, admission.NewGate(policy))
			r.inFlight = append(r.inFlight, map[ruleKey]*leaseCall{})
		}
		f.replicas = append(f.replicas, r)
	}
	return f, nil
}

// withoutLeases is cfg with every rule's lease removed.
func withoutLeases(cfg *config.Config) *config.Config {
	out := *cfg
	out.Rules = append([]config.Rule(nil), cfg.Rules...)
	for i := range out.Rules {
		if g := out.Rules[i].Global; g != nil && g.Lease != nil {
			plain := *g
			plain.Lease = nil
			out.Rules[i].Global = &plain
		}
	}
	return &out
}

// pick chooses the replica and the worker VM of a request: the balancer's replica, then the
// replica's worker VMs in turn (Envoy's workers take connections in turn, more or less).
func (f *fleet) pick(e *Entry) (*fleetReplica, int) {
	var r *fleetReplica
	if addr, ok := clientAddress(e.RemoteAddress); ok && f.opts.Balance == HashClient {
		h := fnv.New64a()
		h.Write(addr.AsSlice())
		r = f.replicas[h.Sum64()%uint64(len(f.replicas))]
	} else {
		r = f.replicas[f.next]
		f.next = (f.next + 1) % len(f.replicas)
	}
	w := r.next
	r.next = (r.next + 1) % len(r.gates)
	return r, w
}

// clientAddress is the address of "host:port" (or of a bare address), without the port.
func clientAddress(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), true
	}
	a, err := netip.ParseAddr(s)
	return a, err == nil
}

// heldRequest is a request admitted by its local limits whose global checks are not all
// answered yet.
type heldRequest struct {
	replica  *fleetReplica
	worker   int
	charge   admission.Charge
	checks   []heldCheck
	waits    int // lease requests it still waits for
	rejected bool
}

// heldCheck is one global check of a held request, with the service's window it arrived in.
type heldCheck struct {
	admission.GlobalCheck
	window int64
}

// do replays one request at its time.
func (f *fleet) do(e *Entry) {
	now := e.Time
	f.deliver(now)
	r, w := f.pick(e)
	f.req.set(e)
	g := r.gates[w]
	out := g.Admit(&f.req, r.store, now)
	if out.Verdict != admission.Allow {
		return
	}
	if held := out.AppendInFlight(nil); len(held) > 0 {
		// A request's response is not modelled: its concurrency slots are given back at once.
		g.Release(r.store, held, now)
	}
	if len(out.Global) == 0 {
		return
	}
	h := &heldRequest{replica: r, worker: w, charge: out.Charge()}
	for _, c := range out.Global {
		h.checks = append(h.checks, heldCheck{GlobalCheck: c, window: f.stats.demand(c, f.rules[c.Rule].limit, now)})
	}
	for _, c := range h.checks {
		if f.rules[c.Rule].leased {
			f.checkLease(h, c.GlobalCheck, now, c.Cost)
		} else {
			f.direct(h, c.GlobalCheck, now)
		}
	}
	f.settle(h, now)
}

// call counts a call to the service for a rule's key at now, on the Redis master holding the
// key's counter.
func (f *fleet) call(rule int, key string, now int64) {
	r := &f.rules[rule]
	f.stats.call(rule, key, now, f.shards.of(r.prefix, key, r.limit.windowStart(now)), len(f.shards))
}

// direct asks the service for one request's check: decided when the service counts it.
func (f *fleet) direct(h *heldRequest, c admission.GlobalCheck, now int64) {
	f.call(c.Rule, c.Key, now)
	if f.service.hit(ruleKey{c.Rule, c.Key}, f.rules[c.Rule].limit, c.Cost, now).over {
		h.rejected = true
	}
}

// settle decides a held request once it waits for nothing: admitted, or rejected with its local
// charge given back.
func (f *fleet) settle(h *heldRequest, now int64) {
	if h.waits > 0 {
		return
	}
	if h.rejected {
		h.replica.gates[h.worker].GiveBack(h.replica.store, h.charge, now)
	}
	for _, c := range h.checks {
		f.stats.decided(c, !h.rejected)
	}
}

// deliver answers the calls due by now, in the order they are due.
func (f *fleet) deliver(now int64) {
	for len(f.answers) > 0 && f.answers[0].due <= now {
		f.answered(heap.Pop(&f.answers).(*leaseCall))
	}
}

// finish answers every call still in flight, at the end of the log.
func (f *fleet) finish() { f.deliver(1<<63 - 1) }
