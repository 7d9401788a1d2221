// Package wire holds what both sides of the proxy-wasm ABI v0.2.1 agree on byte for byte: the
// status codes every env.proxy_* host function returns, the serialization of header maps, and
// the encoding of property paths. The module (package abi) and the Envoy-faithful host (package
// host) both use it, so neither depends on the other and the two cannot drift apart. It also
// reads the protobuf wire format by hand (varints and fields), for the module's gRPC answers
// (package rls) and config's check of a cluster name, so that the two walks cannot drift apart
// either.
//
// It uses the standard library only: the host, and the CLI that embeds it, link no SDK through
// it.
package wire
