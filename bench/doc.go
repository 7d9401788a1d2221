// Package bench holds Tollgate's benchmarks, run by `make bench`. It has no code of its own: every
// measurement is a Go benchmark in its _test.go files, with -benchmem and custom metrics that
// benchstat reads (hostcalls/op, alloc-callbacks/op, guest-allocs/op, retries/op, ratios).
//
//   - floor_test.go: the module against the floor probe (testdata/floor, a minimal upstream-Go
//     proxy-wasm module that only reads the key header, reads the shared value and writes it back
//     with CAS), in the same host and the same run, interleaved in blocks, for an admitted request
//     of a known key, a rejected request, a request with a new key (in a table all but empty, and
//     in one whose every slot holds an idle bucket), a request without its key (401), and the
//     first two again with the example configuration's rate-limit headers:
//     vs-floor, Tollgate's time over the probe's, and vs-clocked-floor over that of the probe
//     built to also read the clock once per request.
//   - surface_test.go: the module against the clocked floor probe and the surface probe
//     (testdata/surface, which makes exactly the module's crossings for the request type, a test
//     checks, and nothing else), interleaved as in floor_test.go, for an admitted request of a
//     known key and a rejected one: surface-over-clocked-floor is the least vs-clocked-floor any
//     module making those crossings can have in this host, vs-surface the module's time over the
//     surface probe's. The glue probe (testdata/glue) makes the same crossings through the
//     module's own ABI layer (internal/abi) with a plugin that decides nothing:
//     glue-over-clocked-floor is the least vs-clocked-floor the module can have with that layer
//     as it is, vs-glue the module's time over the glue probe's, the decision's share. The two
//     probes share what they do between their crossings (testdata/probes). BenchmarkDirect runs
//     the module, the clocked floor probe and the direct-decision probe (testdata/direct): the
//     same crossings through the same layer, with the benchmarks' one rule decided between them
//     in one function written for it alone; direct-over-clocked-floor is what deciding costs on
//     that layer with nothing general in the way, vs-direct the module's time over that probe's.
//     BenchmarkAlone runs the module, the three probes and the clocked floor probe each alone,
//     not interleaved: its times are not for ratios, it is for a sampling profile that holds one
//     module's requests and no other module's, which the command bench/profile makes (make
//     bench-profile) and writes tables of.
//   - crossings_test.go: host calls, WASI calls, callbacks and allocator callbacks per request
//     type, from the host's counters, the module's own function calls per request (wazero's
//     function listeners), its memory.copy and memory.fill instructions per request, each a call
//     out of wazero's compiled code (bulk_test.go makes them calls the listeners count), and the
//     guest's heap allocations per request, read from the
//     Go runtime inside the VM through a diagnostic export compiled only into benchmark builds
//     (-tags tollgate_stats, filter/stats.go and the probe's stats.go, both reading
//     internal/memstats). With TOLLGATE_BENCH_CALLS=1 and -v it logs the guest's calls by
//     function and the host calls by import.
//   - native_test.go: the limiter's decision against golang.org/x/time/rate's Allow, each on a
//     per-key limiter from a map; and the whole admission decision natively, with its allocations.
//   - workers_test.go: throughput with 1, 2 and 4 worker VMs (one per goroutine, one shared store)
//     on distinct keys and on one hot key, with the CAS retry rate.
//   - memory_test.go: module size raw and gzip; linear memory after _initialize, after start, after
//     1,000,000 requests over 10,000 keys and after 2,000,000 (it must not grow between the two).
//   - servemem_test.go: the resident memory of a `tollgate serve` process with 1, 2 and 4 worker
//     VMs, idle, with its key table filled by a flood of distinct keys, and after as many more.
//   - http_test.go: requests per second through the gateway of `tollgate serve` (2 worker VMs)
//     with the filter and with the filter disabled (the same proxy code passing requests
//     through, `--no-filter`), in turns in the same run, from a Go load generator on loopback,
//     under four loads: admitted requests of known keys, every request rejected (every key over
//     its limit), every request a new key and every request without its key (401);
//     filter/passthrough is the throughput ratio.
//   - startup_test.go: one worker's start, from instantiating the module to its first request's
//     answer, for the example configuration (examples/tollgate.json, what `make run` serves) and
//     for 64 varied rules; with the module compiled already, and with its compilation (wazero's
//     optimizing compiler, as internal/host). compile-ns/op, instantiate-ns/op (instantiation,
//     _initialize) and configure-ns/op (proxy_on_vm_start, proxy_on_configure and the first
//     request) split it. BenchmarkUnpack: instantiation alone, the module (whose start function
//     unpacks its data, internal/wasmdata) against its build before the packing, in turns.
//
// The modules are built by the benchmarks themselves, with the flags of `make build`, into a
// temporary directory. BENCHMARKS.md holds the figures and how to reproduce them.
package bench
