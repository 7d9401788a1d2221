package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

var cache = wazero.NewCompilationCache()

// build compiles a package of this repository into a module as `make build` does, with the given
// build tags, once per test binary (internal/testbuild).
func build(tb testing.TB, pkg string, tags ...string) []byte {
	tb.Helper()
	return testbuild.Module(tb, pkg, tags...)
}

// The modules under test. statsTag adds the diagnostic export tollgate_stats.
const statsTag = "tollgate_stats"

// The packages the modules under test are built from: Tollgate's and the probes'.
const (
	tollgatePkg = "./filter"
	floorPkg    = "./bench/testdata/floor"
	surfacePkg  = "./bench/testdata/surface"
	gluePkg     = "./bench/testdata/glue"
	directPkg   = "./bench/testdata/direct"
)

func tollgateModule(tb testing.TB, tags ...string) []byte { return build(tb, tollgatePkg, tags...) }

// tollgateNames is the function name map of tollgateModule, which `make build` writes beside it.
func tollgateNames(tb testing.TB, tags ...string) wasmnames.Map {
	return testbuild.Names(tb, tollgatePkg, tags...)
}
func floorModule(tb testing.TB, tags ...string) []byte {
	return build(tb, floorPkg, tags...)
}

// Configurations. Every option is at its default (no rate-limit headers, info logging) but the
// key table, sized so that the benchmarks' thousands of keys practically never share a slot.
const (
	// admitConfig admits every request of a benchmark: a bucket no run can empty.
	admitConfig = `{"key_table": {"max_keys": 10000000}, "rules": [{"name": "per-api-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1000000000, "refill_tokens": 1000000000, "refill_interval": "1s"}]}]}`
	// rejectConfig rejects every request after a key's first: one token a day, and the clock
	// stands still.
	rejectConfig = `{"key_table": {"max_keys": 10000000}, "rules": [{"name": "per-api-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "24h"}]}]}`
	// reusedSlots is the size of reusedSlotConfig's key table.
	reusedSlots = 1024
	// seedConfig is the design's core rule: 3 per key, then 1 per second.
	seedConfig = `{"key_table": {"max_keys": 10000000}, "rules": [{"name": "per-api-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]}]}`
)

// hostOptions are the options of every benchmark's host: one plugin, "tollgate", with config as
// its configuration, logging at info as Envoy does by default.
func hostOptions(config string) host.Options {
	return host.Options{PluginName: "tollgate", RootID: "tollgate", VMID: "tollgate", PluginConfig: []byte(config), LogLevel: 2}
}

// reusedSlotConfig is admitConfig over a table of reusedSlots slots, which the benchmark fills
// with idle buckets (freshOnReusedSlots).
var reusedSlotConfig = strings.Replace(admitConfig, `"max_keys": 10000000`, `"max_keys": `+strconv.Itoa(reusedSlots), 1)

// withHeaders is a configuration with the example configuration's rate-limit headers
// (examples/tollgate.json: "x-ratelimit"), which the response to each request carries.
func withHeaders(config string) string {
	return strings.Replace(config, "{", `{"rate_limit_headers": "x-ratelimit", `, 1)
}

// benchSecret is the key table's hash secret in every benchmark, stored before the first VM
// starts: which slots a key set's buckets take is then the same on every run, and
// TestKnownKeysHaveSlotsOfTheirOwn checks that the known keys never share one.
var benchSecret = [2]uint64{0x62656e6368, 0x5ec2e7}

// secretKey is where the module keeps it (internal/admission: "tollgate/v2/<plugin>/secret").
const secretKey = "tollgate/v2/tollgate/secret"

func seedSecret(shared *host.SharedData) {
	if _, _, st := shared.Get("tollgate", secretKey); st != wire.StatusNotFound {
		return
	}
	value := make([]byte, 20)
	copy(value, "TGk1")
	binary.LittleEndian.PutUint64(value[4:], benchSecret[0])
	binary.LittleEndian.PutUint64(value[12:], benchSecret[1])
	shared.Set("tollgate", secretKey, value, 0)
}

// monotonicStart is far from zero, like a host that has been up for a while.
const monotonicStart = int64(3_600 * time.Second)

// rig is one host with one VM and a manual clock, sending requests with a key header.
type rig struct {
	host   *host.Host
	vm     *host.VM
	clock  *host.ManualClock
	req    host.Request
	shared *host.SharedData
}

type rigOptions struct {
	config string
	shared *host.SharedData
	trace  func(host.TraceEvent)
	// calls, when set, counts every call of a function defined in the module (guestCalls).
	calls *guestCalls
}

func newRig(tb testing.TB, wasm []byte, o rigOptions) *rig {
	tb.Helper()
	if o.shared == nil {
		o.shared = host.NewSharedData()
	}
	if o.config != "" { // Tollgate (the surface probe ignores the secret); the floor probe takes no configuration
		seedSecret(o.shared)
	}
	r := &rig{clock: host.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), monotonicStart)}
	ctx := context.Background()
	compilationCache := cache
	if o.calls != nil {
		// The listeners are compiled into the module's code, so a listened-to module is compiled
		// for this rig alone: a cached compilation would keep another rig's listeners.
		ctx = experimental.WithFunctionListenerFactory(ctx, o.calls)
		compilationCache = nil
	}
	opts := hostOptions(o.config)
	opts.Clock, opts.SharedData, opts.CompilationCache, opts.Trace = r.clock, o.shared, compilationCache, o.trace
	h, err := host.New(ctx, wasm, opts)
	if err != nil {
		tb.Fatalf("load module: %v", err)
	}
	tb.Cleanup(func() { h.Close(context.Background()) })
	r.host, r.shared = h, h.SharedData()
	if r.vm, err = h.NewVM(context.Background()); err != nil {
		tb.Fatalf("start VM: %v", err)
	}
	r.req = newRequest()
	return r
}

// newRequest is a GET with the pseudo-headers Envoy passes, a user agent and an x-api-key (last).
func newRequest() host.Request {
	return host.Request{
		Headers: [][2]string{
			{":method", "GET"}, {":path", "/api/items"}, {":authority", "example.test"}, {":scheme", "http"},
			{"user-agent", "bench/1"}, {"x-api-key", ""},
		},
		SourceAddress: "192.0.2.10:40000",
		EndOfStream:   true,
	}
}

var okResponse = host.Response{Status: 200, Headers: [][2]string{{"content-type", "text/plain"}}, Body: []byte("ok\n")}

func okUpstream([][2]string) (*host.Response, error) {
	resp := okResponse
	return &resp, nil
}

// do sends one request with the given key on the rig's VM and returns its status.
func (r *rig) do(tb testing.TB, key string) int {
	r.req.Headers[len(r.req.Headers)-1][1] = key
	resp, err := r.vm.Do(r.req, okUpstream)
	if err != nil {
		tb.Fatalf("request: %v", err)
	}
	return resp.Status
}

// expect sends one request and fails the benchmark on another status.
func (r *rig) expect(tb testing.TB, key string, status int) {
	if got := r.do(tb, key); got != status {
		tb.Fatalf("key %q: status %d, want %d", key, got, status)
	}
}

// keys returns n distinct keys with a prefix.
func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%07d", prefix, i)
	}
	return out
}

// stats is the difference of two host readings over n requests.
type crossings struct{ hostCalls, allocations float64 }

func perRequest(before, after host.Stats, n int) crossings {
	return crossings{
		hostCalls:   float64(after.HostCalls-before.HostCalls) / float64(n),
		allocations: float64(after.Allocations-before.Allocations) / float64(n),
	}
}

// guestCalls counts the calls of functions defined in a module (not its imports), through
// wazero's function listeners: how many Go functions, compiled to Wasm, one request runs. Upstream
// Go's Wasm makes every call expensive (its own stack in linear memory, resumable calls), so this
// count tracks the guest's work on the request path in any engine. Only for the crossings
// benchmark: listeners slow every call down.
type guestCalls struct {
	total  int64
	byFunc map[string]int64 // by function name, when non-nil
	// byImport counts the host calls by import, when non-nil (kept with byFunc; the crossings
	// benchmark's trace fills it).
	byImport map[string]int64
	// names names the functions for byFunc: the module keeps only its entry points' names.
	names wasmnames.Map
	// bulk, when set, are the functions instrumentBulkMemory added to the module: their calls are
	// its memory.copy and memory.fill instructions, counted in copies and fills (and in byFunc by
	// the function that made them), not as guest calls.
	bulk          *bulkFunctions
	copies, fills int64
}

func (c *guestCalls) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if def.GoFunction() != nil {
		return nil // a host function, not the module's
	}
	if b := c.bulk; b != nil && (def.Index() == b.copy || def.Index() == b.fill) {
		l := bulkListener{c: c, count: &c.copies, instruction: "memory.copy"}
		if def.Index() == b.fill {
			l.count, l.instruction = &c.fills, "memory.fill"
		}
		return l
	}
	return guestCallListener{c, c.name(def)}
}

// name is a function's name in the module's name map, or wazero's name for it.
func (c *guestCalls) name(def api.FunctionDefinition) string {
	if mapped, ok := c.names.Lookup(def.Index()); ok {
		return mapped
	}
	return def.DebugName()
}

type guestCallListener struct {
	c    *guestCalls
	name string
}

func (l guestCallListener) Before(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {
	l.c.total++
	if l.c.byFunc != nil {
		l.c.byFunc[l.name]++
	}
}
func (guestCallListener) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}
func (guestCallListener) Abort(context.Context, api.Module, api.FunctionDefinition, error)    {}

// bulkListener counts the calls of one of the functions instrumentBulkMemory added: each is a
// memory.copy or memory.fill of the calling function.
type bulkListener struct {
	c           *guestCalls
	count       *int64
	instruction string
}

func (l bulkListener) Before(_ context.Context, _ api.Module, _ api.FunctionDefinition, _ []uint64, stack experimental.StackIterator) {
	*l.count++
	if l.c.byFunc == nil {
		return
	}
	caller := "?"
	stack.Next()      // the added function
	if stack.Next() { // its caller
		caller = l.c.name(stack.Function().Definition())
	}
	l.c.byFunc[l.instruction+" in "+caller]++
}
func (bulkListener) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}
func (bulkListener) Abort(context.Context, api.Module, api.FunctionDefinition, error)    {}
