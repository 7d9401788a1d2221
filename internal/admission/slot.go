package admission

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"
)

// The key table's values are rows: up to rowSlots slots one after the other, each SlotSize
// bytes, under one shared-data key (rowKey). A row is as long as its last slot ever written (the
// slots after it hold nothing), so a row of one bucket is one slot long. A slot that holds no
// bucket is zero (or anything that does not decode). The overflow bucket is one slot under a key
// of its own.
//
// A row some key of which (a key whose owner selects the row) drew from an overflow bucket, which
// only a full row's keys do, is followed by its drawers, markSize bytes: the union of their
// drawerMarks, little-endian, never cleared. A new bucket whose marks are not all there has no
// draw that stands, and does not read the overflow bucket (Gate.read).
//
// A slot, little-endian, SlotSize bytes:
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
//	offset 40 int64    cell 2 ┘
//	offset 48 int64    stamp: the latest now of any write to this slot
const (
	SlotSize    = 56
	slotVersion = 4
	markSize    = 8 // a full row's drawers, after its slots
)

// kindLive marks a slot that holds a bucket; a slot of any other kind holds none.
const kindLive = 1

const (
	// defaultRowSlots is the number of slots in a row, the slots every bucket whose owner
	// selects the row may take. With a fraction α of the table in use, a new key finds its row
	// full with the probability that a Poisson variable of mean 8α reaches 8: about 2·10⁻⁶ at
	// 10 % load (TestRowFigures measures rows of 4, 8 and 16 slots).
	defaultRowSlots = 8
	maxRowSlots     = 16
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
	putTag(dst, SlotSize, 'G', slotVersion, slotKind(s.kind, s.algorithm))
	binary.LittleEndian.PutUint32(dst[4:], s.fingerprint)
	binary.LittleEndian.PutUint64(dst[8:], s.owner)
	binary.LittleEndian.PutUint64(dst[16:], uint64(s.idleAt))
	for i, v := range s.cells {
		putCell(dst, i, v)
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
	if s.kind != kindLive {
		return slot{}, false
	}
	s.fingerprint = binary.LittleEndian.Uint32(value[4:])
	s.owner = binary.LittleEndian.Uint64(value[8:])
	s.idleAt = int64(binary.LittleEndian.Uint64(value[16:]))
	for i := range s.cells {
		s.cells[i] = cell(value, i)
	}
	s.stamp = int64(binary.LittleEndian.Uint64(value[48:]))
	return s, true
}

// slotKind is a slot's fourth byte: its kind and its algorithm.
func slotKind(kind, algorithm uint8) uint8 { return kind<<4 | algorithm&0x0f }

// cell reads cell i of a slot (value is SlotSize bytes); putCell writes it. One cell each, so
// that the Wasm build inlines them (three would be past the inliner's budget there, and a call on
// every request).
func cell(value []byte, i int) int64 { return int64(binary.LittleEndian.Uint64(value[24+8*i:])) }

func putCell(dst []byte, i int, v int64) { binary.LittleEndian.PutUint64(dst[24+8*i:], uint64(v)) }

// rowKey is the shared-data key of a row, built in a buffer of the Gate's: it is valid until
// the next call, which is enough for a Store call (see Store).
//
// The buffer keeps the prefix from one call to the next, and the index is written after it in
// lower-case hexadecimal (strconv.FormatUint(index, 16)), all its digits at once: on
// the request path this runs for every read and write, and appending with strconv costs several
// calls in Go's Wasm, a loop over the digits a pass through the function's dispatch loop for
// each. The key of the row last named is still in the buffer: a write after the read of the same
// row, the common case, takes it as it is (a check small enough to inline, so no call at all).
func (g *Gate) rowKey(index uint64) string {
	if index+1 == g.rowBufIndex {
		return unsafe.String(unsafe.SliceData(g.rowBuf), len(g.rowBuf))
	}
	return g.writeRowKey(index)
}

func (g *Gate) writeRowKey(index uint64) string {
	g.rowBufIndex = index + 1
	n := len(g.rowPrefix)
	if cap(g.rowBuf) < n+16 { // the first call; nothing else writes the buffer
		g.rowBuf = append(make([]byte, 0, n+16), g.rowPrefix...)
	}
	digits := (bits.Len64(index|1) + 3) / 4
	buf := g.rowBuf[:n+digits]
	if digits <= 8 {
		// The eight digits of 32 bits, each computed in its own byte of one number, with no loop
		// and no table (and no function: one would not be inlined): the nibbles spread one to a
		// byte, the lowest in the lowest byte, then the bytes reversed, so that the highest digit
		// comes first.
		x := index
		x = (x | x<<16) & 0x0000ffff0000ffff
		x = (x | x<<8) & 0x00ff00ff00ff00ff
		x = (x | x<<4) & 0x0f0f0f0f0f0f0f0f
		x = bits.ReverseBytes64(x)
		// A byte is '0' plus its nibble, and 'a'-'0'-10 more where the nibble is 10 or more
		// (where adding 6 carries into the byte's fifth bit).
		letters := ((x + 0x0606060606060606) >> 4) & 0x0101010101010101
		x += 0x3030303030303030 + letters*('a'-'0'-10)
		// Written little-endian, the leading zeros shifted out; the bytes past the digits are
		// spare.
		binary.LittleEndian.PutUint64(g.rowBuf[n:n+8], x>>(64-8*digits))
	} else { // beyond any table max_keys allows (at most 10^7 slots): a digit at a time
		for i := len(buf) - 1; i >= n; i-- {
			buf[i] = "0123456789abcdef"[index&15]
			index >>= 4
		}
	}
	g.rowBuf = buf
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// rowOf is the row whose slots owner's bucket may take: the owner, a keyed hash that clients
// cannot choose, modulo the number of rows.
func (p *Policy) rowOf(owner uint64) uint64 {
	return owner % p.rowCount
}

// setRowSlots sets the slots per row, and the number of rows: MaxKeys slots, rounded up to whole
// rows. (Unsigned: Go's Wasm divides signed integers in a runtime call.)
func (p *Policy) setRowSlots(n int) {
	p.rowSlots = n
	p.rowCount = (uint64(p.table.MaxKeys) + uint64(n) - 1) / uint64(n)
}

// rowSize is the length of a row whose every slot was written.
func (p *Policy) rowSize() int { return p.rowSlots * SlotSize }

// isRow reports whether value can be a row: whole slots, at least one, at most rowSlots, or a
// full row followed by its drawers.
func (p *Policy) isRow(value []byte) bool {
	n := len(value)
	return n > 0 && n%SlotSize == 0 && n <= p.rowSize() || n == p.rowSize()+markSize
}

// rowDrawers are the drawers after row's slots (row a row: isRow), 0 if it has none. (Small
// enough to inline: it runs for every new bucket in a row written before.)
func rowDrawers(row []byte) uint64 {
	if len(row)%SlotSize == 0 {
		return 0
	}
	return binary.LittleEndian.Uint64(row[len(row)-markSize:])
}

// bucketIn finds owner's bucket in row, a row's value: its place in the row and the slot.
// (Gate.read scans in line: it runs on every request, and this would be one call more.)
func bucketIn(row []byte, owner uint64) (i int, s slot, ok bool) {
	for i = 0; i < len(row)/SlotSize; i++ {
		if s, ok = decodeSlot(row[i*SlotSize : (i+1)*SlotSize]); ok && s.owner == owner {
			return i, s, true
		}
	}
	return 0, slot{}, false
}

// keyOf is the shared-data key of the value that holds slot index: its row, or the limit's
// overflow bucket.
func (g *Gate) keyOf(l *limit, index uint64) string {
	if index == overflowSlot {
		return l.overflowKey
	}
	return g.rowKey(index / uint64(g.rowSlots))
}

// slotIn copies value, read under keyOf(l, index), into the Gate's buffer and returns the copy
// and the part of it that is slot index (all of it for the overflow bucket), for a write of that
// slot alone; ok is false when value is not a row holding that slot (or not a slot).
func (g *Gate) slotIn(index uint64, value []byte) (whole, part []byte, ok bool) {
	at := 0
	if index != overflowSlot {
		at = int(index%uint64(g.rowSlots)) * SlotSize
		ok = g.isRow(value) && at+SlotSize <= len(value)
	} else {
		ok = len(value) == SlotSize
	}
	if !ok {
		return nil, nil, false
	}
	whole = g.buf[:len(value)]
	copy(whole, value)
	return whole, whole[at : at+SlotSize], true
}
