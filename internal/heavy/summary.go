package heavy

import "encoding/binary"

// Summary is the mergeable form of one or more Tables: for every key, Count ≤ f ≤ Count + Delta
// (see the package comment).
type Summary struct {
	// Events is N, the events that went into the summary.
	Events uint64
	// Delta bounds how many more times than its Count any key was counted.
	Delta   uint64
	entries []entry
}

// Entry is one key of a Summary.
type Entry struct {
	ID    uint64
	Count uint64
	Key   string
}

// Entries are the keys held, by count, largest first (ties by hash).
func (s *Summary) Entries() []Entry {
	out := make([]Entry, len(s.entries))
	for i := range s.entries {
		out[i] = Entry{ID: s.entries[i].id, Count: s.entries[i].count, Key: s.entries[i].Key()}
	}
	// By insertion: at most a few hundred keys, and the module links no generic sort.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && before(&out[j], &out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func before(a, b *Entry) bool { return a.Count > b.Count || a.Count == b.Count && a.ID < b.ID }

// kthLargest is the (k+1)-th largest count (index k when sorted largest first), found by
// counting for each entry how many are larger: quadratic, over at most 2k entries.
func kthLargest(entries []entry, k int) uint64 {
	for i := range entries {
		larger, equal := 0, 0
		for j := range entries {
			switch {
			case entries[j].count > entries[i].count:
				larger++
			case entries[j].count == entries[i].count:
				equal++
			}
		}
		if larger <= k && k < larger+equal {
			return entries[i].count
		}
	}
	return 0
}

// AddTable adds what a table counted and keeps at most k keys.
func (s *Summary) AddTable(t *Table, k int) {
	m := t.smallest()
	s.Events += t.n
	s.Delta += m
	for i := range t.entries {
		if c := t.entries[i].count - m; c > 0 {
			e := t.entries[i]
			e.count = c
			s.add(&e)
		}
	}
	s.reduce(k)
}

// AddSummary adds another summary (of other events) and keeps at most k keys.
func (s *Summary) AddSummary(o *Summary, k int) {
	s.Events += o.Events
	s.Delta += o.Delta
	for i := range o.entries {
		e := o.entries[i]
		s.add(&e)
	}
	s.reduce(k)
}

func (s *Summary) add(e *entry) {
	for i := range s.entries {
		if s.entries[i].id == e.id {
			s.entries[i].count += e.count
			if e.keyLen > 0 {
				s.entries[i].keyLen, s.entries[i].key = e.keyLen, e.key
			}
			return
		}
	}
	s.entries = append(s.entries, *e)
}

// reduce keeps at most k keys: the (k+1)-th largest count is subtracted from every count, and
// the counts left at 0 dropped.
func (s *Summary) reduce(k int) {
	if len(s.entries) <= k {
		return
	}
	v := kthLargest(s.entries, k)
	kept := s.entries[:0]
	for _, e := range s.entries {
		if e.count > v {
			e.count -= v
			kept = append(kept, e)
		}
	}
	s.entries = kept
	s.Delta += v
}

// Encoding: "TGh1", events, delta, the number of entries, then each entry: id, count, key length
// and key.
const (
	summaryMagic = "TGh1"
	headerSize   = 4 + 8 + 8 + 4
)

// AppendTo appends the summary's encoding.
func (s *Summary) AppendTo(dst []byte) []byte {
	dst = append(dst, summaryMagic...)
	dst = binary.LittleEndian.AppendUint64(dst, s.Events)
	dst = binary.LittleEndian.AppendUint64(dst, s.Delta)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.entries)))
	for i := range s.entries {
		e := &s.entries[i]
		dst = binary.LittleEndian.AppendUint64(dst, e.id)
		dst = binary.LittleEndian.AppendUint64(dst, e.count)
		dst = append(dst, e.keyLen)
		dst = append(dst, e.key[:e.keyLen]...)
	}
	return dst
}

// Decode reads a summary AppendTo wrote at the start of b, with what follows it; ok is false
// for anything else. At most maxEntries entries are accepted.
func Decode(b []byte, maxEntries int) (s Summary, rest []byte, ok bool) {
	if len(b) < headerSize || string(b[:4]) != summaryMagic {
		return Summary{}, nil, false
	}
	s.Events = binary.LittleEndian.Uint64(b[4:])
	s.Delta = binary.LittleEndian.Uint64(b[12:])
	n := int(binary.LittleEndian.Uint32(b[20:]))
	if n > maxEntries {
		return Summary{}, nil, false
	}
	b = b[headerSize:]
	s.entries = make([]entry, n)
	for i := range s.entries {
		if len(b) < 17 {
			return Summary{}, nil, false
		}
		e := &s.entries[i]
		e.id, e.count, e.keyLen = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), b[16]
		if int(e.keyLen) > MaxKeyBytes || len(b) < 17+int(e.keyLen) {
			return Summary{}, nil, false
		}
		copy(e.key[:], b[17:17+int(e.keyLen)])
		b = b[17+int(e.keyLen):]
	}
	return s, b, true
}
