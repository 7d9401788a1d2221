package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

var cache = wazero.NewCompilationCache()

// module is the product module, built from this tree once per test binary (internal/testbuild).
// A build failure fails the test: the suite never runs against a stale or missing module.
func module(t testing.TB) []byte {
	t.Helper()
	return testbuild.Product(t)
}

// profiles are the Envoy generations every scenario runs under.
var profiles = []host.Profile{host.Envoy133, host.Envoy139}

// rig is a host with its VMs, a manual clock and a log, for one scenario.
type rig struct {
	t     testing.TB
	host  *host.Host
	vms   []*host.VM
	clock *host.ManualClock
	start int64

	mu   sync.Mutex
	logs []host.LogEntry
}

// monotonicStart is far from zero, like a host that has been up for a while.
const monotonicStart = int64(3_600 * time.Second)

func newRig(t testing.TB, profile host.Profile, config string, workers int) *rig {
	t.Helper()
	return newRigWith(t, profile, config, workers, rigOptions{})
}

func (g *rig) logText() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var s string
	for _, e := range g.logs {
		s += fmt.Sprintf("  vm %d level %d: %s\n", e.VM, e.Level, e.Message)
	}
	return s
}

// at sets the clocks to the given offset from the scenario's start.
func (g *rig) at(offset time.Duration) {
	g.clock.Advance(time.Duration(g.start+int64(offset)) - time.Duration(g.clock.Monotonic()))
}

// okUpstream answers every forwarded request with 200.
func okUpstream(headers [][2]string) (*host.Response, error) {
	return &host.Response{Status: 200, Headers: [][2]string{{"content-type", "text/plain"}}, Body: []byte("ok\n")}, nil
}

// send runs one request through a VM and fails the test on a host error.
func (g *rig) send(vm *host.VM, req host.Request, upstream host.Upstream) *host.Response {
	g.t.Helper()
	if upstream == nil {
		upstream = okUpstream
	}
	resp, err := vm.Do(req, upstream)
	if err != nil {
		g.t.Fatalf("request: %v\nlogs:\n%s", err, g.logText())
	}
	return resp
}

// lastLog returns the last log line that starts with prefix, or "".
func (g *rig) lastLog(prefix string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.logs) - 1; i >= 0; i-- {
		if strings.HasPrefix(g.logs[i].Message, prefix) {
			return g.logs[i].Message
		}
	}
	return ""
}

// exactWait is the exact wait of the last rejection, from the module's debug line for it
// ("tollgate: decision limited rule R retry_after 700ms [...]").
func (g *rig) exactWait() string {
	_, wait, _ := strings.Cut(g.lastLog("tollgate: decision limited"), " retry_after ")
	wait, _, _ = strings.Cut(wait, " ")
	return wait
}

// counter returns a metric's value, 0 when it was never defined, after a tick: the module
// counts in the VM and hands its counts to the host on its ticks.
func (g *rig) counter(name string) int64 {
	g.t.Helper()
	if err := g.host.Tick(context.Background()); err != nil {
		g.t.Fatalf("tick: %v", err)
	}
	v, _ := g.host.Metrics().Value(name)
	return v
}

// request sends one GET through a VM with the given extra headers.
func (g *rig) request(vm *host.VM, headers ...[2]string) *host.Response {
	g.t.Helper()
	req := host.Request{
		Headers:       append([][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "example.test"}, {":scheme", "http"}}, headers...),
		SourceAddress: "192.0.2.10:40000",
		EndOfStream:   true,
	}
	resp, err := vm.Do(req, okUpstream)
	if err != nil {
		g.t.Fatalf("request: %v\nlogs:\n%s", err, g.logText())
	}
	return resp
}
