package admission

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
	"unsafe"
)

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

// secretValue is the stored form of the hash secret: "TGk1" and two 64-bit words.
const secretSize = 20

// LoadSecret reads the hash secret every VM of the plugin shares, or stores a new one drawn
// from random if there is none yet. Call it before the first Admit, outside the request path
// (Envoy allows shared data from proxy_on_configure on). A value under the secret's key that is
// not a secret is an error, never overwritten: running VMs may still hash with the old secret,
// and a second one would give every key a second bucket.
func (g *Gate) LoadSecret(store Store, random func() uint64) error {
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		value, _, err := store.Get(g.secretKey)
		switch {
		case err == nil && len(value) == secretSize && string(value[:4]) == "TGk1":
			g.secret = [2]uint64{binary.LittleEndian.Uint64(value[4:]), binary.LittleEndian.Uint64(value[12:])}
			return nil
		case err == nil:
			return errors.New("the shared-data key " + g.secretKey + " holds a value Tollgate did not write " +
				"(another plugin with the same name and vm_id?): give this plugin another name")
		case !isNotFound(err):
			return err
		}
		// Absent: propose one. Another VM may store its own first; then this write fails the
		// CAS and the loop reads the winner's.
		var fresh [secretSize]byte
		copy(fresh[:], "TGk1")
		binary.LittleEndian.PutUint64(fresh[4:], random())
		binary.LittleEndian.PutUint64(fresh[12:], random())
		if err := store.Set(g.secretKey, fresh[:], casCreate); err != nil && !isCasMismatch(err) {
			return err
		}
	}
	return errContended
}

// owner is the keyed hash that names a bucket: the rule, the limit and the partition key.
func (g *Gate) owner(l *limit, partitionKey []byte) uint64 {
	buf := append(g.hashBuf[:0], l.ownerPrefix...)
	buf = append(buf, partitionKey...)
	g.hashBuf = buf
	return sipHash24(g.secret[0], g.secret[1], buf)
}

// sipHash24 is SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012)
// of msg under the key (k0, k1).
func sipHash24(k0, k1 uint64, msg []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(msg)
	for len(msg) >= 8 {
		m := binary.LittleEndian.Uint64(msg)
		v3 ^= m
		round()
		round()
		v0 ^= m
		msg = msg[8:]
	}
	last := uint64(n) << 56
	for i, b := range msg {
		last |= uint64(b) << (8 * i)
	}
	v3 ^= last
	round()
	round()
	v0 ^= last
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
