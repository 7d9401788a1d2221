package admission

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// Leases of a global limit (global.lease): a replica takes several hits from the rate limit
// service at once and keeps the tokens it was granted in shared data, where every worker VM of
// the Envoy spends them by compare-and-swap, so a request they cover goes on without a call.
// docs/global-limits.md gives the argument; in short:
//
//   - Exact: every token spent was granted by the service, and spent at most once (a CAS per
//     spend). Unspent tokens are dropped, never given back (the protocol has no refund): at ttl,
//     or at the end of the service's window, whichever comes first, so a token counted in one
//     window is never spent in the next. The total admitted over all replicas never exceeds the
//     global limit; what a replica drops is under-admission, at most a lease per replica and
//     window (each lease at most max_tokens).
//   - Adaptive: the next lease's size starts at 1, doubles whenever the pool ran dry within half
//     a ttl of its last grant (the key stays busy), up to max_tokens, and halves whenever tokens
//     expire unused (demand dropped): it settles near what the key spends in half a ttl. It
//     never asks for more than half of what the service said was left in its window
//     (limit_remaining), nor for less than the request's cost.
//   - OVER_LIMIT is remembered until the service's window resets (duration_until_reset): the
//     key's requests are rejected locally, Retry-After from the remembered instant, once the
//     tokens already leased are spent.
//   - Bounded: Envoy's shared data has no delete, so leases live in a fixed table of
//     leaseSlotsMax slots (fewer if the key table is smaller), each key in the first of two
//     candidate slots that holds its lease or is idle. A key that finds neither asks the
//     service per request, as without a lease: exact, only slower.

// LeaseSize is the size of a lease slot's value.
const LeaseSize = 80

// leaseSlotsMax bounds the lease table; leaseChoices is the number of candidate slots of a key.
const (
	leaseSlotsMax = 4096
	leaseChoices  = 2
	// leaseIdleGrace is how long a slot stays with its key after its last write, even when it
	// holds no tokens: a key between two leases keeps its slot and its lease size.
	leaseIdleGrace = int64(duration.Second)
)

// The value of a lease slot, little-endian:
//
//	offset 0  [2]byte "TL", uint8 version, uint8 unit of the limit (rls unit)
//	offset 4  uint32  requests per unit of the limit (0 unknown)
//	offset 8  uint64  owner: keyed hash of the rule and the key
//	offset 16 int64   tokens left
//	offset 24 int64   tokens may be spent while now < this (ttl and window end)
//	offset 32 int64   the service's window ends at (0 unknown)
//	offset 40 int64   OVER_LIMIT is remembered until
//	offset 48 int64   size of the next lease
//	offset 56 int64   what the service said was left in its window after the last grant, -1 unknown
//	offset 64 int64   stamp: now of the last write
//	offset 72 int64   when the last grant was put
const leaseVersion = 1

type leaseSlot struct {
	unit      uint8
	quota     uint32
	owner     uint64
	tokens    int64
	expiresAt int64
	windowEnd int64
	overUntil int64
	size      int64
	remaining int64
	stamp     int64
	grantedAt int64
}

func encodeLease(dst []byte, s *leaseSlot) {
	putTag(dst, LeaseSize, 'L', leaseVersion, s.unit)
	binary.LittleEndian.PutUint32(dst[4:], s.quota)
	binary.LittleEndian.PutUint64(dst[8:], s.owner)
	for i, v := range [...]int64{s.tokens, s.expiresAt, s.windowEnd, s.overUntil, s.size, s.remaining, s.stamp, s.grantedAt} {
		binary.LittleEndian.PutUint64(dst[16+8*i:], uint64(v))
	}
}

func decodeLease(b []byte) (s leaseSlot, ok bool) {
	if !hasTag(b, LeaseSize, 'L', leaseVersion) {
		return leaseSlot{}, false
	}
	s.unit = b[3]
	s.quota = binary.LittleEndian.Uint32(b[4:])
	s.owner = binary.LittleEndian.Uint64(b[8:])
	field := func(i int) int64 { return int64(binary.LittleEndian.Uint64(b[16+8*i:])) }
	s.tokens, s.expiresAt, s.windowEnd, s.overUntil = field(0), field(1), field(2), field(3)
	s.size, s.remaining, s.stamp, s.grantedAt = field(4), field(5), field(6), field(7)
	return s, s.tokens >= 0 && s.size >= 0
}

// live reports whether the slot's tokens may be spent at now.
func (s *leaseSlot) live(now int64) bool { return s.tokens > 0 && now < s.expiresAt }

// idle reports whether the slot may go to another key at now: nothing to spend, nothing
// remembered, and no write for a while.
func (s *leaseSlot) idle(now int64) bool {
	return !s.live(now) && now >= s.overUntil && now-s.stamp >= leaseIdleGrace
}

// LeaseVerdict is what TakeLease found.
type LeaseVerdict uint8

const (
	// LeaseServed: the request's cost was taken from the key's lease; no call is needed.
	LeaseServed LeaseVerdict = iota
	// LeaseAsk: ask the service for Ask tokens (at least the cost).
	LeaseAsk
	// LeaseOverLimit: the service said OVER_LIMIT for the key and its window has not reset:
	// reject with RetryAfter.
	LeaseOverLimit
)

// LeaseTake is the outcome of TakeLease.
type LeaseTake struct {
	Verdict LeaseVerdict
	// Ask is how many tokens to ask the service for (LeaseAsk).
	Ask int64
	// RetryAfter, Quota and Unit describe the remembered OVER_LIMIT (LeaseOverLimit): the time
	// until the service's window resets, and the limit it named (0 if none).
	RetryAfter duration.Duration
	Quota      uint32
	Unit       uint8
	// Expired counts the tokens this call found expired unused and dropped.
	Expired int64
	// Left estimates the global quota left after a request served from the lease
	// (LeaseServed), for the response's headers: what the service said was left at the last
	// grant, plus this replica's tokens still unspent; -1 when the service named no limit or its
	// window has ended. UntilReset is then the time until the service's window resets.
	Left       int64
	UntilReset duration.Duration
}

// leaseRef is the lease of one rule and key.
type leaseRef struct {
	lease config.GlobalLease
	owner uint64
	slots [leaseChoices]uint64
}

var errNoLease = errors.New("the rule has no lease")

func (g *Gate) leaseRef(rule int, key string) (leaseRef, error) {
	if rule < 0 || rule >= len(g.rules) || !g.rules[rule].leased {
		return leaseRef{}, errNoLease
	}
	r := &g.rules[rule]
	buf := make([]byte, 0, 8+len(r.name)+len(key))
	buf = append(buf, "lease\x00"...)
	buf = append(buf, r.name...)
	buf = append(buf, 0)
	buf = append(buf, key...)
	owner := sipHash24(g.secret[0], g.secret[1], buf)
	ref := leaseRef{lease: r.lease, owner: owner}
	n := uint64(g.leaseSlots())
	ref.slots[0] = owner % n
	ref.slots[1] = mix64(owner+0x9e3779b97f4a7c15) % n
	if ref.slots[1] == ref.slots[0] {
		ref.slots[1] = (ref.slots[0] + 1) % n
	}
	return ref, nil
}

// leaseSlots is the number of slots of the lease table.
func (g *Gate) leaseSlots() int { return max(min(g.table.MaxKeys, leaseSlotsMax), leaseChoices) }

// leaseKey is the shared-data key of a lease slot: next to the key table's, "lease/" for "row/".
func (g *Gate) leaseKey(index uint64) string {
	return strings.TrimSuffix(g.rowPrefix, "row/") + "lease/" + strconv.FormatUint(index, 16)
}

// leaseFound is where a key's lease is, after a lookup.
type leaseFound struct {
	index uint64
	cas   uint32
	slot  leaseSlot
	mine  bool // the slot holds the key's lease; else it is free for it
	ok    bool // a slot was found (mine, or free)
}

// findLease reads the key's candidate slots: the first that holds its lease, else the first
// that is free (absent, not a lease value, or idle).
func (g *Gate) findLease(store Store, ref *leaseRef, now int64) (leaseFound, error) {
	var free leaseFound
	for _, index := range ref.slots {
		value, cas, err := store.Get(g.leaseKey(index))
		switch {
		case isNotFound(err):
			if !free.ok {
				free = leaseFound{index: index, cas: CasCreate, ok: true}
			}
			continue
		case err != nil:
			return leaseFound{}, wrapError("cannot read shared data", err)
		}
		s, valid := decodeLease(value)
		if valid && s.owner == ref.owner {
			return leaseFound{index: index, cas: cas, slot: s, mine: true, ok: true}, nil
		}
		if !free.ok && (!valid || s.idle(now)) {
			free = leaseFound{index: index, cas: cas, ok: true}
			if valid {
				free.slot = s // to count what it drops
			}
		}
	}
	return free, nil
}

// writeLease writes s into the slot f found, with the CAS it was read with. retry is true when
// another worker wrote the slot first: the caller reads it again.
func (g *Gate) writeLease(store Store, f *leaseFound, s *leaseSlot) (retry bool, err error) {
	var buf [LeaseSize]byte
	encodeLease(buf[:], s)
	switch err := store.Set(g.leaseKey(f.index), buf[:], f.cas); {
	case err == nil:
		return false, nil
	case isCasMismatch(err):
		return true, nil
	default:
		return false, wrapError("cannot write to shared data", err)
	}
}

// TakeLease takes cost tokens from the lease of a rule's key (GlobalCheck.Key) at now, or says
// what to ask the service for, or that the service's OVER_LIMIT stands.
func (g *Gate) TakeLease(store Store, rule int, key string, cost, now int64) (LeaseTake, error) {
	ref, err := g.leaseRef(rule, key)
	if err != nil {
		return LeaseTake{}, err
	}
	var expired int64
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		f, err := g.findLease(store, &ref, now)
		if err != nil {
			return LeaseTake{Expired: expired}, err
		}
		if !f.mine {
			// No lease yet (or no slot): ask for the cost, which is what a first lease asks.
			return LeaseTake{Verdict: LeaseAsk, Ask: max(cost, 1), Expired: expired}, nil
		}
		s := f.slot
		switch {
		case s.live(now) && s.tokens >= cost:
			s.tokens -= cost
		case s.tokens > 0 && now >= s.expiresAt:
			// Expired unused: dropped, and demand was lower than the lease.
			dropped := s.tokens
			s.tokens, s.size = 0, max(s.size/2, 1)
			s.stamp = max(s.stamp, now)
			if retry, err := g.writeLease(store, &f, &s); retry || err != nil {
				if err != nil {
					return LeaseTake{Expired: expired}, err
				}
				continue
			}
			expired += dropped
			continue
		case now < s.overUntil:
			return LeaseTake{Verdict: LeaseOverLimit, RetryAfter: duration.Duration(s.overUntil - now), Quota: s.quota,
				Unit: s.unit, Expired: expired}, nil
		default:
			return LeaseTake{Verdict: LeaseAsk, Ask: s.ask(cost, ref.lease.MaxTokens, now), Expired: expired}, nil
		}
		s.stamp = max(s.stamp, now)
		if retry, err := g.writeLease(store, &f, &s); retry || err != nil {
			if err != nil {
				return LeaseTake{Expired: expired}, err
			}
			continue
		}
		return s.served(expired, now), nil
	}
	return LeaseTake{Expired: expired}, errContended
}

// served is the outcome of a request the slot s (its tokens already taken) served at now.
func (s *leaseSlot) served(expired, now int64) LeaseTake {
	take := LeaseTake{Verdict: LeaseServed, Expired: expired, Left: -1}
	if s.remaining >= 0 && s.quota > 0 && now < s.windowEnd {
		take.Left = min(s.remaining+s.tokens, int64(s.quota))
		take.Quota, take.Unit, take.UntilReset = s.quota, s.unit, duration.Duration(s.windowEnd-now)
	}
	return take
}

// ask is the size of the next lease request for a request of cost: the lease size, no more
// than half of what the service said was left in its window, and no less than the cost. Half,
// because other replicas want the rest too: a lease request for more than is left is refused
// whole, and envoyproxy/ratelimit counts its hits all the same, so what was left is lost to
// every replica; asking for half leaves the others room, at the price of a few more calls near
// the end of the window.
func (s *leaseSlot) ask(cost, maxTokens, now int64) int64 {
	n := min(max(s.size, 1), maxTokens)
	if s.remaining >= 0 && now < s.windowEnd {
		n = min(n, s.remaining/2)
	}
	return max(n, cost, 1)
}

// LeaseGrant is what the service granted, for PutLease.
type LeaseGrant struct {
	// Tokens are the granted tokens left after the requests that waited for them took theirs.
	Tokens int64
	// Asked is how many tokens were asked for.
	Asked int64
	// SentAt is when the lease request went out; the service's window is counted from then,
	// which ends it no later than the service's own end (the service decided after SentAt).
	SentAt int64
	// UntilReset is the service's duration_until_reset, 0 if it sent none.
	UntilReset duration.Duration
	// Remaining is the service's limit_remaining after the grant, -1 if it named no limit.
	Remaining int64
	Quota     uint32
	Unit      uint8
}

// PutLease adds what is left of a grant to the lease of a rule's key at now, and adapts the
// lease size. Tokens that cannot be kept (no slot is free) are dropped and reported as expired,
// as are tokens of an older lease the new one replaces.
func (g *Gate) PutLease(store Store, rule int, key string, grant LeaseGrant, now int64) (expired int64, err error) {
	ref, err := g.leaseRef(rule, key)
	if err != nil {
		return 0, err
	}
	ttlEnd := now + int64(ref.lease.TTL)
	windowEnd := int64(0)
	if grant.UntilReset > 0 {
		windowEnd = grant.SentAt + int64(grant.UntilReset)
	}
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		f, err := g.findLease(store, &ref, now)
		if err != nil {
			return expired, err
		}
		if !f.ok {
			return expired + grant.Tokens, nil
		}
		s := f.slot
		if !f.mine {
			s = leaseSlot{owner: ref.owner, size: 1, remaining: -1}
		}
		dropped := int64(0)
		grow := false
		switch {
		case s.live(now) && (windowEnd == 0) == (s.windowEnd == 0):
			// Still spendable: the pools merge. The window ends at the earlier end, so that no
			// token outlives the window it was counted in.
			if windowEnd != 0 {
				s.windowEnd = min(s.windowEnd, windowEnd)
			}
		case s.live(now):
			// One lease knows its window and the other does not: the older tokens go.
			dropped = s.tokens
			s.tokens, s.windowEnd = 0, windowEnd
		default:
			if s.tokens > 0 {
				dropped = s.tokens // expired unused
				s.size = max(s.size/2, 1)
			} else if f.mine && now-s.grantedAt < int64(ref.lease.TTL)/2 {
				// The pool ran dry within half its ttl: the key is busy enough for more.
				grow = true
			}
			s.tokens, s.windowEnd = 0, windowEnd
		}
		if grow {
			s.size = min(max(s.size, grant.Asked)*2, ref.lease.MaxTokens)
		}
		s.tokens += grant.Tokens
		s.expiresAt = ttlEnd
		if s.windowEnd != 0 {
			s.expiresAt = min(ttlEnd, s.windowEnd)
		}
		s.remaining = grant.Remaining
		if windowEnd == 0 {
			s.remaining = -1
		}
		if grant.Quota != 0 {
			s.quota, s.unit = grant.Quota, grant.Unit
		}
		s.stamp, s.grantedAt = max(s.stamp, now), now
		if retry, err := g.writeLease(store, &f, &s); retry || err != nil {
			if err != nil {
				return expired + grant.Tokens, err
			}
			continue
		}
		return expired + dropped, nil
	}
	return expired + grant.Tokens, errContended
}

// RefuseLease remembers the service's OVER_LIMIT for a rule's key until the service's window
// resets, at now + untilReset (counted from the answer: Retry-After must not promise a reset
// before the service's). The tokens already leased stay: they were granted in this window.
func (g *Gate) RefuseLease(store Store, rule int, key string, untilReset duration.Duration, quota uint32, unit uint8, now int64) error {
	ref, err := g.leaseRef(rule, key)
	if err != nil {
		return err
	}
	if untilReset <= 0 {
		return nil
	}
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		f, err := g.findLease(store, &ref, now)
		if err != nil || !f.ok {
			return err
		}
		s := f.slot
		if !f.mine {
			s = leaseSlot{owner: ref.owner, size: 1, remaining: -1}
		}
		s.overUntil = max(s.overUntil, now+int64(untilReset))
		if quota != 0 {
			s.quota, s.unit = quota, unit
		}
		s.stamp = max(s.stamp, now)
		if retry, err := g.writeLease(store, &f, &s); retry || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		return nil
	}
	return errContended
}

// mix64 is the finalizer of SplitMix64: every output bit depends on every input bit.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
