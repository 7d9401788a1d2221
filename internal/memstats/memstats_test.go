package memstats

import (
	"runtime"
	"testing"
)

// Each monotonic field reads its counter: a reading lies between the runtime's own readings just
// before and just after it.
func TestReadCounters(t *testing.T) {
	for _, tt := range []struct {
		field   uint32
		counter func(*runtime.MemStats) uint64
	}{
		{0, func(m *runtime.MemStats) uint64 { return m.Mallocs }},
		{1, func(m *runtime.MemStats) uint64 { return m.TotalAlloc }},
		{2, func(m *runtime.MemStats) uint64 { return uint64(m.NumGC) }},
	} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got := Read(tt.field)
		runtime.ReadMemStats(&after)
		if lo, hi := tt.counter(&before), tt.counter(&after); got < lo || got > hi {
			t.Errorf("Read(%d) = %d, want between %d and %d", tt.field, got, lo, hi)
		}
	}
}

// HeapSys goes up and down as the runtime takes and returns spans, so no pair of readings around
// one brackets it; what holds at any instant is that it is whole runtime pages (8 KiB) of the
// memory obtained from the system, which only grows. Field 3 and any unknown field read it.
func TestReadHeapSys(t *testing.T) {
	const runtimePage = 8 << 10
	for _, field := range []uint32{3, 99} {
		got := Read(field)
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if got == 0 || got%runtimePage != 0 || got > after.Sys {
			t.Errorf("Read(%d) = %d, want a positive multiple of %d no larger than Sys (%d)", field, got, runtimePage, after.Sys)
		}
	}
}
