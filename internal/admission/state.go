package admission

import (
	"encoding/binary"
)

// The value stored per key, little-endian, StateSize bytes:
//
//	offset 0  [2]byte  magic "TG"
//	offset 2  uint8    layout version (stateVersion)
//	offset 3  uint8    reserved, 0
//	offset 4  uint32   fingerprint of the limit the state belongs to (its algorithm and numbers)
//	offset 8  int64    cell 0 ┐ token bucket: level (credits), last update (ns), 0
//	offset 16 int64    cell 1 ├ windows: window start (ns), count, previous window's count
//	offset 24 int64    cell 2 ┘
//
// A value of another size, magic, version or fingerprint is not ours to interpret (a corrupt
// value, an older layout, or a limit whose configuration changed): it is replaced by the state
// of a key never seen, a full bucket or an empty window.
const (
	StateSize    = 32
	stateVersion = 1
)

// encodeState writes c for a limit with the given fingerprint into dst (StateSize bytes).
func encodeState(dst []byte, fingerprint uint32, c cells) {
	_ = dst[StateSize-1]
	dst[0], dst[1], dst[2], dst[3] = 'T', 'G', stateVersion, 0
	binary.LittleEndian.PutUint32(dst[4:], fingerprint)
	for i, v := range c {
		binary.LittleEndian.PutUint64(dst[8+8*i:], uint64(v))
	}
}

// decodeState reads a value written by encodeState for the same fingerprint; ok is false for
// anything else.
func decodeState(value []byte, fingerprint uint32) (c cells, ok bool) {
	if len(value) != StateSize || value[0] != 'T' || value[1] != 'G' || value[2] != stateVersion || value[3] != 0 {
		return cells{}, false
	}
	if binary.LittleEndian.Uint32(value[4:]) != fingerprint {
		return cells{}, false
	}
	for i := range c {
		c[i] = int64(binary.LittleEndian.Uint64(value[8+8*i:]))
	}
	return c, true
}
