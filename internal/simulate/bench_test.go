package simulate

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSimulate replays a generated envoy-json log of 200,000 requests (or
// TOLLGATE_SIMULATE_LINES) through one configuration: Open (read, parse and sort) and Run. It
// reports requests per second of the whole replay; no test asserts a time.
//
//	go test -run '^$' -bench Simulate -benchtime 1x ./internal/simulate
//	TOLLGATE_SIMULATE_LINES=1000000 go test -run '^$' -bench Simulate -benchtime 1x -timeout 30m ./internal/simulate
func BenchmarkSimulate(b *testing.B) {
	lines := 200_000
	if s := os.Getenv("TOLLGATE_SIMULATE_LINES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("TOLLGATE_SIMULATE_LINES=%q: want a positive number", s)
		}
		lines = n
	}
	path := filepath.Join(b.TempDir(), "access.log")
	generateLog(b, path, 1, genOptions{requests: lines, keys: 5_000, noKey: 0.05, exempt: 0.01, clients: 2_000, meanGapMs: 2})
	wasm := module(b)
	b.ResetTimer()
	for b.Loop() {
		started := time.Now()
		log, err := Open(path, EnvoyJSON)
		if err != nil {
			b.Fatal(err)
		}
		results, err := Run(context.Background(), log, RunOptions{Wasm: wasm, Seed: 1, Cache: testCache,
			Configs: []ConfigFile{{Name: "exact.json", Data: []byte(exactConfig)}}})
		log.Close()
		if err != nil {
			b.Fatal(err)
		}
		if results[0].Requests != int64(lines) {
			b.Fatalf("replayed %d requests, want %d", results[0].Requests, lines)
		}
		b.ReportMetric(float64(lines)/time.Since(started).Seconds(), "requests/s")
	}
}
