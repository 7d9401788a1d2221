// Package host runs a proxy-wasm module the way Envoy does, in-process on wazero. It is part of
// the product: it backs the end-to-end tests, the benchmarks and `tollgate serve`.
//
// What it emulates (sources: proxy-wasm/proxy-wasm-cpp-host src/wasm.cc, src/exports.cc,
// src/context.cc, src/shared_data.cc; envoyproxy/envoy source/extensions/common/wasm/context.cc):
//
//   - Imports: exactly the env.proxy_* functions of ABI 0.2.x and the WASI functions of the
//     chosen Envoy generation (Profile). A module importing anything else is refused before it
//     runs, as Envoy refuses it with "missing import".
//   - Start: _initialize, with Envoy's restricted-call allowlist (a proxy_* call other than
//     proxy_log during init traps the VM); then the allocator (malloc, else
//     proxy_on_memory_allocate), also restricted while it runs; then per plugin
//     proxy_on_context_create(root, 0), proxy_on_vm_start, proxy_on_configure with the plugin
//     configuration readable only during that call.
//   - Streams: context create, request headers, response headers, response body (a call per
//     chunk, the buffer the chunk or all the module held) and trailers (body.go; also the
//     module's own local reply's headers and body, as Envoy's encoder chain passes them), then
//     log, done, delete. Header maps are readable and writable only during their callback, the
//     response trailers from theirs on. Local replies are deferred until the callback returns
//     and force the stream to stop. proxy_set_property sets the stream's filter state.
//   - Shared data: one store per vm_id with Envoy's CAS rules (global counter from 1, an absent
//     key is stored whatever the CAS, CAS 0 overwrites, any other mismatch is CasMismatch).
//     The store, header-map operations, the shaping of local replies, the attributes and gRPC
//     call ids are package hostcore's, shared with the native twin of internal/abi.
//   - Several worker VMs of one compiled module, each single-threaded, running in parallel
//     goroutines against one store, as Envoy's worker threads do.
//   - Configuration pushes (Host.Reconfigure): a canary VM must accept the new configuration,
//     else nothing changes (Envoy's NACK); then every running VM gets a new root context with a
//     new id for it, and the old root context ends when its last stream has.
//   - Clocks: wall (WASI clock 0) and monotonic (clock 1), both injectable; the manual clock can
//     also step the monotonic clock backwards or far forwards, which Envoy's never does, to
//     show a module survives it.
//   - Fault injection: shared-data operations (SharedData.SetFault), property lookups
//     (Host.SetPropertyFault) and reads of a whole header map (Host.SetHeaderPairsFault) can be
//     made to fail; SharedData.Stats counts operations, CAS mismatches and injected faults.
//   - Metrics with Envoy's id encoding, aggregated by name over all VMs; logs with the VM id.
//   - poll_oneoff: ENOSYS in the Envoy 1.33–1.38 profile (Go's runtime throws on it), success
//     with no events from Envoy 1.39.
//   - Unary gRPC callouts on real connections (grpc.go): proxy_grpc_call to a cluster mapped by
//     Options.GrpcClusters, the answer to the root context (proxy_on_grpc_receive or
//     proxy_on_grpc_close, proxy_get_status), cancel, and a stream held until a callback
//     continues or answers it, both taking effect after that callback returns.
//   - Local replies shaped as Envoy sends them (hostcore.LocalReply): gRPC trailers-only replies, HEAD
//     without a body, details with whitespace replaced.
//   - Misuses Envoy answers Ok but mishandles (continuing a request that is not stopped, a local
//     reply without a stream or after the response started) fail the call with ErrMisuse.
//   - failure_policy for a VM that trapped (FailClosed, FailOpen, FailReload with a backoff);
//     shared data of a vm_id kept until the last host holding it closes; memory capped at V8's
//     16,384 pages.
//
// Timers: proxy_set_tick_period_milliseconds arms a root context's timer, which Tick fires
// (proxy_on_tick; tick.go). Not emulated: HTTP callouts, gRPC streams, shared queues, foreign
// functions, close_stream and envoy_resolve_dns; their imports resolve (Envoy provides them) and
// return Unimplemented. Request bodies and trailers are not passed, nor is a response stopped
// at its end continued (proxy_continue_stream(HTTP_RESPONSE)). Nor is the main thread's VM: every VM is a worker's, and a canary VM
// only runs for Reconfigure. Modules are started with _initialize (Go's c-shared modules export
// nothing else).
//
// Units: times in nanoseconds, sizes in bytes, linear memory in 64 KiB pages.
package host
