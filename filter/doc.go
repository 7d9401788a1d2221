// Command filter is the Tollgate proxy-wasm module: the package built into build/tollgate.wasm
// with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared.
//
// It is glue only. On plugin start it parses the configuration with package config (one log line
// per problem, and the start fails) and defines the counters; on request headers it asks package
// admission for a decision and turns it into the ABI's answers: continue (marking shadow-limited
// requests for the upstream), the configured rejection with an exact Retry-After, the rule's
// status for a request without its key, 400 for a bad cost header, or the failure mode when
// shared data fails. Rate-limit headers, when configured, are added to rejections and, in the
// response-headers callback, to admitted responses.
//
// A rule with a global limit (global.go) holds the requests its local limits admit while the
// rate limit service is asked (ShouldRateLimit through proxy_grpc_call, encoded by internal/rls);
// its answer continues the request or rejects it as local limits do, giving back the local
// charge; an error or a timeout follows the rule's global failure_mode.
//
// Rules with count or refund (outcome.go) hold an admitted request's charge until its response
// headers and give it back by their :status.
//
// Counters: tollgate.rule.<rule>.{admitted,limited,shadow_limited,missing_key,invalid_cost},
// for rules with count or refund also tollgate.rule.<rule>.refunded, for rules with a global
// limit also tollgate.rule.<rule>.global_{ok,over_limit,error,timeout,cancelled};
// tollgate.exempt, tollgate.internal_errors, tollgate.key_table_full,
// tollgate.escaped_slashes_rejected.
package main
