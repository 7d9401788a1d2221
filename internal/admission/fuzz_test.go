package admission

import (
	"testing"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// FuzzDecodeState: any bytes under our key decode to a state of the right limit or are refused;
// never a panic, and what decodes re-encodes to the same bytes.
func FuzzDecodeState(f *testing.F) {
	var valid [StateSize]byte
	EncodeState(valid[:], 7, limiter.State{Level: 5, Last: 9})
	f.Add(valid[:], uint32(7))
	f.Fuzz(func(t *testing.T, value []byte, fingerprint uint32) {
		s, ok := DecodeState(value, fingerprint)
		if !ok {
			return
		}
		var again [StateSize]byte
		EncodeState(again[:], fingerprint, s)
		if string(again[:]) != string(value) {
			t.Fatalf("decode/encode changed %x into %x", value, again)
		}
	})
}
