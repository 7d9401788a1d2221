package e2e

import (
	"context"
	"testing"
)

// The module counts inside the VM and hands its counts to the host on its tick, so that a request
// costs no metric host call; it also hands them over when its root context goes away (a new
// configuration replaced it, or the plugin stopped). Steps in order, each with what the host shows.
func TestCountersReachTheHostOnTicksAndAtTheEnd(t *testing.T) {
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRig(t, p, coreConfig, 1)
			vm := g.vms[0]
			const admitted = "tollgate.rule.per-api-key.admitted"
			value := func() int64 { v, _ := g.host.Metrics().Value(admitted); return v }
			for i, step := range []struct {
				name     string
				do       func()
				requests int   // admitted requests sent after do
				want     int64 // what the host shows after them
			}{
				{"two requests, no tick yet: nothing handed over", func() {}, 2, 0},
				{"a tick hands both over", func() {
					if err := g.host.Tick(context.Background()); err != nil {
						t.Fatal(err)
					}
				}, 0, 2},
				{"one more waits for the next tick", func() {}, 1, 2},
				{"a new configuration ends the old root context, which hands its count over", func() {
					if err := g.host.Reconfigure(context.Background(), []byte(coreConfig)); err != nil {
						t.Fatal(err)
					}
				}, 0, 3},
				{"the new root context counts and ticks on its own", func() {}, 1, 3},
				{"closing the VM ends the plugin, which hands its count over", func() {
					if err := vm.Close(context.Background()); err != nil {
						t.Fatal(err)
					}
				}, 0, 4},
			} {
				step.do()
				for range step.requests {
					if status := g.request(vm, [2]string{"x-api-key", "k" + string(rune('a'+i))}).Status; status != 200 {
						t.Fatalf("step %d (%s): status %d", i, step.name, status)
					}
				}
				if got := value(); got != step.want {
					t.Fatalf("step %d (%s): the host shows %d admitted, want %d", i, step.name, got, step.want)
				}
			}
		})
	}
}
