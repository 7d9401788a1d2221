// Package e2e holds the end-to-end scenarios: each builds build/tollgate.wasm from the filter
// package (a failed build fails the suite) and drives the real module in the Envoy-faithful host
// of internal/host, with injected clocks and several worker VMs.
//
// The seed traces of the design are golden files under testdata/, written from the design
// document, one line per request: the instant, the key, and what the client saw.
package e2e
