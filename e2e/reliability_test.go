package e2e

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// Helpers of the reliability tests: exactness under concurrency, contention, faults,
// panics, configuration pushes and the poll_oneoff soak.

// rigOptions adjust a rig's host before its VMs start.
type rigOptions struct {
	wasm []byte // the module; nil is the product module
	// secret, when non-zero, is stored as the key table's hash secret before the first VM
	// starts, so that which keys share a slot is the same on every run.
	secret [2]uint64
	shared *host.SharedData
	// adjust, when set, changes the host's options before it loads the module.
	adjust func(*host.Options)
}

// newRigWith is newRig with a module, a store and a secret of the test's choosing.
func newRigWith(t testing.TB, profile host.Profile, config string, workers int, o rigOptions) *rig {
	t.Helper()
	if o.wasm == nil {
		o.wasm = module(t)
	}
	if o.shared == nil {
		o.shared = host.NewSharedData()
	}
	if o.secret != [2]uint64{} {
		value := make([]byte, 20)
		copy(value, "TGk1")
		binary.LittleEndian.PutUint64(value[4:], o.secret[0])
		binary.LittleEndian.PutUint64(value[12:], o.secret[1])
		o.shared.Set("tollgate", secretKey, value, 0)
	}
	g := &rig{t: t, clock: host.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), monotonicStart), start: monotonicStart}
	opts := host.Options{
		Profile:          profile,
		PluginName:       "tollgate",
		RootID:           "tollgate",
		VMID:             "tollgate",
		PluginConfig:     []byte(config),
		Clock:            g.clock,
		SharedData:       o.shared,
		CompilationCache: cache,
		Log: func(e host.LogEntry) {
			g.mu.Lock()
			g.logs = append(g.logs, e)
			g.mu.Unlock()
		},
	}
	if o.adjust != nil {
		o.adjust(&opts)
	}
	h, err := host.New(context.Background(), o.wasm, opts)
	if err != nil {
		t.Fatalf("load module: %v", err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	g.host = h
	for i := 0; i < workers; i++ {
		g.addVM()
	}
	return g
}

// addVM starts one more worker VM.
func (g *rig) addVM() *host.VM {
	g.t.Helper()
	vm, err := g.host.NewVM(context.Background())
	if err != nil {
		g.t.Fatalf("start VM: %v\nlogs:\n%s", err, g.logText())
	}
	g.vms = append(g.vms, vm)
	return vm
}

// Shared-data keys of the plugin "tollgate" (internal/admission: "tollgate/v2/<plugin>/...").
const (
	secretKey = "tollgate/v2/tollgate/secret"
	rowPrefix = "tollgate/v2/tollgate/row/"
)

// countLogs counts the log lines containing s.
func (g *rig) countLogs(s string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, e := range g.logs {
		if strings.Contains(e.Message, s) {
			n++
		}
	}
	return n
}

// rows returns the plugin's key-table rows: shared-data key → value.
func (g *rig) rows() map[string][]byte {
	out := map[string][]byte{}
	for k, v := range g.host.SharedData().Entries("tollgate") {
		if strings.HasPrefix(k, rowPrefix) {
			out[k] = v
		}
	}
	return out
}

// slots returns the plugin's key-table slots that hold something: the row's shared-data key and
// the slot's place in it ("<row key>#3") → the slot's value.
func (g *rig) slots() map[string][]byte {
	out := map[string][]byte{}
	for k, v := range g.rows() {
		for at := 0; at+slotSize <= len(v); at += slotSize {
			if slot := v[at : at+slotSize]; string(slot) != string(make([]byte, slotSize)) {
				out[k+"#"+strconv.Itoa(at/slotSize)] = slot
			}
		}
	}
	return out
}

// slotSize is the length of a slot value; a row holds rowSlots of them (internal/admission
// slot.go: defaultRowSlots).
const (
	slotSize = admission.SlotSize
	rowSlots = 8
)

// rowsOf is the number of rows of a table of maxKeys slots.
func rowsOf(maxKeys int) int { return (maxKeys + rowSlots - 1) / rowSlots }

// slotLayoutVersion is the layout version a slot value carries at offset 2 (internal/admission
// slot.go: slotVersion).
const slotLayoutVersion = 4

// isLive reports whether a slot value holds a bucket (internal/admission slot.go): magic "TG",
// the layout version, kind 1 in the high nibble of byte 3.
func isLive(value []byte) bool {
	return value[0] == 'T' && value[1] == 'G' && value[2] == slotLayoutVersion && value[3]>>4 == 1
}

// slotOwner is the owner hash stored in a slot value (internal/admission slot.go: offset 8).
func slotOwner(value []byte) uint64 {
	if len(value) != slotSize {
		return 0
	}
	return binary.LittleEndian.Uint64(value[8:])
}

// faultModule is the filter built with -tags tollgate_faults (internal/plugin/faults_on.go): requests
// carrying x-tollgate-fault panic at the named point.
func faultModule(t testing.TB) []byte {
	t.Helper()
	return testbuild.Module(t, "./filter", "tollgate_faults")
}
