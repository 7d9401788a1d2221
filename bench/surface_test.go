package bench

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

// surfaceProbe is the surface probe's configuration for each request type BenchmarkSurface runs,
// those whose targets are set against the clocked floor: "reject" answers a known key 429.
var surfaceProbe = map[string]string{"admitted-known": "admit", "rejected": "reject"}

// surfaceTypes are the request types of BenchmarkFloor that BenchmarkSurface runs.
func surfaceTypes() []requestType {
	var types []requestType
	for _, rt := range requestTypes {
		if _, ok := surfaceProbe[rt.name]; ok {
			types = append(types, rt)
		}
	}
	return types
}

// surfaceModule is the surface probe (bench/testdata/surface), built as the filter is.
func surfaceModule(tb testing.TB) []byte { return build(tb, surfacePkg) }

// glueModule is the glue probe (bench/testdata/glue): the surface probe's crossings through
// Tollgate's ABI layer, built as the filter is.
func glueModule(tb testing.TB) []byte { return build(tb, gluePkg) }

// directModule is the direct-decision probe (bench/testdata/direct): the surface probe's
// crossings through Tollgate's ABI layer, with a decision for the benchmarks' rule written directly
// between them, built as the filter is.
func directModule(tb testing.TB) []byte { return build(tb, directPkg) }

// The rigs of the interleaved benchmarks, each for the request type it serves.

// tollgateRig runs a build of Tollgate (the tree's, or a baseline's) under rt's configuration.
func tollgateRig(tb testing.TB, module []byte, rt requestType) *rig {
	return newRig(tb, module, rigOptions{config: rt.config})
}

// clockedFloorRig runs the clocked floor probe, which takes no configuration.
func clockedFloorRig(tb testing.TB) *rig { return newRig(tb, floorModule(tb, "clock"), rigOptions{}) }

// probeRig runs the surface, glue or direct-decision probe, configured to answer rt's requests as
// Tollgate does.
func probeRig(tb testing.TB, module []byte, rt requestType) *rig {
	return newRig(tb, module, rigOptions{config: surfaceProbe[rt.name]})
}

// BenchmarkSurface measures how far a target against the clocked floor can be reached by making
// Tollgate's own code cheaper. The surface probe makes exactly Tollgate's crossings for the request
// type (TestSurfaceProbe) and nothing else, so its time is what any module making them costs in
// this host. Tollgate, the clocked floor probe and the surface probe are interleaved in blocks of
// requests, as in BenchmarkFloor. ns/op and vs-clocked-floor are Tollgate's, as there;
// surface-over-clocked-floor is the surface probe's time over the clocked floor's, the least
// vs-clocked-floor any module making Tollgate's crossings can have; vs-surface is Tollgate's time
// over the surface probe's, its own code's share. The glue probe makes the same crossings through
// Tollgate's ABI layer, deciding nothing: glue-over-clocked-floor is the least vs-clocked-floor
// Tollgate can have while its callbacks go through that layer, and vs-glue Tollgate's time over
// the glue probe's, the decision's share. The unit names are distinct, none a prefix of another.
func BenchmarkSurface(b *testing.B) {
	for _, st := range surfaceTypes() {
		b.Run(st.name, func(b *testing.B) {
			tg, flc := tollgateRig(b, tollgateModule(b), st), clockedFloorRig(b)
			sf, gl := probeRig(b, surfaceModule(b), st), probeRig(b, glueModule(b), st)
			turns := warmTurns(b, st, []*rig{tg, flc, sf, gl}, []int{st.status, 200, st.status, st.status})
			tgBefore, sfBefore, glBefore := tg.vm.Stats(), sf.vm.Stats(), gl.vm.Stats()
			times := inTurns(b, turns[0], turns[1:]...)
			floorClockTime, surfaceTime, glueTime := times[0], times[1], times[2]
			tgCross, sfCross := perRequest(tgBefore, tg.vm.Stats(), b.N), perRequest(sfBefore, sf.vm.Stats(), b.N)
			glCross := perRequest(glBefore, gl.vm.Stats(), b.N)
			b.ReportMetric(float64(floorClockTime.Nanoseconds())/float64(b.N), "floor+clock-ns/op")
			b.ReportMetric(float64(surfaceTime.Nanoseconds())/float64(b.N), "surface-ns/op")
			b.ReportMetric(float64(glueTime.Nanoseconds())/float64(b.N), "glue-ns/op")
			b.ReportMetric(float64(b.Elapsed())/float64(floorClockTime), "vs-clocked-floor")
			b.ReportMetric(float64(surfaceTime)/float64(floorClockTime), "surface-over-clocked-floor")
			b.ReportMetric(float64(glueTime)/float64(floorClockTime), "glue-over-clocked-floor")
			b.ReportMetric(float64(b.Elapsed())/float64(surfaceTime), "vs-surface")
			b.ReportMetric(float64(b.Elapsed())/float64(glueTime), "vs-glue")
			b.ReportMetric(tgCross.hostCalls, "hostcalls/op")
			b.ReportMetric(sfCross.hostCalls, "surface-hostcalls/op")
			b.ReportMetric(glCross.hostCalls, "glue-hostcalls/op")
		})
	}
}

// BenchmarkDirect measures what a decision on Tollgate's ABI layer costs when it is written
// directly for the benchmarks' one rule. The direct-decision probe makes Tollgate's crossings
// through that layer, as the glue probe does, and between them decides as any limiter of that
// rule must, in one function: the shadow marker and the key found among the headers by name, the
// owner hashed as Tollgate hashes it, a key found too low answered from memory, a token taken
// with Tollgate's limiter and the bucket written back. Tollgate, the clocked floor probe and the
// direct probe are interleaved in blocks of requests, as in BenchmarkSurface. ns/op and
// vs-clocked-floor are Tollgate's; direct-over-clocked-floor is the direct probe's time over the
// clocked floor's: a target against the clocked floor below it would need a decision cheaper than
// one written directly for the rule; vs-direct is Tollgate's time over the direct probe's, what
// Tollgate's generality and structure add.
func BenchmarkDirect(b *testing.B) {
	for _, st := range surfaceTypes() {
		b.Run(st.name, func(b *testing.B) {
			tg, flc := tollgateRig(b, tollgateModule(b), st), clockedFloorRig(b)
			dr := probeRig(b, directModule(b), st)
			turns := warmTurns(b, st, []*rig{tg, flc, dr}, []int{st.status, 200, st.status})
			tgBefore, drBefore := tg.vm.Stats(), dr.vm.Stats()
			times := inTurns(b, turns[0], turns[1:]...)
			floorClockTime, directTime := times[0], times[1]
			tgCross, drCross := perRequest(tgBefore, tg.vm.Stats(), b.N), perRequest(drBefore, dr.vm.Stats(), b.N)
			b.ReportMetric(float64(floorClockTime.Nanoseconds())/float64(b.N), "floor+clock-ns/op")
			b.ReportMetric(float64(directTime.Nanoseconds())/float64(b.N), "direct-ns/op")
			b.ReportMetric(float64(b.Elapsed())/float64(floorClockTime), "vs-clocked-floor")
			b.ReportMetric(float64(directTime)/float64(floorClockTime), "direct-over-clocked-floor")
			b.ReportMetric(float64(b.Elapsed())/float64(directTime), "vs-direct")
			b.ReportMetric(tgCross.hostCalls, "hostcalls/op")
			b.ReportMetric(drCross.hostCalls, "direct-hostcalls/op")
		})
	}
}

// BenchmarkAlone runs one module at a time, each in a rig of its own with nothing interleaved:
// Tollgate, the direct-decision, glue and surface probes and the clocked floor, for the request
// types of BenchmarkSurface, warmed up as there. Its times are not for ratios (the interleaved
// benchmarks cancel the machine's noise, this one does not); it is for a sampling profile of one
// module's requests, where no other module's requests are (a run also holds its rig's setup and
// warm-up, which the difference between a long run and a short one removes). bench/profile
// (make bench-profile) makes the profiles: with TOLLGATE_BENCH_NAMES set to a file, each
// sub-benchmark writes its module's function name map there, which names the functions of the
// perf map wazero writes.
func BenchmarkAlone(b *testing.B) {
	probe := func(b *testing.B, module []byte, st requestType) (*rig, int) {
		return probeRig(b, module, st), st.status
	}
	modules := []struct {
		name, pkg string
		tags      []string
		// rig makes the module's rig for a request type, and says the status it answers with.
		rig func(b *testing.B, module []byte, st requestType) (*rig, int)
	}{
		{"tollgate", tollgatePkg, nil, func(b *testing.B, module []byte, st requestType) (*rig, int) {
			return tollgateRig(b, module, st), st.status
		}},
		{"direct", directPkg, nil, probe},
		{"glue", gluePkg, nil, probe},
		{"surface", surfacePkg, nil, probe},
		{"floor+clock", floorPkg, []string{"clock"}, func(b *testing.B, module []byte, _ requestType) (*rig, int) {
			return newRig(b, module, rigOptions{}), 200 // its upstream's answer
		}},
	}
	for _, st := range surfaceTypes() {
		for _, m := range modules {
			b.Run(m.name+"/"+st.name, func(b *testing.B) {
				if path := os.Getenv("TOLLGATE_BENCH_NAMES"); path != "" {
					writeNames(b, path, testbuild.Names(b, m.pkg, m.tags...))
				}
				r, status := m.rig(b, build(b, m.pkg, m.tags...), st)
				turns := warmTurns(b, st, []*rig{r}, []int{status})
				inTurns(b, turns[0])
			})
		}
	}
}

// writeNames writes a function name map to path, as `make build` writes the module's.
func writeNames(b *testing.B, path string, names wasmnames.Map) {
	var text bytes.Buffer
	if _, err := names.WriteTo(&text); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, text.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
}

// The surface, glue and direct-decision probes make Tollgate's crossings, no more and no fewer:
// for each request type of BenchmarkSurface, a request of a known key crosses between host and
// module in the same sequence with Tollgate and each probe (each callback with its arguments, the
// allocator's with the size it is asked for, each host call with its result), and gets the same
// response, local reply details included; and every value either stores is as long.
func TestSurfaceProbe(t *testing.T) {
	probes := []struct {
		name   string
		module func(testing.TB) []byte
	}{{"surface", surfaceModule}, {"glue", glueModule}, {"direct", directModule}}
	for _, st := range surfaceTypes() {
		for _, probe := range probes {
			t.Run(st.name+"/"+probe.name, func(t *testing.T) { probeMakesTollgatesCrossings(t, st, probe.module(t)) })
		}
	}
}

// probeMakesTollgatesCrossings compares a request of st's type to Tollgate and to the probe.
func probeMakesTollgatesCrossings(t *testing.T, st requestType, probe []byte) {
	var crossings []host.TraceEvent
	trace := func(e host.TraceEvent) {
		e.VM = 0 // each module runs in a host of its own
		crossings = append(crossings, e)
	}
	tg := newRig(t, tollgateModule(t), rigOptions{config: st.config, trace: trace})
	pr := newRig(t, probe, rigOptions{config: surfaceProbe[st.name], trace: trace})
	// The keys are prepared as the benchmarks prepare them (a rejected key was rejected once:
	// Tollgate remembers its bucket as too low, and the probe the key).
	sequence := func(r *rig) ([]host.TraceEvent, *host.Response) {
		r.req.Headers[len(r.req.Headers)-1][1] = st.prepare(t, r, 1)(0)
		crossings = nil
		resp, err := r.vm.Do(r.req, okUpstream)
		if err != nil {
			t.Fatal(err)
		}
		return crossings, resp
	}
	want, tgResp := sequence(tg)
	got, prResp := sequence(pr)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("probe's crossings:\n%+v\nTollgate's:\n%+v", got, want)
	}
	if len(want) < 8 {
		t.Fatalf("only %d crossings traced: %+v", len(want), want)
	}
	if tgResp.Status != st.status || !reflect.DeepEqual(prResp, tgResp) {
		t.Fatalf("probe's response %+v, Tollgate's %+v", prResp, tgResp)
	}
	// lengths are the lengths of the values a rig stored, the secret aside.
	lengths := func(r *rig) map[int]bool {
		seen := map[int]bool{}
		for name, v := range r.shared.Entries("tollgate") {
			if name != secretKey {
				seen[len(v)] = true
			}
		}
		return seen
	}
	if got, want := lengths(pr), lengths(tg); len(want) != 1 || !reflect.DeepEqual(got, want) {
		t.Errorf("probe's values are %v bytes long, Tollgate's %v; want one length for all", got, want)
	}
}
