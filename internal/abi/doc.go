// Package abi is Tollgate's own layer over the proxy-wasm ABI v0.2.1, for modules built with
// upstream Go (GOOS=wasip1, -buildmode=c-shared, //go:wasmimport and //go:wasmexport).
//
// The only SDK release available for Go targets TinyGo, so this package implements the subset
// of the ABI the filter uses, shaped like that SDK: a plugin implements the context interfaces of
// github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types, registers them with SetVMContext from
// an init function, and calls the functions here for headers, shared data, properties, metrics,
// logs and local replies, and for the response's body and trailers and the stream's filter
// state (SetProperty).
//
// Layout:
//   - hostcalls_wasip1.go: the //go:wasmimport declarations of the env.proxy_* host functions
//     (spec: proxy-wasm/spec abi-versions/v0.2.1/README.md) and their Go wrappers.
//   - callbacks_wasip1.go: the //go:wasmexport callbacks Envoy calls, dispatching to the
//     registered contexts. Every callback recovers from panics: a panic that escaped would trap
//     the VM and fail every stream on that Envoy worker.
//   - native.go, native_vm.go, grpc_native.go: the twin for ordinary Go builds, for unit tests.
//     NativeVM is the module's side (the callbacks, with the same dispatch and panic recovery as
//     the wasip1 ones), and every host call goes to a NativeHost playing Envoy: package abitest,
//     built on internal/hostcore, the Envoy semantics internal/host shares. Every exported
//     function exists in both builds with the same signature.
//   - dispatch.go: what the callbacks of both builds share, so that unit tests run the module's
//     own code: the stream table, what a recovered panic does, and the books of gRPC calls (each
//     build supplies its vm, its calls and the host functions they use). A stream's context is
//     made when a callback first reaches the stream, and a plugin may let a stream go once its
//     request is decided for good (ReleaseStream): the stream's later callbacks then skip it, and
//     its context serves the plugin's next stream.
//   - enums.go: the ABI's enums, and the mapping of host statuses (package wire) to the
//     SDK's error values.
//   - grpc.go, grpc_wasip1.go, grpc_native.go (and dispatch.go): unary gRPC callouts
//     (proxy_grpc_call and the callbacks Envoy makes to the root context), resumed on the stream
//     that made them, and cancelled when that stream is deleted.
//
// Units: sizes are bytes, times are nanoseconds, metric values are plain counts.
package abi
