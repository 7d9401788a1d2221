package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// exampleConfigPath is the configuration `make run` serves (the Makefile's CONFIG).
const exampleConfigPath = "../examples/tollgate.json"

// startupRules is the size of the large configuration: the most rules a configuration may have.
const startupRules = 64

// startupConfigs are the configurations BenchmarkStartup starts workers with.
func startupConfigs(tb testing.TB) []struct{ name, config string } {
	example, err := os.ReadFile(exampleConfigPath)
	if err != nil {
		tb.Fatal(err)
	}
	return []struct{ name, config string }{
		{"example", string(example)},
		{fmt.Sprintf("%d-rules", startupRules), manyRulesConfig(startupRules)},
	}
}

// BenchmarkStartup measures what one worker costs before it answers its first request, for the
// example configuration and for one of 64 varied rules: each op is a new host (its own shared
// data, as a fresh Envoy's) starting one VM, as Envoy does for each worker thread, and sending
// it one request. compiled has the module compiled already, as for every worker after the first
// (the host is made untimed, from a warm compilation cache); with-compile also compiles it
// (wazero's optimizing compiler, which internal/host and `tollgate serve` use), as the first
// worker does. ns/op is the whole; compile-ns/op the compilation (with-compile only);
// instantiate-ns/op instantiating the module and running _initialize (the Go runtime's start)
// and the root context's creation; configure-ns/op proxy_on_vm_start and proxy_on_configure
// (the plugin parses, validates and compiles its configuration) through the first request's
// answer. The split is read from the host's trace, whose events the host hands over as each
// top-level callback returns.
func BenchmarkStartup(b *testing.B) {
	wasm := tollgateModule(b)
	for _, c := range startupConfigs(b) {
		for _, compiled := range []bool{true, false} {
			name := c.name + "/with-compile"
			if compiled {
				name = c.name + "/compiled"
			}
			b.Run(name, func(b *testing.B) {
				var compile, instantiate, configure time.Duration
				for i := 0; i < b.N; i++ {
					phases := startWorker(b, wasm, c.config, compiled)
					compile += phases.compile
					instantiate += phases.instantiate
					configure += phases.configure
				}
				perOp := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
				if !compiled {
					b.ReportMetric(perOp(compile), "compile-ns/op")
				}
				b.ReportMetric(perOp(instantiate), "instantiate-ns/op")
				b.ReportMetric(perOp(configure), "configure-ns/op")
			})
		}
	}
}

// startupPhases is how long each part of one worker's start took.
type startupPhases struct{ compile, instantiate, configure time.Duration }

// startWorker starts one host with one VM and sends it one request, timing only that (the
// benchmark's timer runs for it alone). Compiled, the host comes from the warm compilation cache
// untimed; otherwise the host compiles the module afresh, timed.
func startWorker(b *testing.B, wasm []byte, pluginConfig string, compiled bool) startupPhases {
	var rootCreated time.Time
	opts := hostOptions(pluginConfig)
	// The root context's creation is handed over as it returns: proxy_on_vm_start comes next.
	// (The host calls _initialize makes are handed over one by one before it.)
	opts.Trace = func(e host.TraceEvent) {
		if rootCreated.IsZero() && e.Callback && e.Depth == 0 && e.Name == "proxy_on_context_create" {
			rootCreated = time.Now()
		}
	}
	ctx := context.Background()
	if compiled {
		b.StopTimer()
		opts.CompilationCache = cache
	}
	began := time.Now()
	h, err := host.New(ctx, wasm, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		b.StopTimer()
		h.Close(ctx)
		b.StartTimer()
	}()
	var phases startupPhases
	if compiled {
		b.StartTimer()
	} else {
		phases.compile = time.Since(began)
	}
	instantiating := time.Now()
	vm, err := h.NewVM(ctx)
	if err != nil {
		b.Fatal(err)
	}
	req := newRequest()
	req.Headers[len(req.Headers)-1][1] = "alice"
	resp, err := vm.Do(req, okUpstream)
	answered := time.Now()
	if err != nil || resp.Status != 200 {
		b.Fatalf("first request: %v, %v; want 200", resp, err)
	}
	phases.instantiate = rootCreated.Sub(instantiating)
	phases.configure = answered.Sub(rootCreated)
	return phases
}

// manyRulesConfig is a configuration of n distinct rules shaped like a real deployment's: rules
// that apply to every request, to path prefixes, methods, hosts and tenants' headers; keys of one
// or two parts (API key, client address, query parameter with a fallback, method and authority,
// an optional user header); token buckets, fixed, sliding and calendar windows, concurrency
// limits, two limits per rule; costs read from a header; shadow rules. The benchmark's request
// (GET /api/items with an x-api-key) falls under about a fifth of them and is admitted.
func manyRulesConfig(n int) string {
	rules := make([]map[string]any, n)
	for i := range rules {
		rule := map[string]any{
			"name":   fmt.Sprintf("rule-%02d", i),
			"key":    ruleKey(i),
			"limits": ruleLimits(i),
		}
		if m := ruleMatch(i); m != nil {
			rule["match"] = m
		}
		switch i % 6 {
		case 2:
			rule["missing_key"] = map[string]any{"action": "fallback", "key": []any{map[string]any{"client_ip": map[string]any{}}}}
		case 5:
			rule["missing_key"] = map[string]any{"action": "allow"}
		}
		if i%7 == 3 {
			rule["cost"] = map[string]any{"header": "x-cost", "max": 5, "default": 1}
		}
		if i%16 == 15 {
			rule["shadow"] = true
		}
		rules[i] = rule
	}
	doc, err := json.Marshal(map[string]any{
		"rules":              rules,
		"exempt":             map[string]any{"paths": []any{map[string]any{"exact": "/healthz"}}},
		"rate_limit_headers": "draft",
	})
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return string(doc)
}

// ruleMatch is rule i's match: none for every eighth rule, else one of seven shapes.
func ruleMatch(i int) map[string]any {
	switch i % 8 {
	case 1:
		return map[string]any{"path": map[string]any{"prefix": fmt.Sprintf("/svc-%02d/", i)}}
	case 2:
		return map[string]any{"methods": []string{"POST", "PUT"}, "path": map[string]any{"prefix": fmt.Sprintf("/orders-%02d/", i)}}
	case 3:
		return map[string]any{"hosts": []string{fmt.Sprintf("svc-%02d.example.com", i)}}
	case 4:
		return map[string]any{"headers": []any{map[string]any{"name": "x-tenant", "exact": fmt.Sprintf("tenant-%02d", i)}}}
	case 5:
		return map[string]any{"path": map[string]any{"exact": fmt.Sprintf("/svc-%02d/login", i)}, "methods": []string{"POST"}}
	case 6:
		return map[string]any{"path": map[string]any{"prefix": "/api/"}, "methods": []string{"GET", "HEAD"}}
	case 7:
		return map[string]any{"headers": []any{map[string]any{"name": "authorization", "present": true}}}
	}
	return nil
}

// ruleKey is rule i's key, one of six shapes.
func ruleKey(i int) []any {
	part := func(kind string, value any) map[string]any { return map[string]any{kind: value} }
	none := map[string]any{}
	switch i % 6 {
	case 1:
		return []any{part("client_ip", none)}
	case 2:
		return []any{part("query", "tenant")}
	case 3:
		return []any{part("header", "x-api-key"), part("path", none)}
	case 4:
		return []any{part("method", none), part("authority", none)}
	case 5:
		return []any{part("header", "x-user-id")}
	}
	return []any{part("header", "x-api-key")}
}

// ruleLimits is rule i's limits, one of five shapes with figures that vary with i.
func ruleLimits(i int) []any {
	tokenBucket := func(capacity, refill int, interval string) map[string]any {
		return map[string]any{"capacity": capacity, "refill_tokens": refill, "refill_interval": interval}
	}
	switch i % 5 {
	case 1:
		return []any{map[string]any{"algorithm": "fixed_window", "capacity": 1000 * (i + 1), "window": "1m"}}
	case 2:
		return []any{map[string]any{"algorithm": "sliding_window", "capacity": 100 + i, "window": "1h"}}
	case 3:
		return []any{tokenBucket(20+i, 1+i%4, "1s"), map[string]any{"algorithm": "fixed_window", "capacity": 10000 + i, "calendar": "day"}}
	case 4:
		return []any{tokenBucket(50+i, 50, "1m"), map[string]any{"algorithm": "concurrency", "max_in_flight": 4 + i%8, "slot_timeout": "30s"}}
	}
	return []any{tokenBucket(10+i, 1+i%4, "1s")}
}

// The configurations BenchmarkStartup starts are valid, and the large one has its 64 rules.
func TestStartupConfigurationsAreValid(t *testing.T) {
	for _, c := range startupConfigs(t) {
		cfg, err := config.Parse([]byte(c.config))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if c.name != "example" && len(cfg.Rules) != startupRules {
			t.Errorf("%s: %d rules, want %d", c.name, len(cfg.Rules), startupRules)
		}
	}
}

// BenchmarkUnpack instantiates the module as `make build` builds it, whose start function unpacks
// its data (internal/wasmdata), and the same build before its data was packed, whose data
// segments the engine writes itself, in turns of the same size, each first in every other turn: ns/op is the packed module's
// instantiation, segments-ns/op the unpacked one's, packed/segments their ratio. Instantiation
// alone, as wazero's InstantiateModule does it (the imports are stubs, and _initialize does not
// run: BenchmarkStartup times it).
func BenchmarkUnpack(b *testing.B) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	packed, err := r.CompileModule(ctx, tollgateModule(b))
	if err != nil {
		b.Fatal(err)
	}
	segments, err := r.CompileModule(ctx, testbuild.Unpacked(b, tollgatePkg))
	if err != nil {
		b.Fatal(err)
	}
	env := r.NewHostModuleBuilder("env")
	for _, f := range packed.ImportedFunctions() {
		if module, name, _ := f.Import(); module == "env" {
			env.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
				f.ParamTypes(), f.ResultTypes()).Export(name)
		}
	}
	if _, err := env.Instantiate(ctx); err != nil {
		b.Fatal(err)
	}
	config := wazero.NewModuleConfig().WithName("").WithStartFunctions() // the start section still runs
	instantiate := func(m wazero.CompiledModule) {
		instance, err := r.InstantiateModule(ctx, m, config)
		if err != nil {
			b.Fatal(err)
		}
		instance.Close(ctx)
	}
	var segmentsTime time.Duration
	timeSegments := func(n int) {
		start := time.Now()
		for range n {
			instantiate(segments)
		}
		segmentsTime += time.Since(start)
	}
	b.ResetTimer()
	for block, done := 0, 0; done < b.N; block++ {
		n := min(8, b.N-done)
		b.StopTimer()
		if block%2 == 1 { // each goes first in every other block
			timeSegments(n)
		}
		b.StartTimer()
		for range n {
			instantiate(packed)
		}
		b.StopTimer()
		if block%2 == 0 {
			timeSegments(n)
		}
		b.StartTimer()
		done += n
	}
	b.ReportMetric(float64(segmentsTime.Nanoseconds())/float64(b.N), "segments-ns/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(segmentsTime.Nanoseconds()), "packed/segments")
}
