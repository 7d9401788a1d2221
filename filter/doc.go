// Command filter is the Tollgate proxy-wasm module: the package built into build/tollgate.wasm
// with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared.
//
// It holds the module's entry points only: it registers the request lifecycle (package
// internal/plugin) with the ABI layer (internal/abi), whose //go:wasmexport callbacks Envoy
// calls, and, in benchmark builds only, the diagnostic export tollgate_stats (stats.go).
package main
