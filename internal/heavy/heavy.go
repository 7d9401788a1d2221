// Package heavy keeps the heavy hitters of a stream of keys in fixed memory: a worker counts
// its own stream with Space-Saving (Table), and hands what it counted to a Summary that all
// workers merge into (Summary.Add), the way Misra-Gries summaries merge.
//
// The guarantee, for a Summary of at most k keys that N events went into (from any number of
// Tables of k entries, in any number of merges): every key's true count f lies within
//
//	Count ≤ f ≤ Count + Delta,  with Delta ≤ N/k,
//
// where Count is 0 for a key the Summary does not hold. So every key counted more than N/k
// times is held, and its count is known to within N/k.
//
// Why: a Table of k entries that n events went into holds counters that add up to n, each at
// least the key's count and at most its count plus the table's smallest counter m (Metwally,
// Agrawal and El Abbadi, "Efficient computation of frequent and top-k elements in data
// streams", 2005); a key not held was counted at most m times. Added to a Summary as each
// counter minus m, with Delta raised by m, it keeps Count ≤ f ≤ Count + Delta. A Summary over k
// keys drops to k by subtracting the (k+1)-th largest count v from every count (Agarwal et al.,
// "Mergeable summaries", 2012), which keeps the bounds with Delta raised by v. Throughout,
// the counts held add up to at most N - k·Delta (a Table adds n - k·m of counts and m of Delta;
// a reduction removes at least (k+1)·v of counts and adds v), hence Delta ≤ N/k.
//
// The package imports nothing: the module links it.
package heavy

// MaxKeyBytes bounds the key kept beside each hash (longer ones are cut).
const MaxKeyBytes = 64

// entry is one key: its hash, its counter and, if kept, the key.
type entry struct {
	id     uint64
	count  uint64
	keyLen uint8
	key    [MaxKeyBytes]byte
}

// Key is the key kept with the entry (empty when keys are not kept).
func (e *entry) Key() string { return string(e.key[:e.keyLen]) }

func (e *entry) setKey(key []byte) {
	e.keyLen = uint8(copy(e.key[:], key))
}

// Table is one worker's Space-Saving table of k entries, allocated once: Add never allocates.
type Table struct {
	entries []entry
	k       int
	n       uint64
	// evicted: a key took another's entry since the table was emptied; until then every
	// counter is exact.
	evicted bool
}

// NewTable returns a table of k ≥ 1 entries.
func NewTable(k int) *Table {
	return &Table{entries: make([]entry, 0, max(k, 1)), k: max(k, 1)}
}

// Add counts one event of the key with hash id; key is kept beside it (nil keeps none).
func (t *Table) Add(id uint64, key []byte) {
	t.n++
	smallest := -1
	for i := range t.entries {
		e := &t.entries[i]
		if e.id == id {
			e.count++
			return
		}
		if smallest < 0 || e.count < t.entries[smallest].count {
			smallest = i
		}
	}
	if len(t.entries) < t.k {
		t.entries = append(t.entries, entry{id: id, count: 1})
		t.entries[len(t.entries)-1].setKey(key)
		return
	}
	// The key replaces the smallest counter, whose count it inherits: it may have been
	// counted that often before, unseen.
	e := &t.entries[smallest]
	e.id, e.count, t.evicted = id, e.count+1, true
	e.setKey(key)
}

// Events is the number of events added since the table was last emptied.
func (t *Table) Events() uint64 { return t.n }

// Reset empties the table.
func (t *Table) Reset() { t.entries, t.n, t.evicted = t.entries[:0], 0, false }

// smallest is the smallest counter of a table that evicted a key, 0 for one that did not (whose
// counters are then exact).
func (t *Table) smallest() uint64 {
	if !t.evicted {
		return 0
	}
	m := t.entries[0].count
	for i := range t.entries {
		m = min(m, t.entries[i].count)
	}
	return m
}
