// Command filter is the Tollgate proxy-wasm module: the package built into build/tollgate.wasm
// with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared.
//
// It is glue only. On plugin start it parses the configuration with package config (one log line
// per problem, and the start fails); on request headers it asks package admission for a decision
// and turns it into the ABI's answers: continue, a 429 with Retry-After, a 401 for a request
// without its key, or the failure mode when shared data fails.
//
// Responses: admitted requests continue untouched and their responses gain
// x-ratelimit-remaining (whole tokens). Rejections are local replies sent before any upstream
// work. Counters: tollgate_requests_allowed, tollgate_requests_limited,
// tollgate_requests_missing_key, tollgate_internal_errors.
package main
