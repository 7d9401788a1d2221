// Package probes is what the surface and glue probes (bench/testdata/surface, bench/testdata/glue)
// share, so that both do the same between their crossings: the key taken as the last header, the
// keys answered 429 remembered, and Tollgate's reply for the benchmarks' limit. The direct-decision
// probe (bench/testdata/direct) takes the slot's size and the reply's details from it.
package probes

// SlotSize is the length of one slot of Tollgate's key table (admission.SlotSize): a row holding
// one bucket, what Tollgate reads and writes for each of the benchmarks' known keys.
const SlotSize = 56

// The reply, Tollgate's for the benchmark's limit: its headers in the ABI's encoding of header
// pairs (a count, each name's and value's size, then each NUL-terminated), its body and its
// details.
const (
	ReplyHeaders = "\x02\x00\x00\x00\x0b\x00\x00\x00\x05\x00\x00\x00\x0c\x00\x00\x00\x19\x00\x00\x00" +
		"retry-after\x0086400\x00content-type\x00text/plain; charset=utf-8\x00"
	ReplyBody = "Too Many Requests: retry after 86400 s\n"
	Details   = "tollgate_rate_limited"
)

// The keys answered 429, by a hash of each, in open addressing: every key the benchmarks answer
// keeps its place, as each keeps its bucket in Tollgate's memory (4,096 buckets in sets of 4).
var answeredKeys [1 << 16]uint64

var spare uint64

// Answered is key's place among the keys answered, and key's hash: its own place, or an empty
// one to take (or, with no empty place among the 64 after its hash's, never in the benchmarks, a
// spare one). A key was answered when its place holds its hash.
func Answered(key []byte) (*uint64, uint64) {
	h := hash(key)
	for i := range uint64(64) {
		p := &answeredKeys[(h+i)%uint64(len(answeredKeys))]
		if *p == h || *p == 0 {
			return p, h
		}
	}
	return &spare, h
}

// hash is FNV-1a of key, never 0 (the hash of no key answered).
func hash(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range key {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return h | 1
}

// LastValue is the value of the last header in the ABI's encoding of header pairs: the value
// ends one byte before the data, and its size is the last of the sizes. Nil for anything shorter
// than that says.
func LastValue(pairs []byte) []byte {
	if len(pairs) < 12 {
		return nil
	}
	count := int(le32(pairs))
	if count == 0 || 4+8*count > len(pairs) {
		return nil
	}
	size := int(le32(pairs[4+8*count-4:]))
	end := len(pairs) - 1
	if size > end-(4+8*count) {
		return nil
	}
	return pairs[end-size : end]
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
