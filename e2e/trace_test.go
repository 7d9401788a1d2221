package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

var statusNames = map[uint32]string{0: "OK", 1: "NotFound", 2: "BadArgument", 8: "CasMismatch"}

// TestCrossingTrace pins every crossing between Envoy and the module for the request types of
// the design's core rule, every option at its default (WASI calls of the Go runtime left out): what the module asks of the host, in
// order, and nothing more. A change here changes the per-request cost in Envoy.
func TestCrossingTrace(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lines []string
	record := false
	clock := host.NewManualClock(time.Now(), monotonicStart)
	h, err := host.New(context.Background(), module(t), host.Options{
		PluginName: "tollgate", VMID: "tollgate", PluginConfig: []byte(coreConfig), Clock: clock, CompilationCache: cache,
		// Info, as Envoy runs by default: the per-decision debug line is off.
		LogLevel: 2,
		Trace: func(e host.TraceEvent) {
			mu.Lock()
			defer mu.Unlock()
			if !record || strings.HasPrefix(e.Name, "wasi") {
				return
			}
			line := strings.Repeat("  ", e.Depth) + e.Name
			if !e.Callback {
				line += " -> " + statusNames[e.Result]
			}
			lines = append(lines, line)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, host: h, vms: []*host.VM{vm}, clock: clock, start: monotonicStart}
	var got []string
	for _, step := range []struct{ name, key string }{
		{"admitted, new key", "alice"}, {"admitted, known key", "alice"}, {"admitted, known key", "alice"},
		{"rejected", "alice"}, {"rejected again", "alice"}, {"missing key", ""},
	} {
		var headers [][2]string
		if step.key != "" {
			headers = append(headers, [2]string{"x-api-key", step.key})
		}
		mu.Lock()
		lines, record = nil, true
		mu.Unlock()
		r.request(vm, headers...)
		mu.Lock()
		got = append(got, "== "+step.name)
		got = append(got, lines...)
		record = false
		mu.Unlock()
	}
	// The counters of those six requests reach the host on the tick, one call per counter that
	// counted something.
	mu.Lock()
	lines, record = nil, true
	mu.Unlock()
	if err := h.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got = append(append(got, "== tick"), lines...)
	mu.Unlock()
	compareGolden(t, "crossings.golden", got)
}
