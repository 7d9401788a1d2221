package abitest

import (
	"sort"
	"strings"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/hostcore"
)

// Options configure a Host. The zero value is usable: the plugin's registered VM context, no
// configuration, empty names, every log level, no gRPC cluster.
type Options struct {
	// VMContext is the plugin to run; nil runs the one registered with abi.SetVMContext.
	VMContext types.VMContext
	// Configuration is the plugin configuration, VMConfiguration the VM's.
	Configuration, VMConfiguration []byte
	// PluginName, RootID and VMID are Envoy's config.name, config.root_id and vm_config.vm_id:
	// the plugin_name, plugin_root_id and plugin_vm_id attributes; VMID selects the
	// shared-data namespace.
	PluginName, RootID, VMID string
	// SharedData defaults to a new store; share one between Hosts run one after the other to
	// model a VM that replaces another.
	SharedData *hostcore.SharedData
	// LogLevel is the host's log level: lines below it are dropped, as Envoy drops them.
	LogLevel abi.LogLevel
	// GrpcClusters are the clusters a gRPC call may name; a call to any other fails to start as
	// in Envoy (ParseFailure).
	GrpcClusters []string
	// Monotonic and Wall are the clocks' first readings; 0 means DefaultMonotonic and
	// DefaultWall.
	Monotonic, Wall int64
}

// The clocks' default first readings: a monotonic clock well away from zero, as Envoy's is, and
// 2026-01-01T00:00:00Z.
const (
	DefaultMonotonic int64 = 1_000_000_000_000
	DefaultWall      int64 = 1_767_225_600_000_000_000
)

// LogLine is one line the plugin logged.
type LogLine struct {
	Level   abi.LogLevel
	Message string
}

// rootID is the plugin's root context id; streams count from it.
const rootID = 1

// Host is Envoy's side for one plugin on one VM.
type Host struct {
	t       testing.TB
	opts    Options
	vm      *abi.NativeVM
	data    *hostcore.SharedData
	lastID  uint32
	streams map[uint32]*Stream
	// current is the effective stream context, nil for the root context.
	current     *Stream
	configuring bool
	mono, wall  int64
	clockFails  bool
	logLevel    abi.LogLevel
	logs        []LogLine
	metrics     metrics
	tickPeriod  uint32
	grpc        grpcCalls
	misuses     []string
}

// New makes a Host without starting the plugin (StartPlugin does); the VM ends with the test.
func New(t testing.TB, opts Options) *Host {
	t.Helper()
	h := &Host{t: t, opts: opts, data: opts.SharedData, streams: map[uint32]*Stream{}, lastID: rootID,
		mono: opts.Monotonic, wall: opts.Wall, logLevel: opts.LogLevel}
	if h.data == nil {
		h.data = hostcore.NewSharedData()
	}
	if h.mono == 0 {
		h.mono = DefaultMonotonic
	}
	if h.wall == 0 {
		h.wall = DefaultWall
	}
	h.data.Acquire(opts.VMID)
	h.vm = abi.StartNativeVM(hostcalls{h}, opts.VMContext)
	t.Cleanup(func() {
		h.vm.Close()
		h.data.Release(opts.VMID)
		if len(h.misuses) > 0 {
			t.Errorf("the plugin misused the host: %s", strings.Join(h.misuses, "; "))
		}
	})
	return h
}

// Start makes a Host and starts the plugin.
func Start(t testing.TB, opts Options) (*Host, types.OnPluginStartStatus) {
	t.Helper()
	h := New(t, opts)
	return h, h.StartPlugin()
}

// StartPlugin starts the plugin as Envoy does: proxy_on_context_create for the root context,
// proxy_on_vm_start, proxy_on_configure (the configuration readable during it only).
func (h *Host) StartPlugin() types.OnPluginStartStatus {
	h.vm.ContextCreate(rootID, 0)
	if !h.vm.VMStart(len(h.opts.VMConfiguration)) {
		return types.OnPluginStartStatusFailed
	}
	h.configuring = true
	defer func() { h.configuring = false }()
	return types.OnPluginStartStatus(h.vm.Configure(rootID, len(h.opts.Configuration)))
}

// StopPlugin ends the root context (proxy_on_delete), as when Envoy drops the plugin.
func (h *Host) StopPlugin() { h.vm.Delete(rootID) }

// SharedData is the host's store.
func (h *Host) SharedData() *hostcore.SharedData { return h.data }

// Monotonic is the monotonic clock's reading.
func (h *Host) Monotonic() int64 { return h.mono }

// Wall is the wall clock's reading.
func (h *Host) Wall() int64 { return h.wall }

// FailClock makes every read of the monotonic clock fail from now on (fails true), or succeed
// again (abi.ClockFailer).
func (h *Host) FailClock(fails bool) { h.clockFails = fails }

// SetMonotonic sets the monotonic clock (a test may step it backwards; Envoy's never does).
func (h *Host) SetMonotonic(ns int64) { h.mono = ns }

// SetWall sets the wall clock.
func (h *Host) SetWall(ns int64) { h.wall = ns }

// Advance moves both clocks forward by d nanoseconds.
func (h *Host) Advance(d int64) { h.mono += d; h.wall += d }

// SetLogLevel sets the host's log level.
func (h *Host) SetLogLevel(level abi.LogLevel) { h.logLevel = level }

// TickPeriod is the tick period the plugin asked for, in milliseconds; 0 is none.
func (h *Host) TickPeriod() uint32 { return h.tickPeriod }

// Tick calls proxy_on_tick, as the plugin's timer firing, then carries out what it asked for
// the streams (continue, answer). A test ticking a plugin without a timer fails.
func (h *Host) Tick() {
	h.t.Helper()
	if h.tickPeriod == 0 {
		h.t.Fatal("abitest: Tick on a plugin that set no tick period: Envoy would never call proxy_on_tick")
	}
	h.CallAsRoot(func() { h.vm.Tick(rootID) })
}

// CallAsRoot runs fn as a root-context callback (a tick, a gRPC answer) would run, with the
// root context in effect, then carries out what it asked for the streams, as Envoy does once
// such a callback returns. Tests use it to call the plugin's own code directly.
func (h *Host) CallAsRoot(fn func()) {
	h.current = nil
	fn()
	h.current = nil
	for _, s := range h.sortedStreams() {
		s.settle()
	}
}

func (h *Host) sortedStreams() []*Stream {
	out := make([]*Stream, 0, len(h.streams))
	for _, s := range h.streams {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// Logs are the lines logged so far at or above the host's level when they were logged.
func (h *Host) Logs() []LogLine { return h.logs }

// LogsAt are the messages logged at level.
func (h *Host) LogsAt(level abi.LogLevel) []string {
	var out []string
	for _, l := range h.logs {
		if l.Level == level {
			out = append(out, l.Message)
		}
	}
	return out
}

// TakeMisuses returns the misuses so far and forgets them, for a test that expects them.
func (h *Host) TakeMisuses() []string {
	m := h.misuses
	h.misuses = nil
	return m
}

func (h *Host) misuse(what string) { h.misuses = append(h.misuses, what) }
