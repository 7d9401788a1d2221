// Package deploy holds what users deploy Tollgate with, besides the module itself: the Istio
// WasmPlugin manifests (istio/), the Envoy Gateway manifests (envoy-gateway/: a Gateway, an
// HTTPRoute and an EnvoyExtensionPolicy loading the module from the image or over HTTPS), Envoy
// loading the module over HTTPS with its checksum (remote/), the Docker recipe for the Wasm OCI
// image (image/, run by `make image-docker`; `make image` builds the same without Docker, with
// cmd/tollgate-image), and Envoy with a global limit next to the envoyproxy/ratelimit
// configuration it needs (ratelimit/; ratelimit_test.go checks that they fit).
//
// Its tests prove, without an Envoy, an Istio or a Docker engine, that every configuration the
// repository ships is valid: each Envoy configuration against Envoy's own API (the v3 Bootstrap
// of go-control-plane, unknown fields rejected, every Any resolved, and the generated
// validation), each WasmPlugin against Istio's API, each Envoy Gateway manifest against Envoy
// Gateway's and the Gateway API's Go types and CRDs (decoded and validated as the API server
// does),
// every Tollgate configuration inside them with config.Parse (what `tollgate check` and the
// module run), and the compose file and the image recipe against the files they refer to. shipped_test.go lists every such file and the test
// that proves it; a configuration file missing from that list fails the suite. Nothing here is
// linked into the module.
package deploy
