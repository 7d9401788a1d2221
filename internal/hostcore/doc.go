// Package hostcore holds the parts of Envoy's host semantics for proxy-wasm that do not depend
// on WebAssembly: the shared-data store with its CAS rules, header-map operations and which
// maps a callback may use, the response body a filter sees and holds, the filter state
// proxy_set_property writes, the shaping of local replies, the attributes served by
// proxy_get_property, and gRPC call ids. Both hosts use it: internal/host, which runs the module
// on wazero, and the native twin of internal/abi (driven by internal/abi/abitest), which runs the
// plugin's Go code in-process for unit tests. So a rule of Envoy's is written once, and both
// sides of the tests agree on it.
//
// It imports the standard library and internal/wire only. Each rule cites the Envoy or
// proxy-wasm-cpp-host source it comes from.
//
// Units: times in nanoseconds, sizes in bytes.
package hostcore
