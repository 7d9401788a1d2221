package heavy

import (
	"math/rand/v2"
	"testing"
)

// TestSummaryBoundsOnZipfStreams feeds skewed (Zipf) streams of keys to several workers' tables,
// merges each table into one summary every so often as the plugin's tick does, and checks the
// package's guarantee against exact counts: Count ≤ f ≤ Count + Delta for every key, Delta ≤
// N/k, and every key counted more than Delta times held.
func TestSummaryBoundsOnZipfStreams(t *testing.T) {
	tests := []struct {
		name                    string
		k, workers, keys, flush int
		s                       float64 // the Zipf exponent: larger is more skewed
		events                  int
	}{
		{"skewed, small table", 8, 2, 10_000, 500, 1.2, 100_000},
		{"skewed, many workers", 32, 8, 100_000, 1000, 1.1, 200_000},
		{"mildly skewed", 16, 4, 1_000, 100, 1.01, 50_000},
		{"one table, never flushed midway", 4, 1, 50, 1 << 30, 2, 20_000},
		{"fewer keys than entries: exact", 64, 3, 40, 777, 1.5, 30_000},
	}
	for seed := uint64(1); seed <= 4; seed++ {
		for _, tt := range tests {
			rng := rand.New(rand.NewPCG(seed, 7))
			zipf := rand.NewZipf(rng, tt.s, 1, uint64(tt.keys-1))
			exact := map[uint64]uint64{}
			tables := make([]*Table, tt.workers)
			for i := range tables {
				tables[i] = NewTable(tt.k)
			}
			var sum Summary
			for i := 0; i < tt.events; i++ {
				id := zipf.Uint64()*0x9e3779b97f4a7c15 + 1 // spread, as hashes are
				exact[id]++
				w := tables[rng.IntN(tt.workers)]
				w.Add(id, nil)
				if w.Events() >= uint64(tt.flush) {
					sum.AddTable(w, tt.k)
					w.Reset()
				}
			}
			for _, w := range tables {
				sum.AddTable(w, tt.k)
			}
			checkBounds(t, tt.name, &sum, exact, tt.k, uint64(tt.events))
			if tt.keys <= tt.k && sum.Delta != 0 {
				t.Errorf("%s: %d keys in %d entries, Delta %d, want exact", tt.name, tt.keys, tt.k, sum.Delta)
			}
		}
	}
}

func checkBounds(t *testing.T, name string, sum *Summary, exact map[uint64]uint64, k int, n uint64) {
	t.Helper()
	if sum.Events != n {
		t.Errorf("%s: %d events, want %d", name, sum.Events, n)
	}
	if sum.Delta*uint64(k) > n {
		t.Errorf("%s: Delta %d > N/k = %d/%d", name, sum.Delta, n, k)
	}
	held := map[uint64]uint64{}
	entries := sum.Entries()
	if len(entries) > k {
		t.Errorf("%s: %d keys held, want at most %d", name, len(entries), k)
	}
	for _, e := range entries {
		held[e.ID] = e.Count
	}
	for id, f := range exact {
		c := held[id]
		if c > f || f > c+sum.Delta {
			t.Errorf("%s: key %x counted %d, summary %d + %d", name, id, f, c, sum.Delta)
		}
	}
	for id := range held {
		if exact[id] == 0 {
			t.Errorf("%s: key %x held but never counted", name, id)
		}
	}
}

// TestSummariesMerge: two summaries of disjoint periods added together keep the guarantee for
// the whole (the view of the current and the previous period).
func TestSummariesMerge(t *testing.T) {
	const k = 8
	rng := rand.New(rand.NewPCG(3, 3))
	zipf := rand.NewZipf(rng, 1.3, 1, 5000)
	exact := map[uint64]uint64{}
	var parts [2]Summary
	for p := range parts {
		table := NewTable(k)
		for i := 0; i < 30_000; i++ {
			id := zipf.Uint64() + 1
			exact[id]++
			table.Add(id, nil)
			if table.Events() == 1000 {
				parts[p].AddTable(table, k)
				table.Reset()
			}
		}
	}
	whole := parts[0]
	whole.AddSummary(&parts[1], k)
	checkBounds(t, "merged", &whole, exact, k, 60_000)
}

// TestTableKeepsKeysAndEncodes: keys kept beside their hashes survive a merge and the encoding;
// a damaged encoding is refused.
func TestTableKeepsKeysAndEncodes(t *testing.T) {
	table := NewTable(3)
	long := make([]byte, 100)
	for i := range long {
		long[i] = 'x'
	}
	for _, add := range []struct {
		id  uint64
		key []byte
	}{{1, []byte("alice")}, {1, []byte("alice")}, {2, []byte("bob")}, {3, long}, {3, long}, {3, long}} {
		table.Add(add.id, add.key)
	}
	var sum Summary
	sum.AddTable(table, 3)
	encoded := sum.AppendTo([]byte("prefix"))[len("prefix"):]
	decoded, rest, ok := Decode(append(encoded, "after"...), 3)
	if !ok || string(rest) != "after" {
		t.Fatalf("decode: ok %v, rest %q", ok, rest)
	}
	got := decoded.Entries()
	if decoded.Events != 6 || decoded.Delta != 0 || len(got) != 3 || got[0].ID != 3 || got[0].Count != 3 ||
		got[0].Key != string(long[:MaxKeyBytes]) || got[1].Key != "alice" || got[1].Count != 2 || got[2].Key != "bob" {
		t.Errorf("decoded %+v: %+v", decoded, got)
	}
	for _, bad := range [][]byte{nil, []byte("TGh2"), encoded[:len(encoded)-1]} {
		if _, _, ok := Decode(bad, 3); ok {
			t.Errorf("Decode(%q) accepted", bad)
		}
	}
	if _, _, ok := Decode(encoded, 2); ok {
		t.Errorf("Decode accepted more entries than allowed")
	}
}

// FuzzDecode: a stored value is shared data any plugin of the same vm_id could have written;
// Decode refuses what AppendTo did not write, within its bound, and what it accepts encodes back
// to the same bytes.
func FuzzDecode(f *testing.F) {
	table := NewTable(3)
	for _, id := range []uint64{1, 1, 2, 3, 4, 4, 4} {
		table.Add(id, []byte{byte(id)})
	}
	var sum Summary
	sum.AddTable(table, 3)
	f.Add(sum.AppendTo(nil))
	f.Add([]byte("TGh1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, rest, ok := Decode(data, 8)
		if !ok {
			return
		}
		if len(s.entries) > 8 {
			t.Fatalf("%d entries decoded, bound 8", len(s.entries))
		}
		if again := s.AppendTo(nil); string(append(again, rest...)) != string(data) {
			t.Fatalf("re-encoded %x, read %x", again, data)
		}
		s.Entries()
		other, _, _ := Decode(data, 8)
		s.AddSummary(&other, 4) // merging never panics, whatever the counts
		if len(s.Entries()) > 4 {
			t.Fatalf("%d keys after a merge into 4", len(s.Entries()))
		}
	})
}
