// Package gateway puts the Envoy-faithful host behind a real HTTP listener: each request runs
// through one of N worker VMs (round robin, as Envoy spreads connections over workers); a request
// the module admits is proxied to the upstream, and its response headers, body (a chunk per read,
// flushed to the client at once) and trailers pass back through the module. It is what
// `tollgate serve` runs. When a stream ends, the filter state wasm.tollgate_usage the module set
// for it, if any, goes to the error log.
//
// A request on a VM that trapped gets 503, as Envoy answers with failure_policy FAIL_CLOSED.
package gateway
