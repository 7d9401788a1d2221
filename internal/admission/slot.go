package admission

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// The value stored in a slot, little-endian, SlotSize bytes:
//
//	offset 0  [2]byte  magic "TG"
//	offset 2  uint8    layout version (slotVersion)
//	offset 3  uint8    kind << 4 | algorithm (config.Algorithm)
//	offset 4  uint32   fingerprint of the limit that wrote it
//	offset 8  uint64   owner: the bucket's hash
//	offset 16 int64    idle at: monotonic ns from which the slot may go to another key; in the
//	                   overflow bucket, which is never taken over, its drawers (drawerMarks)
//	offset 24 int64    cell 0 ┐ token bucket: whole tokens, last update (ns), credits toward the next token
//	offset 32 int64    cell 1 ├ windows: window start (ns), count, previous window's count
//	offset 40 int64    cell 2 ┘ (zero in claims and released slots)
//	offset 48 int64    stamp: the latest now of any write to this slot
const (
	SlotSize    = 56
	slotVersion = 4
)

// The kinds of slot value.
const (
	kindLive     = 1 // a bucket
	kindPending  = 2 // a claim for a new bucket; idle at = abandoned from
	kindReleased = 3 // a claim given up: as good as empty
)

const (
	// defaultChoices is the number of candidate slots of a bucket. With a fraction α of the
	// table in use, a new key finds all of them busy with probability about α^choices: three
	// keep that under 0.1% at 10% load (TestChoicesFigures measures 2, 3 and 4).
	defaultChoices = 3
	maxChoices     = 4
	// claimTimeout is how long a claim holds a slot against other keys. A claim lives for the
	// few host calls between its write and its commit; any worker of the same key commits it,
	// so this only matters when a VM stops in between (a trap, a killed worker): then the
	// slot goes back to other keys after a second. Safety never depends on it: a claim taken
	// over is a CAS the claimer then loses.
	claimTimeout = int64(duration.Second)
	// overflowSlot stands for the overflow bucket in applied.slot.
	overflowSlot = math.MaxUint64
)

// slot is a decoded slot value.
type slot struct {
	kind        uint8
	algorithm   uint8
	fingerprint uint32
	owner       uint64
	idleAt      int64
	cells       cells
	stamp       int64
}

// Both kinds of value in the key table, a slot and a lease (lease.go), start with the same tag:
// 'T', a letter naming the kind, the version of its layout, and a byte of the kind's own.

// putTag starts a value of size bytes in dst with its tag. It first checks that dst holds size
// bytes, so that the writes after it need no bounds checks.
func putTag(dst []byte, size int, letter, version, b byte) {
	_ = dst[size-1]
	dst[0], dst[1], dst[2], dst[3] = 'T', letter, version, b
}

// hasTag reports whether value is size bytes long and starts with the tag of the letter and
// version given.
func hasTag(value []byte, size int, letter, version byte) bool {
	return len(value) == size && value[0] == 'T' && value[1] == letter && value[2] == version
}

func encodeSlot(dst []byte, s *slot) {
	putTag(dst, SlotSize, 'G', slotVersion, s.kind<<4|s.algorithm&0x0f)
	binary.LittleEndian.PutUint32(dst[4:], s.fingerprint)
	binary.LittleEndian.PutUint64(dst[8:], s.owner)
	binary.LittleEndian.PutUint64(dst[16:], uint64(s.idleAt))
	for i, v := range s.cells {
		binary.LittleEndian.PutUint64(dst[24+8*i:], uint64(v))
	}
	binary.LittleEndian.PutUint64(dst[48:], uint64(s.stamp))
}

// decodeSlot reads a value written by encodeSlot; ok is false for anything else (a corrupt or
// foreign value, or one of an older layout, which the slot's next writer replaces).
func decodeSlot(value []byte) (s slot, ok bool) {
	if !hasTag(value, SlotSize, 'G', slotVersion) {
		return slot{}, false
	}
	s.kind, s.algorithm = value[3]>>4, value[3]&0x0f
	if s.kind < kindLive || s.kind > kindReleased {
		return slot{}, false
	}
	s.fingerprint = binary.LittleEndian.Uint32(value[4:])
	s.owner = binary.LittleEndian.Uint64(value[8:])
	s.idleAt = int64(binary.LittleEndian.Uint64(value[16:]))
	for i := range s.cells {
		s.cells[i] = int64(binary.LittleEndian.Uint64(value[24+8*i:]))
	}
	s.stamp = int64(binary.LittleEndian.Uint64(value[48:]))
	return s, true
}

// previousLayout reports a slot value of an earlier layout, left by an earlier version of the
// module in the same Envoy process: version 2 (48 bytes, one slot per bucket, before candidate
// slots) or version 3 (a token bucket's level as one int64 of credits, before whole tokens and
// credits).
func previousLayout(value []byte) bool {
	return (len(value) == 48 && value[2] == 2 || len(value) == SlotSize && value[2] == 3) && value[0] == 'T' && value[1] == 'G'

}

// slotKey is the shared-data key of a slot, built in a buffer of the Gate's: it is valid until
// the next call, which is enough for a Store call (see Store).
//
// The buffer keeps the prefix from one call to the next, and the index is written after it in
// lower-case hexadecimal (strconv.FormatUint(index, 16)) a digit at a time: on the request path
// this runs for every read and write, and appending with strconv costs several calls in Go's Wasm.
// The key of the slot last named is still in the buffer: a write after the read of the same slot,
// the common case, takes it as it is (a check small enough to inline, so no call at all).
func (g *Gate) slotKey(index uint64) string {
	if index+1 == g.slotBufIndex {
		return unsafe.String(unsafe.SliceData(g.slotBuf), len(g.slotBuf))
	}
	return g.writeSlotKey(index)
}

func (g *Gate) writeSlotKey(index uint64) string {
	g.slotBufIndex = index + 1
	n := len(g.slotPrefix)
	if len(g.slotBuf) < n { // the first call; nothing else writes the buffer
		g.slotBuf = append(g.slotBuf[:0], g.slotPrefix...)
	}
	digits := 1
	for rest := index >> 4; rest != 0; rest >>= 4 {
		digits++
	}
	buf := g.slotBuf[:n]
	for range digits {
		buf = append(buf, 0)
	}
	for i := len(buf) - 1; i >= n; i-- {
		buf[i] = "0123456789abcdef"[index&15]
		index >>= 4
	}
	g.slotBuf = buf
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// keyOf is the shared-data key of the bucket an applied limit is decided on.
func (g *Gate) keyOf(l *limit, index uint64) string {
	if index == overflowSlot {
		return l.overflowKey
	}
	return g.slotKey(index)
}

// candidateSlots are the slots a bucket may live in, in the order they are tried: distinct,
// the first one owner mod size, the others from further mixes of the owner (which is already
// a keyed hash, so clients cannot choose them).
func candidateSlots(owner uint64, size, choices int) (slots [maxChoices]uint64) {
	n, h := uint64(size), owner
	for i := 0; i < choices; i++ {
		index := h % n
	again:
		for j := 0; j < i; j++ {
			if slots[j] == index {
				index = (index + 1) % n
				goto again
			}
		}
		slots[i] = index
		h = mix64(h + 0x9e3779b97f4a7c15)
	}
	return slots
}

// mix64 is the finalizer of SplitMix64: every output bit depends on every input bit.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
