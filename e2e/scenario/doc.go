// Package scenario is the end-to-end scenario that both end-to-end runs drive: the module in
// Tollgate's own Envoy-faithful host behind a real HTTP listener (package e2e), and the module in
// a real Envoy container (package e2e/envoy). Both send the same requests over HTTP and check
// them against the same expectations, so the two runs cannot drift apart.
//
// It holds the plugin configuration the runs load, the requests with what the client must see,
// the upstream's answer, and the counters the module must report afterwards. Counters.go is the
// one place where the names of the module's counters are written down outside the module, both
// as Envoy stat names and as the Prometheus series Envoy's /stats/prometheus shows for them.
package scenario
