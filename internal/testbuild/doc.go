// Package testbuild builds this repository's code for tests: Wasm modules exactly as `make build`
// builds the product (GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared, -trimpath, then for the filter
// and the benchmarks' probes the narrowing of their address arithmetic (internal/wasmaddr), the
// threading of their jumps (internal/wasmjump) and binaryen's wasm-opt with the Makefile's
// WASM_OPT_FLAGS when it is installed, the packing of their data segments (internal/wasmdata),
// then the split of the function names out of the module, internal/wasmnames), and native
// commands; Names is the name map `make build` writes beside the module. Every test that runs a
// module builds it from the tree it tests, so no test can pass against a stale or missing build; a
// build that fails fails the test, it never skips.
//
// Builds go to a temporary directory, never into the working tree, and each distinct build runs
// once per test binary. Every module shares the same flags, so the Go build cache compiles the
// standard library for wasip1 once for all of them.
//
// Mutations gives the fuzz targets of the build's steps their seeds: malformed modules.
//
// Only tests import this package.
package testbuild
