// Command fleetlog writes a generated fleet log for the fleet model of tollgate simulate
// (docs/global-limits.md, "A fleet on paper"): Poisson arrivals at --rate requests per second
// for --duration, API keys drawn by a Zipf law, in the envoy-json format.
//
//	go run ./internal/simulate/fleetlog --rate 100000 --duration 20s --keys 1000000 > fleet.log
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/simulate"
)

func main() {
	rate := flag.Float64("rate", 100_000, "requests per second")
	duration := flag.Duration("duration", 20*time.Second, "how long the traffic lasts")
	keys := flag.Uint64("keys", 1_000_000, "distinct API keys")
	zipf := flag.Float64("zipf", 1.1, "the Zipf law's exponent (above 1): key k is drawn with probability ∝ 1/(1+k)^s")
	seed := flag.Uint64("seed", 1, "seed of the generator")
	start := flag.String("start", "2026-11-30T10:00:00Z", "the first instant (RFC 3339)")
	flag.Parse()
	at, err := time.Parse(time.RFC3339, *start)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetlog: --start: %v\n", err)
		os.Exit(2)
	}
	n, err := simulate.WriteFleetLog(os.Stdout, simulate.FleetLogOptions{Start: at, Rate: *rate, Duration: *duration,
		Keys: *keys, ZipfS: *zipf, Seed: *seed, Path: "/api", Header: "x-api-key"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetlog: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "fleetlog: %d requests\n", n)
}
