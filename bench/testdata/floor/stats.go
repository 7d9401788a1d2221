//go:build tollgate_stats

package main

import "github.com/tollgate-proxy/tollgate/internal/memstats"

// tollgate_stats is the benchmark-only export that reads the Go runtime's allocation counters
// (see filter/stats.go).
//
//go:wasmexport tollgate_stats
func stats(field uint32) uint64 { return memstats.Read(field) }
