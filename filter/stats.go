//go:build wasip1 && tollgate_stats

package main

import "github.com/tollgate-proxy/tollgate/internal/memstats"

// tollgate_stats is a diagnostic export compiled only into benchmark builds (-tags
// tollgate_stats), never into the module Envoy loads: it reads the Go runtime's own allocation
// counters (internal/memstats), which nothing outside the VM can see. field 0 is
// MemStats.Mallocs (heap objects allocated since start), 1 TotalAlloc (bytes), 2 NumGC, 3
// HeapSys. The difference of two readings over N requests is the guest's heap allocations per
// request; the allocations the host causes through proxy_on_memory_allocate are among them.
//
//go:wasmexport tollgate_stats
func stats(field uint32) uint64 { return memstats.Read(field) }
