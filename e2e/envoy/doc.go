// Package envoy runs the shared end-to-end scenario (package e2e/scenario) against a real Envoy:
// compose.yaml starts the pinned envoyproxy/envoy image with build/tollgate.wasm and the
// configuration in envoy.yaml, in front of an upstream (upstream.yaml), and TestScenarioInEnvoy
// drives it over HTTP and reads Tollgate's counters from Envoy's /stats/prometheus.
//
// The test needs a Docker engine with Compose v2. Where no Docker daemon answers it skips, naming
// what is missing; `make e2e-envoy` sets TOLLGATE_REQUIRE_DOCKER=1, which turns that skip into a
// failure. Any other problem fails the test.
package envoy
