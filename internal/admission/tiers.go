package admission

import (
	"strconv"
	"unsafe"

	"github.com/tollgate-proxy/tollgate/config"
)

// A rule with limits_by has a set of limits per tier; the value of one key part names the tier
// of a request. The partition key stays the rule's key, and every tier's limit at position j
// is the same bucket of the key: its owner hashes the rule, j and the key, not the tier. A key
// that changes tier therefore finds the state its previous tier wrote (the slot's fingerprint
// says which limit wrote it) and carries it over (switchTier), so switching never adds tokens:
//
//   - token bucket to token bucket: the whole tokens the key held at the last write, clamped to
//     the new capacity (convert: the part of a token on its way is dropped); the time since that
//     write refills at the new tier's rate;
//   - window to window of the same algorithm and length (or calendar unit): the units counted
//     stay counted (a sliding window's previous count beyond the new capacity is added to the
//     current count instead, which weighs it more); a count at or above the new capacity
//     rejects until the window moves;
//   - anything else (another algorithm, another window length): the whole units the old state
//     has left by now, at most the new capacity, are what the new state has left in its current
//     window, or in its bucket, each read on its own clock (the wall clock for a calendar
//     window, which a decision of a rule with one among its tiers reads).
//
// A position only some tiers have counts only the requests of those tiers. docs/configuration.md
// states the bound this gives; TestTierSwitchingNeverGains checks it against a reference model.

// tierSet is a rule's compiled limits_by.
type tierSet struct {
	part        config.KeyPart
	names       []string  // by tier, in configuration order
	limits      [][]limit // by tier
	defaultTier int
}

// compileTiers compiles a rule's tiers. The limits at position j of every tier share the number
// seq (their owner prefixes are the same) and know each other as peers, to carry a state over
// when a key changes tier.
func (p *Policy) compileTiers(r *rule, cr *config.Rule, namespace string) error {
	by := cr.LimitsBy
	t := &tierSet{part: by.Part, defaultTier: by.Default, names: make([]string, len(by.Tiers)), limits: make([][]limit, len(by.Tiers))}
	positions := cr.LimitPositions()
	for i, tier := range by.Tiers {
		t.names[i] = tier.Name
		for j, l := range tier.Limits {
			compiled, err := p.compileLimit(r.name, j, l, p.limitCount+j, namespace)
			if err != nil {
				return wrapError("rules["+strconv.Itoa(r.index)+"].limits_by.tiers."+tier.Name+"["+strconv.Itoa(j)+"]", err)
			}
			t.limits[i] = append(t.limits[i], compiled)
		}
	}
	p.limitCount += positions
	for i := range t.limits {
		for j := range t.limits[i] {
			l := &t.limits[i][j]
			for k := range t.limits {
				if j < len(t.limits[k]) && t.limits[k][j].fingerprint != l.fingerprint {
					l.peers = append(l.peers, &t.limits[k][j])
					l.wallPeer = l.wallPeer || t.limits[k][j].wall
				}
			}
		}
	}
	r.tiers = t
	return nil
}

// tierLimits returns the limits of the request's tier: the one its part's value names, or the
// default tier when the value is missing or names none. Tier names are compared exactly, in
// configuration order: at most 64 comparisons and no allocation.
func (g *Gate) tierLimits(view *requestView, t *tierSet) []limit {
	value, found := g.tierValue(view, &t.part)
	if found {
		for i, name := range t.names {
			if name == value {
				return t.limits[i]
			}
		}
	}
	return t.limits[t.defaultTier]
}

// tierValue is the value of the tier's key part as a key would take it (a client_ip part's
// address or network, an authority lower-cased), in a buffer of the Gate's valid until the next
// call.
func (g *Gate) tierValue(view *requestView, part *config.KeyPart) (string, bool) {
	switch part.Kind {
	case config.KeyClientIP:
		addr, found := view.clientAddress()
		if !found {
			return "", false
		}
		g.tierBuf = view.appendClientGroup(g.tierBuf[:0], addr, part)
	case config.KeyAuthority:
		var prefix int
		var found bool
		if g.tierBuf, prefix, found = view.appendAuthority(g.tierBuf[:0], part.StripPort); !found {
			return "", false
		}
		return unsafe.String(unsafe.SliceData(g.tierBuf[prefix:]), len(g.tierBuf)-prefix), true
	default:
		return view.keyPart(*part)
	}
	return unsafe.String(unsafe.SliceData(g.tierBuf), len(g.tierBuf)), true
}

// switchTier is the state of a tiered limit's bucket that another tier's limit at the same
// position wrote (a peer with the slot's fingerprint and algorithm), carried over as the
// comment at the top of this file says; ok is false when no peer wrote it (a configuration
// change: resume decides as for any limit). now is on this limit's clock; monotonic and wall
// are the decision's times on both (wall is read only when this limit or a peer is a calendar
// window).
func (l *limit) switchTier(s *slot, now, monotonic, wall int64) (c cells, ok bool) {
	var from *limit
	for _, peer := range l.peers {
		if peer.fingerprint == s.fingerprint && peer.tag == s.algorithm && peer.algo.valid(s.cells) {
			from = peer
			break
		}
	}
	if from == nil {
		return cells{}, false
	}
	switch to := l.algo.(type) {
	case *tokenBucket:
		if _, isBucket := from.algo.(*tokenBucket); isBucket {
			return to.convert(s.cells, now)
		}
	case window:
		if old, isWindow := from.algo.(window); isWindow && old.sliding == to.sliding && old.limit.Window == to.limit.Window {
			return switchWindow(old, to, s.cells, now), true
		}
	case concurrency:
		if _, isConcurrency := from.algo.(concurrency); isConcurrency {
			return to.convert(s.cells, now) // the requests in flight stay counted
		}
	case calendarWindow:
		if old, isCalendar := from.algo.(calendarWindow); isCalendar && old.algo.Limit().Unit == to.algo.Limit().Unit {
			// A take of more than the capacity counts nothing: it only brings the state to now.
			advanced, _ := old.algo.Take(windowState(s.cells), now, old.algo.Limit().Capacity+1)
			return cells{advanced.Start, min(max(advanced.Count, 0), to.algo.Limit().Capacity), 0}, true
		}
	}
	// The old state is read on its own clock: a calendar window on the wall clock, the others on
	// the monotonic one.
	at := monotonic
	if from.wall {
		at = wall
	}
	return startWithRemaining(l.algo, remainingUnits(from.algo, s.cells, at), now), true
}

// switchWindow carries a window's counts to a window of the same algorithm and length, once
// brought to the window of now (a sliding window's count becomes the previous one there): the
// count stays counted, clamped to the new capacity (which then rejects until the window moves,
// so the clamped count is never written); a sliding window's previous count beyond the new
// capacity moves to the current count, where it weighs fully instead of fading.
func switchWindow(from, to window, c cells, now int64) cells {
	// A take of more than the capacity counts nothing: it only brings the state to now.
	advanced, _ := from.algo.Take(windowState(c), now, from.limit.Capacity+1)
	c = windowCells(advanced)
	capacity := to.limit.Capacity
	count, previous := max(c[1], 0), max(c[2], 0)
	kept := min(previous, capacity)
	count = min(count+(previous-kept), capacity)
	if !to.sliding {
		kept = 0
	}
	return cells{c[0], count, kept}
}

// remainingUnits is how many whole units a limit's state has left at now; a concurrency limit's
// slots are not carried over a tier switch.
func remainingUnits(a algorithm, c cells, now int64) int64 {
	if _, ok := a.(concurrency); ok {
		return 0
	}
	return peek(a, c, now).Remaining
}

// startWithRemaining is a fresh state of a that has only remaining units left at now (at most
// its capacity): a bucket holding that many tokens, or the window of now with the rest counted.
func startWithRemaining(a algorithm, remaining, now int64) cells {
	c := a.initial(now)
	remaining = max(remaining, 0)
	switch t := a.(type) {
	case *tokenBucket:
		c[0] = min(remaining, t.capacity)
	case window:
		c[1] = t.limit.Capacity - min(remaining, t.limit.Capacity)
	case calendarWindow:
		capacity := t.algo.Limit().Capacity
		c[1] = capacity - min(remaining, capacity)
	}
	return c
}
