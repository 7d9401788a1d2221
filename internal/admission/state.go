package admission

import (
	"encoding/binary"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// The value stored per key, little-endian, StateSize bytes:
//
//	offset 0  [2]byte  magic "TG"
//	offset 2  uint8    layout version (stateVersion)
//	offset 3  uint8    reserved, 0
//	offset 4  uint32   fingerprint of the limit the state belongs to (limiter.Bucket.Fingerprint)
//	offset 8  int64    level, in the limit's credits
//	offset 16 int64    last update, monotonic nanoseconds
//
// A value of another size, magic, version or fingerprint is not ours to interpret (a corrupt
// value, an older layout, or a limit whose configuration changed): it is replaced by a full
// bucket, the same state a key that was never seen gets.
const (
	StateSize    = 24
	stateVersion = 1
)

// EncodeState writes s for a limit with the given fingerprint into dst, which must hold
// StateSize bytes.
func EncodeState(dst []byte, fingerprint uint32, s limiter.State) {
	_ = dst[StateSize-1]
	dst[0], dst[1], dst[2], dst[3] = 'T', 'G', stateVersion, 0
	binary.LittleEndian.PutUint32(dst[4:], fingerprint)
	binary.LittleEndian.PutUint64(dst[8:], uint64(s.Level))
	binary.LittleEndian.PutUint64(dst[16:], uint64(s.Last))
}

// DecodeState reads a value written by EncodeState for the same fingerprint; ok is false for
// anything else.
func DecodeState(value []byte, fingerprint uint32) (s limiter.State, ok bool) {
	if len(value) != StateSize || value[0] != 'T' || value[1] != 'G' || value[2] != stateVersion || value[3] != 0 {
		return limiter.State{}, false
	}
	if binary.LittleEndian.Uint32(value[4:]) != fingerprint {
		return limiter.State{}, false
	}
	s.Level = int64(binary.LittleEndian.Uint64(value[8:]))
	s.Last = int64(binary.LittleEndian.Uint64(value[16:]))
	return s, true
}
