package wasmdata

import (
	"encoding/binary"
	"errors"
)

// The stream is a run of tokens, each a literal run and then, unless the stream ends, a copy:
//
//	literals: length (unsigned LEB128), then that many bytes, written at the cursor
//	copy:     length, distance (both unsigned LEB128): the length bytes written distance bytes
//	          before the cursor are written again at it; distance 0 skips length bytes, which
//	          memory holds as zeros already
//
// Every copy's distance is at least its length, so that the bytes it reads were all written
// before it: the unpacker copies them with memory.copy, whose overlapping copies would read
// bytes it has just written differently from a byte-by-byte copy.

// The compressor's parameters. A copy is at least minLength bytes: each token costs the unpacker
// a few nanoseconds, and shorter copies would pack Tollgate's module 24 KB smaller but with half as
// many tokens again, unpacking slower than the engine writes the segments Pack replaced
// (BENCHMARKS.md, section 5). The compressor finds earlier places of the next 4 bytes in chains
// by their hash (hashBits wide) and tries maxChain of them per position: more pack a little
// better, more slowly.
const (
	minZeros  = 4 // a run of zeros skipped, not written
	minLength = 8
	hashBits  = 16
	maxChain  = 64
)

// compress encodes image, the memory the unpacker writes from its first byte, as a stream.
func compress(image []byte) []byte {
	var out []byte
	head := make([]int32, 1<<hashBits)
	for i := range head {
		head[i] = -1
	}
	prev := make([]int32, len(image))
	insert := func(i int) {
		if i+4 <= len(image) {
			h := hash4(image[i:])
			prev[i], head[h] = head[h], int32(i)
		}
	}
	literals := 0 // where the pending literal run starts
	for i := 0; i < len(image); {
		if image[i] == 0 {
			j := i
			for j < len(image) && image[j] == 0 {
				j++
			}
			if j-i >= minZeros {
				out = appendToken(out, image[literals:i], j-i, 0)
				i, literals = j, j
				continue
			}
		}
		length, distance := 0, 0
		if i+4 <= len(image) {
			for c, tries := head[hash4(image[i:])], 0; c >= 0 && tries < maxChain; c, tries = prev[c], tries+1 {
				d := i - int(c)
				n := 0
				for limit := min(d, len(image)-i); n < limit && image[int(c)+n] == image[i+n]; n++ {
				}
				if n > length {
					length, distance = n, d
				}
			}
		}
		// A copy costs its two numbers and the next literal run's length, which a longer literal
		// run would not.
		if length >= minLength && length > uvarintLen(length)+uvarintLen(distance)+1 {
			out = appendToken(out, image[literals:i], length, distance)
			for k := i; k < i+length; k++ {
				insert(k)
			}
			i += length
			literals = i
			continue
		}
		insert(i)
		i++
	}
	out = binary.AppendUvarint(out, uint64(len(image)-literals))
	return append(out, image[literals:]...)
}

func appendToken(out, literals []byte, length, distance int) []byte {
	out = binary.AppendUvarint(out, uint64(len(literals)))
	out = append(out, literals...)
	out = binary.AppendUvarint(out, uint64(length))
	return binary.AppendUvarint(out, uint64(distance))
}

func hash4(b []byte) uint32 {
	return (binary.LittleEndian.Uint32(b) * 2654435761) >> (32 - hashBits)
}

func uvarintLen(v int) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

var errStream = errors.New("the data stream is malformed")

// expand decodes a stream into size bytes, as the unpacker does in memory: the reference the
// tests hold the unpacker to, and the check Pack makes of its own output.
func expand(stream []byte, size int) ([]byte, error) {
	image := make([]byte, 0, size)
	next := func() (int, bool) {
		v, n := binary.Uvarint(stream)
		if n <= 0 || v > uint64(size) {
			return 0, false
		}
		stream = stream[n:]
		return int(v), true
	}
	for {
		n, ok := next()
		if !ok || n > len(stream) || len(image)+n > size {
			return nil, errStream
		}
		image, stream = append(image, stream[:n]...), stream[n:]
		if len(stream) == 0 {
			break
		}
		length, ok1 := next()
		distance, ok2 := next()
		if !ok1 || !ok2 || len(image)+length > size || distance > len(image) || distance != 0 && distance < length {
			return nil, errStream
		}
		if distance == 0 {
			image = append(image, make([]byte, length)...)
		} else {
			image = append(image, image[len(image)-distance:len(image)-distance+length]...)
		}
	}
	if len(image) != size {
		return nil, errStream
	}
	return image, nil
}
