// Package wasmnames moves a Wasm module's function names out of it, into a map shipped beside
// the module.
//
// The Go linker names every function of the module in the "name" custom section, and the build
// keeps it through the optimizer (wasm-opt -g): about 80 KB the module carries only so that a
// trap's backtrace names functions. Split keeps in the module the names of the functions it
// exports (the ABI's entry points, such as proxy_on_request_headers) and returns the full names as
// a Map, whose text (Map.WriteTo, one "INDEX NAME" line per function) `make build` writes to
// build/tollgate.wasm.names.
//
// The names that stay are needed: Envoy prints a trap's in-VM backtrace only when the module's
// name section names at least one function, one frame a line, the function's name or
// "unknown(function index:N)" where the module has none (proxy-wasm-cpp-host, src/v8/v8.cc,
// V8::getFailMessage). With the entry points named, the backtrace still shows which callback
// trapped, and the map (ParseMap, Map.Lookup; `tollgate backtrace`) resolves the other frames:
// N is the function's index in the module's function index space, which Split never changes.
//
// The parser reads bytes it cannot trust: every length is checked, and a malformed module is an
// error, never a panic.
package wasmnames
