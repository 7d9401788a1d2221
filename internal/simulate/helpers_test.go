package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// testCache keeps the module compiled across the package's tests.
var testCache = wazero.NewCompilationCache()

var (
	moduleOnce  sync.Once
	moduleBytes []byte
	moduleErr   error
)

// module is the filter built as `make build` does, once per test binary (internal/testbuild). A
// build failure fails the test: the simulator is never tested against a stale or missing module.
func module(tb testing.TB) []byte {
	tb.Helper()
	moduleOnce.Do(func() {
		moduleBytes, moduleErr = testbuild.ModuleBytes("./filter")
	})
	if moduleErr != nil {
		tb.Fatal(moduleErr)
	}
	return moduleBytes
}

// logStart is the generated logs' first instant.
var logStart = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// genRequest is one generated request.
type genRequest struct {
	ms      int64  // since logStart
	key     string // x-api-key; "" for none
	client  string // client address without port
	path    string
	lineNum int // 1-based, in the written file
}

// genOptions shape a generated log.
type genOptions struct {
	requests int
	keys     int     // distinct API keys
	noKey    float64 // share of requests without x-api-key
	exempt   float64 // share of requests to /health
	clients  int
	// meanGapMs is the mean time between requests; bursts put several in one millisecond.
	meanGapMs int
	// bad lines are inserted every badEvery lines (0: none).
	badEvery int
}

// generateLog writes an envoy-json log as Envoy would: lines in the order requests end, so a line
// can start before the one above it. It returns the requests in start order.
func generateLog(tb testing.TB, path string, seed uint64, o genOptions) []genRequest {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, 42))
	reqs := make([]genRequest, o.requests)
	var ms int64
	for i := range reqs {
		if rng.IntN(4) > 0 { // a quarter of requests arrive in the same millisecond as the last
			ms += int64(rng.IntN(2*o.meanGapMs + 1))
		}
		r := genRequest{ms: ms, client: fmt.Sprintf("10.0.%d.%d", rng.IntN(o.clients)/250, 1+rng.IntN(o.clients)%250), path: "/api/items"}
		// A few keys are much busier than the rest, as in real traffic.
		if rng.Float64() >= o.noKey {
			k := rng.IntN(o.keys)
			if rng.IntN(3) == 0 {
				k = rng.IntN(min(3, o.keys))
			}
			r.key = fmt.Sprintf("key-%03d", k)
		}
		if rng.Float64() < o.exempt {
			r.path = "/health"
		}
		reqs[i] = r
	}
	// Written at start + duration: up to 40 ms out of order.
	type written struct {
		end   int64
		index int
	}
	order := make([]written, len(reqs))
	for i, r := range reqs {
		order[i] = written{end: r.ms + int64(rng.IntN(40)), index: i}
	}
	sortStable(order, func(a, b written) bool { return a.end < b.end })
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	line := 0
	for n, w := range order {
		if o.badEvery > 0 && n > 0 && n%o.badEvery == 0 {
			b.WriteString(`{"start_time": "yesterday", "method": "GET", "path": "/"}` + "\n")
			line++
		}
		r := &reqs[w.index]
		line++
		r.lineNum = line
		fields := map[string]any{
			"start_time":                logStart.Add(time.Duration(r.ms) * time.Millisecond).Format("2006-01-02T15:04:05.000Z"),
			"method":                    "GET",
			"path":                      r.path,
			"authority":                 "api.example.com",
			"downstream_remote_address": fmt.Sprintf("%s:%d", r.client, 1024+rng.IntN(60000)),
			"protocol":                  "HTTP/1.1",
			"response_code":             200,
			"req.x-api-key":             nil,
			"req.user-agent":            "curl/8.5.0",
		}
		if r.key != "" {
			fields["req.x-api-key"] = r.key
		}
		data, err := json.Marshal(fields)
		if err != nil {
			tb.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
		if b.Len() > 1<<20 {
			if _, err := f.WriteString(b.String()); err != nil {
				tb.Fatal(err)
			}
			b.Reset()
		}
	}
	if _, err := f.WriteString(b.String()); err != nil {
		tb.Fatal(err)
	}
	// Start order, ties in file order, as the replay sorts them.
	sortStable(reqs, func(a, b genRequest) bool { return a.ms < b.ms || a.ms == b.ms && a.lineNum < b.lineNum })
	return reqs
}

func sortStable[T any](s []T, less func(a, b T) bool) {
	// Insertion sort would be quadratic on large logs; a merge sort keeps ties in order.
	if len(s) < 2 {
		return
	}
	mid := len(s) / 2
	sortStable(s[:mid], less)
	sortStable(s[mid:], less)
	merged := make([]T, 0, len(s))
	i, j := 0, mid
	for i < mid && j < len(s) {
		if less(s[j], s[i]) {
			merged = append(merged, s[j])
			j++
		} else {
			merged = append(merged, s[i])
			i++
		}
	}
	merged = append(merged, s[i:mid]...)
	merged = append(merged, s[j:]...)
	copy(s, merged)
}

// simulateFile replays a log file through configs and returns the summary as summary.json has it.
func simulateFile(tb testing.TB, path string, format Format, showKeys bool, configs ...string) (*Summary, map[string]any) {
	tb.Helper()
	return simulateFileWith(tb, path, format, showKeys, nil, configs...)
}

// simulateFileWith is simulateFile with the run's options changed by edit, when set.
func simulateFileWith(tb testing.TB, path string, format Format, showKeys bool, edit func(*RunOptions), configs ...string) (*Summary, map[string]any) {
	tb.Helper()
	log, err := Open(path, format)
	if err != nil {
		tb.Fatal(err)
	}
	defer log.Close()
	// Two phases: configurations with windows show their range, at the cost of one more replay.
	opts := RunOptions{Wasm: module(tb), ShowKeys: showKeys, Seed: 1, Cache: testCache, Phases: 2}
	for i, c := range configs {
		opts.Configs = append(opts.Configs, ConfigFile{Name: fmt.Sprintf("config-%d.json", i), Data: []byte(c)})
	}
	if edit != nil {
		edit(&opts)
	}
	results, err := Run(context.Background(), log, opts)
	if err != nil {
		tb.Fatal(err)
	}
	s := Summarize(log, showKeys, results)
	return s, decodeSummary(tb, s)
}

// decodeSummary is s as summary.json holds it, decoded into maps.
func decodeSummary(tb testing.TB, s *Summary) map[string]any {
	tb.Helper()
	data, err := s.MarshalIndent()
	if err != nil {
		tb.Fatal(err)
	}
	var decoded map[string]any
	if err := json.Unmarshal(data, &decoded); err != nil {
		tb.Fatal(err)
	}
	return decoded
}
