package admission

import (
	"testing"
)

// FuzzDecodeState: any bytes under our key decode to a state of the right limit or are refused;
// never a panic, and what decodes re-encodes to the same bytes.
func FuzzDecodeState(f *testing.F) {
	var valid [StateSize]byte
	encodeState(valid[:], 7, cells{5, 9, 0})
	f.Add(valid[:], uint32(7))
	f.Fuzz(func(t *testing.T, value []byte, fingerprint uint32) {
		s, ok := decodeState(value, fingerprint)
		if !ok {
			return
		}
		var again [StateSize]byte
		encodeState(again[:], fingerprint, s)
		if string(again[:]) != string(value) {
			t.Fatalf("decode/encode changed %x into %x", value, again)
		}
	})
}
