// Package admission decides one request: it builds each rule's partition key from the request,
// charges every limit of every rule in Envoy shared data, and returns what the lifecycle must do
// next. It is plain Go behind two small interfaces (Request, Store), so it runs natively in
// unit tests and inside the wasm module alike; the lifecycle (internal/plugin) adapts the ABI
// to them and renders the HTTP answer (status, Retry-After, rate-limit headers).
//
// Two types split the work. A Policy is a configuration compiled once (rules, limits, the key
// table's shape, the hash secret) and never written afterwards. A Gate decides requests by a
// Policy in buffers it reuses, one Gate per VM. Gate.Admit returns an Outcome that holds all
// the caller needs next: the verdict, what to count, the global checks still to make and the
// Charge to give back if the request is rejected after all.
//
// A decision reads top-down: request.go (the request's attributes, rule matching, partition
// keys), admission.go (Admit: the limits the request's rules apply, the enforced ones decided
// all or nothing, then each shadow rule), decidefast.go (a known key's decision, written out for
// the common shape; a key whose bucket it found too low is answered from the VM's memory until
// the refill could admit it, rejected.go), table.go (the key table in shared data: find, decide, write, refund), slot.go (a slot's value, a row's key, the row of a bucket). Beside
// them, policy.go compiles a configuration into a Policy, outcome.go is what Admit returns,
// algorithm.go adapts package limiter to the cells a slot stores, hash.go holds the keyed
// hashes, global.go what an admitted request still owes the rate limit service, and settle.go
// what rules with count or refund give back at the response.
//
// Shared state is updated with compare-and-swap: read (value, cas), decide with package
// limiter, write with that cas, and on a CAS mismatch (another worker VM wrote first) read
// again, at most MaxAttempts times.
//
// Units: times are nanoseconds on the host's monotonic clock, which Envoy shares among all
// worker VMs of a process; token counts are whole tokens; Retry-After is whole seconds.
package admission
