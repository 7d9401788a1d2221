// Package admission decides one request: it builds each rule's partition key from the request,
// charges every limit of every rule in Envoy shared data, and returns what the filter must
// answer. It is plain Go behind two small interfaces (Request, Store), so it runs natively in
// unit tests and inside the wasm module alike; the filter package only adapts the ABI to them.
//
// Shared state: one fixed-size binary value per (rule, limit, partition key), see state.go,
// updated with compare-and-swap: read (value, cas), decide with package limiter, write with that
// cas, and on CasMismatch (another worker VM wrote first) read again, at most MaxAttempts times.
//
// Units: times are nanoseconds on the host's monotonic clock, which Envoy shares among all
// worker VMs of a process; token counts are whole tokens; Retry-After is whole seconds.
package admission
