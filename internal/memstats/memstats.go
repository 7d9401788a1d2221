// Package memstats reads the Go runtime's allocation counters by number, for the diagnostic
// export tollgate_stats of benchmark builds (filter/stats.go, and the floor probe's): the guest's
// heap allocations, which nothing outside the VM can see.
package memstats

import "runtime"

// Read returns counter field of runtime.MemStats: 0 Mallocs (heap objects allocated since start),
// 1 TotalAlloc (bytes), 2 NumGC, any other HeapSys.
func Read(field uint32) uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	switch field {
	case 0:
		return m.Mallocs
	case 1:
		return m.TotalAlloc
	case 2:
		return uint64(m.NumGC)
	}
	return m.HeapSys
}
