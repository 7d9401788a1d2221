package admission

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"time"
	"unsafe"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// MaxAttempts bounds the read-decide-write loop. Each retry means another worker VM updated one
// of the request's keys in between, so the bound is only reached under extreme contention; then
// the configured failure mode applies.
const MaxAttempts = 16

// casCreate is the CAS passed when writing a key that did not exist. Envoy stores a value for an
// absent key whatever the CAS argument, but CAS 0 would overwrite unconditionally if another
// worker created the key in between; any non-zero CAS makes that case a CasMismatch instead. The
// one collision left is a concurrently created key whose CAS is exactly this value.
const casCreate = math.MaxUint32

// The key table. Envoy's shared data has no delete, so buckets live in a fixed table of
// MaxKeys slots per plugin: a (rule, limit, partition key) bucket lives in the one slot its
// owner hash selects, and nothing else is ever written. The table's size therefore bounds the
// shared memory, whatever keys clients send.
//
// A slot holding another owner's bucket is taken over only when that bucket is idle (a token
// bucket full again, a window with nothing counted): the old owner, should it come back, would
// find exactly that state, so reusing the slot hands nobody a token. A slot whose bucket is in
// use is the when_full policy's case. Each bucket has exactly one possible slot, so no two
// workers can ever place one key's bucket in two slots and charge both.
//
// Owners are SipHash-2-4 of the rule, the limit and the partition key, keyed with a secret the
// first VM draws and stores in shared data: clients cannot aim their keys at someone else's slot
// or bucket. Two keys share a bucket only if their 64-bit hashes are equal.

// The value stored in a slot, little-endian, SlotSize bytes:
//
//	offset 0  [2]byte  magic "TG"
//	offset 2  uint8    layout version (slotVersion)
//	offset 3  uint8    algorithm (config.Algorithm)
//	offset 4  uint32   fingerprint of the limit that wrote it
//	offset 8  uint64   owner: the bucket's hash
//	offset 16 int64    idle at: monotonic ns from which the bucket is as good as new
//	offset 24 int64    cell 0 ┐ token bucket: level (credits), last update (ns), credits per token
//	offset 32 int64    cell 1 ├ windows: window start (ns), count, previous window's count
//	offset 40 int64    cell 2 ┘
const (
	SlotSize    = 48
	slotVersion = 2
)

// slot is a decoded slot value.
type slot struct {
	algorithm   uint8
	fingerprint uint32
	owner       uint64
	idleAt      int64
	cells       cells
}

func encodeSlot(dst []byte, s *slot) {
	_ = dst[SlotSize-1]
	dst[0], dst[1], dst[2], dst[3] = 'T', 'G', slotVersion, s.algorithm
	binary.LittleEndian.PutUint32(dst[4:], s.fingerprint)
	binary.LittleEndian.PutUint64(dst[8:], s.owner)
	binary.LittleEndian.PutUint64(dst[16:], uint64(s.idleAt))
	for i, v := range s.cells {
		binary.LittleEndian.PutUint64(dst[24+8*i:], uint64(v))
	}
}

// decodeSlot reads a value written by encodeSlot; ok is false for anything else (a corrupt or
// foreign value, which the slot's next writer replaces).
func decodeSlot(value []byte) (s slot, ok bool) {
	if len(value) != SlotSize || value[0] != 'T' || value[1] != 'G' || value[2] != slotVersion {
		return slot{}, false
	}
	s.algorithm = value[3]
	s.fingerprint = binary.LittleEndian.Uint32(value[4:])
	s.owner = binary.LittleEndian.Uint64(value[8:])
	s.idleAt = int64(binary.LittleEndian.Uint64(value[16:]))
	for i := range s.cells {
		s.cells[i] = int64(binary.LittleEndian.Uint64(value[24+8*i:]))
	}
	return s, true
}

// slotKey is the shared-data key of a slot, built in a buffer of the Gate's: it is valid until
// the next call, which is enough for a Store call (see Store).
func (g *Gate) slotKey(index uint64) string {
	g.slotBuf = strconv.AppendUint(append(g.slotBuf[:0], g.slotPrefix...), index, 16)
	return unsafe.String(unsafe.SliceData(g.slotBuf), len(g.slotBuf))
}

// decide charges every limit of a group or none. It reads all slots and decides; if one
// rejects, nothing is written and the rejection with the longest wait is returned. Otherwise
// each new state is written with the CAS it was read with; if another worker wrote one of them
// first, the writes already made are undone and the whole group is decided again.
func (g *Gate) decide(store Store, group []applied, now int64) (Verdict, *applied, error) {
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		var worst *applied
		for i := range group {
			a := &group[i]
			if err := g.read(store, a, now); err != nil {
				return Failed, nil, err
			}
			if !a.skip && !a.decision.Allowed && (worst == nil || a.decision.RetryAfter > worst.decision.RetryAfter) {
				worst = a
			}
		}
		if worst != nil {
			return Limited, worst, nil
		}
		written := 0
		var err error
		for ; written < len(group); written++ {
			a := &group[written]
			if a.skip || a.cost == 0 {
				continue // nothing to charge; the slot stays as it is
			}
			encodeSlot(g.buf[:], &slot{algorithm: a.limit.tag, fingerprint: a.limit.fingerprint, owner: a.writeOwner,
				idleAt: a.limit.algo.idleAt(a.next), cells: a.next})
			if err = store.Set(g.slotKey(a.slot), g.buf[:], a.cas); err != nil {
				break
			}
		}
		if err == nil {
			return Allow, nil, nil
		}
		g.refund(store, group[:written], now)
		if !isCasMismatch(err) {
			return Failed, nil, errors.New("cannot write to shared data: " + err.Error())
		}
	}
	return Failed, nil, errContended
}

var errContended = errors.New("shared data stayed contended for " + strconv.Itoa(MaxAttempts) + " attempts")

// read loads a limit's slot and decides the limit on it. The slot holds this bucket, nothing, a
// value that is not a slot (replaced), another bucket that is idle (taken over), or another
// bucket in use: then the when_full policy applies.
func (g *Gate) read(store Store, a *applied, now int64) error {
	l := a.limit
	a.skip, a.writeOwner = false, a.owner
	value, cas, err := store.Get(g.slotKey(a.slot))
	state := l.algo.initial(now)
	switch {
	case isNotFound(err):
		cas = casCreate
	case err != nil:
		return errors.New("cannot read shared data: " + err.Error())
	default:
		s, ok := decodeSlot(value)
		switch {
		case !ok:
			// Not a slot value: corrupt, or written by something else. Replaced, and reported.
			g.out.Corrupt++
		case s.owner == a.owner && s.algorithm == l.tag:
			if s.fingerprint == l.fingerprint && l.algo.valid(s.cells) {
				state = s.cells
			} else if converted, ok := l.algo.convert(s.cells, now); ok {
				// Written by a changed version of this limit (a new configuration).
				state = converted
			}
		case s.owner == a.owner:
			// The limit changed algorithm: it starts afresh.
		case s.idleAt <= now:
			// Another bucket, idle: its owner would find it as good as new, so it is taken over.
		default:
			// Another bucket in use.
			g.out.TableFull++
			switch g.table.WhenFull {
			case config.WhenFullAllow:
				a.cas, a.skip = cas, true
				a.decision = limiter.Decision{Allowed: true}
				return nil
			case config.WhenFullShare:
				if s.algorithm == l.tag && s.fingerprint == l.fingerprint && l.algo.valid(s.cells) {
					state, a.writeOwner = s.cells, s.owner
					break
				}
				fallthrough
			default:
				a.cas, a.next = cas, state
				a.decision = limiter.Decision{RetryAfter: time.Duration(max(s.idleAt-now, 1))}
				return nil
			}
		}
	}
	a.cas = cas
	if a.cost == 0 {
		a.next, a.decision = state, peek(l.algo, state, now)
		return nil
	}
	a.next, a.decision = l.algo.take(state, now, a.cost)
	return nil
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

// refund gives back what a group's first limits were charged before a later write failed. It is
// best effort: if it fails, the charge stands, which errs towards admitting less, never more.
// A slot that holds another bucket by now is left alone.
func (g *Gate) refund(store Store, charged []applied, now int64) {
	for i := range charged {
		a := &charged[i]
		if a.skip || a.cost == 0 {
			continue
		}
		for attempt := 0; attempt < MaxAttempts; attempt++ {
			value, cas, err := store.Get(g.slotKey(a.slot))
			if err != nil {
				break
			}
			s, ok := decodeSlot(value)
			if !ok || s.owner != a.writeOwner || s.fingerprint != a.limit.fingerprint || !a.limit.algo.valid(s.cells) {
				break
			}
			// The idle time stays: a refund only makes the bucket idle sooner.
			s.cells = a.limit.algo.give(s.cells, now, a.cost)
			encodeSlot(g.buf[:], &s)
			if err := store.Set(g.slotKey(a.slot), g.buf[:], cas); err == nil || !isCasMismatch(err) {
				break
			}
		}
	}
}

func isNotFound(err error) bool    { return errors.Is(err, ErrNotFound) }
func isCasMismatch(err error) bool { return errors.Is(err, ErrCasMismatch) }
