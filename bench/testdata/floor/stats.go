//go:build tollgate_stats

package main

import "runtime"

// tollgate_stats is the benchmark-only export that reads the Go runtime's allocation counters
// (see filter/stats.go).
//
//go:wasmexport tollgate_stats
func stats(field uint32) uint64 {
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
