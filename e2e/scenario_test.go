package e2e

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/e2e/scenario"
	"github.com/tollgate-proxy/tollgate/internal/gateway"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// The shared scenario of package scenario, over real HTTP through the module in the embedded
// host with two worker VMs, under both Envoy generations. e2e/envoy runs the same steps against
// a real Envoy; here the clock stands still, so Retry-After must be exact.
func TestSharedScenarioInProcess(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(scenario.Upstream())
	defer upstream.Close()
	upstreamURL, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			ctx := context.Background()
			h, err := host.New(ctx, module(t), host.Options{
				Profile: p, PluginName: "tollgate", RootID: "tollgate", VMID: "tollgate",
				PluginConfig: []byte(scenario.Config), CompilationCache: cache,
				Clock: host.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), monotonicStart),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(ctx)
			gw, err := gateway.New(ctx, h, 2, upstreamURL, log.New(io.Discard, "", 0))
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(gw)
			defer front.Close()

			if err := scenario.Run(ctx, front.Client(), front.URL, scenario.FrozenClock); err != nil {
				t.Fatal(err)
			}
			if err := h.Tick(ctx); err != nil { // the module hands its counts over on ticks
				t.Fatal(err)
			}
			for _, want := range scenario.WantCounters() {
				if got, ok := h.Metrics().Value(want.Stat); !ok || got != want.Value {
					t.Errorf("counter %s = %d (defined: %v), want %d; the module defines %q",
						want.Stat, got, ok, want.Value, h.Metrics().Names())
				}
			}
		})
	}
}
