package memstats

import (
	"runtime"
	"testing"
)

// Each field reads its counter: a reading lies between the runtime's own readings just before
// and just after it (HeapSys may also shrink, as stacks take spans of the heap).
func TestReadFields(t *testing.T) {
	for _, tt := range []struct {
		field   uint32
		counter func(*runtime.MemStats) uint64
	}{
		{0, func(m *runtime.MemStats) uint64 { return m.Mallocs }},
		{1, func(m *runtime.MemStats) uint64 { return m.TotalAlloc }},
		{2, func(m *runtime.MemStats) uint64 { return uint64(m.NumGC) }},
		{3, func(m *runtime.MemStats) uint64 { return m.HeapSys }},
		{99, func(m *runtime.MemStats) uint64 { return m.HeapSys }},
	} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got := Read(tt.field)
		runtime.ReadMemStats(&after)
		lo, hi := tt.counter(&before), tt.counter(&after)
		if got < min(lo, hi) || got > max(lo, hi) {
			t.Errorf("Read(%d) = %d, want between %d and %d", tt.field, got, lo, hi)
		}
	}
}
