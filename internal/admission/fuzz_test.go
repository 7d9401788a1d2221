package admission

import (
	"testing"
)

// FuzzDecodeSlot: any bytes in a slot decode to a slot or are refused; never a panic, and what
// decodes re-encodes to the same bytes. The same bytes read as a row: a bucket found in it is
// one of its whole slots; a full row that a draw marks is still a row with the same slots and
// at least the drawers it had, and a row that is not full, lengthened by a new bucket, is still
// a row with the slots it had.
func FuzzDecodeSlot(f *testing.F) {
	var valid [SlotSize]byte
	encodeSlot(valid[:], &slot{kind: kindLive, algorithm: 1, fingerprint: 7, owner: 9, idleAt: 11, cells: cells{5, 9, 1}, stamp: 13})
	f.Add(valid[:])
	f.Add(append(make([]byte, SlotSize), valid[:]...))
	p := &Policy{}
	p.setRowSlots(defaultRowSlots)
	f.Fuzz(func(t *testing.T, value []byte) {
		if i, found, ok := bucketIn(value, 9); ok && (found.owner != 9 || (i+1)*SlotSize > len(value)) {
			t.Fatalf("bucketIn found %+v at %d in %d bytes", found, i, len(value))
		}
		if p.isRow(value) {
			slots := len(value) / SlotSize
			r := rowCopy{value: value}
			want := rowDrawers(value)
			if slots == p.rowSlots {
				r.mark(drawerMarks(9))
				want |= drawerMarks(9)
			} else {
				r.take(slots, 1)
			}
			if !p.isRow(r.value) || string(r.value[:slots*SlotSize]) != string(value[:slots*SlotSize]) || rowDrawers(r.value) != want {
				t.Fatalf("marking or lengthening %x gave %x", value, r.value)
			}
		}
		s, ok := decodeSlot(value)
		if !ok {
			return
		}
		var again [SlotSize]byte
		encodeSlot(again[:], &s)
		if string(again[:]) != string(value) {
			t.Fatalf("decode/encode changed %x into %x", value, again)
		}
	})
}
