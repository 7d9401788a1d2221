// Package ratelimit runs Tollgate's global limits against the real engine: Redis (Debian's
// redis-server) and envoyproxy/ratelimit, built with `go install` at the version pinned in
// RateLimitVersion, both started on loopback ports by the tests, the service with a descriptor
// configuration the tests write. In front of them run real `tollgate serve` processes, each one
// an Envoy replica with two worker VMs.
//
// What the tests show: two replicas sharing one global limit admit exactly that limit for one
// key and leave another key alone; with the service stopped, requests follow each rule's failure
// mode without a trapped VM, and recover by themselves once the service is back; the shipped
// descriptor configuration (deploy/ratelimit) loads in the service and gives a limit to what the
// shipped Envoy configuration's Tollgate sends; admitted responses carry what is left of the
// global quota, with and without a lease; on a Redis Cluster of three masters with a replica
// each (the service in cluster mode, three replicas in front), the limits are exact, a master
// killed under load costs no more than the stated bounds, and each phase's figures go to
// build/redis-cluster.txt (`go test ./e2e/ratelimit -run RedisCluster`); and the latency a
// global check adds per request, measured against the local-only path in the same run (written
// to build/global-latency.txt).
//
// Setup: redis-server and redis-cli must be on PATH (`apt-get install -y redis-server
// redis-tools`; .ci/run installs them); the service is built into build/ratelimit/<version>/
// (`make ratelimit` does it ahead, else TestMain does, before any test runs, which needs the Go
// module proxy the first time). The module and the CLI are built from the tree for the run
// (internal/testbuild). When CI is true a missing piece fails the tests; elsewhere they skip,
// naming it.
package ratelimit

// RateLimitModule and RateLimitVersion pin envoyproxy/ratelimit: the module has no release tags,
// so the version is the pseudo-version of a commit of its main branch (3fb702589d36, 22 January
// 2026) as the Go module proxy serves it. The Makefile's RATELIMIT_VERSION must match (a test
// checks it).
const (
	RateLimitModule  = "github.com/envoyproxy/ratelimit"
	RateLimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"
)
