// Package plugin is the request lifecycle of a Tollgate module: what happens to a stream from
// its request headers to its end, written against the ABI layer (internal/abi) so that it runs in
// the module and natively in unit tests alike.
//
// On plugin start it parses the configuration with package config (one log line per problem,
// and the start fails), compiles it (admission.Compile for the decision, compileRules for each
// rule's counters and hooks) and defines the counters. A stream then goes through, top-down:
//
//   - request headers (plugin.go): a request under the operator endpoint's prefix is answered by
//     the endpoint (operator.go, operator_ops.go) and goes no further; for any other, the Gate
//     decides (reading the request and shared data through attributes.go), the shadow marker a
//     client sent is removed from a request that may reach the upstream (marker.go: before the
//     decision on the general way, after it under the lean shape), and the verdict becomes the
//     ABI's answer: continue (marking shadow-limited requests for the upstream), the configured
//     rejection with an exact Retry-After, the rule's status for a request without its key, 400
//     for a bad cost header, or the failure mode when shared data fails;
//   - hold (held.go): a request may wait before it goes on, for its tokens (delay.go), for a free
//     slot of a concurrency limit (slotwait.go), or for the rate limit service (global.go,
//     lease.go); ticks and gRPC answers resume it;
//   - response headers: rules with count or refund settle the charge by :status (settle.go),
//     and the rate-limit headers are added (headers.go);
//   - stream end: what the request still holds is released (slots, leases, held entries), and a
//     forwarded request's unsettled charge stands.
//
// Rejections also count toward each rule's top offenders when the operator endpoint is on
// (operator_top.go), merged into shared data on the tick.
//
// Counters are named tollgate.rule.<rule>.<event> and tollgate.<event>; each feature defines its
// own in its compile function, and docs/configuration.md's metrics table lists them all.
package plugin
