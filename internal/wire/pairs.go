package wire

import (
	"encoding/binary"
	"unsafe"
)

// EncodePairs serializes header pairs in the proxy-wasm map format (spec "Serialization"):
// u32 count, count × (u32 key length, u32 value length), then each key and value followed by NUL.
// All integers are little-endian.
func EncodePairs(pairs [][2]string) []byte { return AppendPairs(nil, pairs) }

// AppendPairs appends the serialization of pairs (see EncodePairs) to dst.
func AppendPairs(dst []byte, pairs [][2]string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(pairs)))
	return appendData(appendSizes(dst, pairs), pairs)
}

func appendSizes(dst []byte, pairs [][2]string) []byte {
	for _, p := range pairs {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(p[0])))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(p[1])))
	}
	return dst
}

func appendData(dst []byte, pairs [][2]string) []byte {
	for _, p := range pairs {
		dst = append(dst, p[0]...)
		dst = append(dst, 0)
		dst = append(dst, p[1]...)
		dst = append(dst, 0)
	}
	return dst
}

// PairsTemplate is a header map serialized once but for its first value, which each use fills
// in: a local reply whose headers differ only in that value (a rejection's Retry-After) is
// encoded with a few copies instead of pair by pair.
type PairsTemplate struct {
	sizes []byte // every pair's sizes (8 bytes a pair), the first value's as 0
	first []byte // the first name and its NUL
	rest  []byte // the first value's NUL, then the other pairs' names and values
}

// NewPairsTemplate serializes pairs, of which there is at least one, but for the first value.
func NewPairsTemplate(pairs [][2]string) PairsTemplate {
	pairs = append([][2]string{{pairs[0][0], ""}}, pairs[1:]...)
	data := appendData(nil, pairs)
	return PairsTemplate{sizes: appendSizes(nil, pairs),
		first: data[:len(pairs[0][0])+1], rest: data[len(pairs[0][0])+1:]}
}

// Append appends to dst what AppendPairs would for the template's pairs with value as the first
// value, followed by more.
func (t *PairsTemplate) Append(dst []byte, value string, more [][2]string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(t.sizes)/8+len(more)))
	at := len(dst)
	dst = append(dst, t.sizes...)
	binary.LittleEndian.PutUint32(dst[at+4:], uint32(len(value)))
	dst = appendSizes(dst, more)
	dst = append(dst, t.first...)
	dst = append(dst, value...)
	dst = append(dst, t.rest...)
	return appendData(dst, more)
}

// DecodePairs parses the map format. It is strict like Envoy's host: a truncated buffer, a
// missing NUL or trailing bytes yield ok == false. An empty buffer is an empty map.
func DecodePairs(buf []byte) (pairs [][2]string, ok bool) {
	if len(buf) == 0 {
		return nil, true
	}
	if len(buf) < 4 {
		return nil, false
	}
	count := binary.LittleEndian.Uint32(buf)
	if uint64(count)*8 > uint64(len(buf)-4) {
		return nil, false
	}
	sizes := buf[4 : 4+8*int(count)]
	data := buf[4+8*int(count):]
	// One copy of the names and values, which the pairs share: one allocation, not two a pair.
	text := string(data)
	pairs = make([][2]string, 0, count)
	at := uint64(0)
	for i := 0; i < int(count); i++ {
		keyLen := uint64(binary.LittleEndian.Uint32(sizes[8*i:]))
		valueLen := uint64(binary.LittleEndian.Uint32(sizes[8*i+4:]))
		if keyLen+valueLen+2 > uint64(len(text))-at {
			return nil, false
		}
		valueAt, end := at+keyLen+1, at+keyLen+1+valueLen
		if text[valueAt-1] != 0 || text[end] != 0 {
			return nil, false
		}
		pairs = append(pairs, [2]string{text[at : valueAt-1], text[valueAt:end]})
		at = end + 1
	}
	if at != uint64(len(text)) {
		return nil, false
	}
	return pairs, true
}

// PairsValue returns the first value of key in buf, a map in the format EncodePairs writes, as a
// slice of buf: no copy, no allocation. Read on every request for each header a decision needs, it
// walks the entries by their sizes, checking only those of the key's length: the first entry named
// key answers if it is whole (its name and value in buf, each followed by NUL), and otherwise the
// key is not found; an entry that ends past buf, and so every one after it, is never an answer. A
// map DecodePairs would refuse for another entry still answers for a whole one. A map of 2^30
// entries or more, beyond any a Wasm memory can hold, is not searched.
//
// It reads buf through a pointer, where the checks it makes bound every read: in upstream Go's
// Wasm each bounds check the compiler would add is a branch and a place the function can be
// resumed at, and every read of memory is a check of its own in wazero's compiled code. The walk
// runs on every request, over every header, once for each name the request path looks up (under
// the lean shape twice: the key's, then the shadow marker's or a rejection's content-type), so an
// entry of another name's length costs one read of its sizes and nothing more.
func PairsValue(buf []byte, key string) (value []byte, found bool) {
	if len(buf) < 4 {
		return nil, false
	}
	count := uint64(binary.LittleEndian.Uint32(buf))
	if count*8 > uint64(len(buf)-4) || count >= 1<<30 {
		return nil, false
	}
	base, n := unsafe.Pointer(unsafe.SliceData(buf)), uint64(len(buf))
	// sizes is the offset of the entry's two sizes, which stays within buf; at is the offset of
	// its name, which may pass buf's end: only an entry of the key's length is checked against it.
	// An entry adds at most 2^33 to at, so with fewer than 2^30 entries at stays below 2^64.
	sizes, at := uint64(4), 4+8*count
	for ; count > 0; count-- {
		s := binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(base, sizes))[:])
		keyLen, valueLen := s&0xffffffff, s>>32
		sizes += 8
		end := at + keyLen + valueLen + 2
		if keyLen == uint64(len(key)) {
			if end > n {
				return nil, false
			}
			if sameName(unsafe.Add(base, at), key) {
				if *(*byte)(unsafe.Add(base, at+keyLen)) != 0 || *(*byte)(unsafe.Add(base, end-1)) != 0 {
					return nil, false
				}
				return buf[at+keyLen+1 : end-1], true
			}
		}
		at = end
	}
	return nil, false
}

// sameName is whether the len(key) bytes at p, which are readable, are key: compared eight bytes
// at a time (the last eight overlapping the ones before), where a loop over bytes would go
// through the function's dispatch loop for each byte in upstream Go's Wasm.
func sameName(p unsafe.Pointer, key string) bool {
	k, n := unsafe.Pointer(unsafe.StringData(key)), uintptr(len(key))
	switch {
	case n >= 8:
		for i := uintptr(0); i < n-8; i += 8 {
			if word64(p, i) != word64(k, i) {
				return false
			}
		}
		return word64(p, n-8) == word64(k, n-8)
	case n >= 4:
		return word32(p, 0) == word32(k, 0) && word32(p, n-4) == word32(k, n-4)
	}
	for i := uintptr(0); i < n; i++ {
		if *(*byte)(unsafe.Add(p, i)) != *(*byte)(unsafe.Add(k, i)) {
			return false
		}
	}
	return true
}

// word64 and word32 read the bytes at p+i as one number, to compare: one load where the
// architecture allows unaligned ones (Wasm does).
func word64(p unsafe.Pointer, i uintptr) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(p, i))[:])
}

func word32(p unsafe.Pointer, i uintptr) uint32 {
	return binary.LittleEndian.Uint32((*[4]byte)(unsafe.Add(p, i))[:])
}

// PropertyPath joins property path segments with NUL, the form proxy_get_property expects.
func PropertyPath(segments []string) []byte { return AppendPropertyPath(nil, segments) }

// AppendPropertyPath appends the encoded path (see PropertyPath) to dst.
func AppendPropertyPath(dst []byte, segments []string) []byte {
	for i, s := range segments {
		if i > 0 {
			dst = append(dst, 0)
		}
		dst = append(dst, s...)
	}
	return dst
}
