package bench

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// BenchmarkCrossings counts, per request type and per module, what crosses the host boundary for
// one request: host calls out of the module (hostcalls/op, all imports; wasi-calls/op, the WASI
// ones among them, from the Go runtime or the clock), callbacks into it (callbacks/op, the
// allocator excluded) and allocator calls (alloc-callbacks/op). It also reads the guest's heap
// allocations per request from the Go runtime inside the VM (guest-allocs/op, guest-bytes/op)
// through tollgate_stats, an export compiled only into benchmark builds: the modules here are
// built with -tags tollgate_stats, otherwise identical. guest-calls/op counts the calls of the
// module's own functions per request (wazero's function listeners, guestCalls), and
// bulk-copies/op and bulk-fills/op its memory.copy and memory.fill instructions, each a call out
// of wazero's compiled code (bulk_test.go: the module is run with each made a call, which those
// two count and guest-calls/op does not); with TOLLGATE_BENCH_CALLS=1 and -v it also logs them by
// function, and the host calls by import.
// Times are not the point here (tracing is on); BenchmarkFloor measures time on the production
// build.
//
// The first 20,000 requests warm the VM up (its heap, maps and arenas reach their steady size)
// and are not counted.
func BenchmarkCrossings(b *testing.B) {
	for _, m := range []struct {
		name string
		wasm func(testing.TB) []byte
		pkg  string
	}{
		{"tollgate", func(tb testing.TB) []byte { return tollgateModule(tb, statsTag) }, tollgatePkg},
		{"floor", func(tb testing.TB) []byte { return floorModule(tb, statsTag) }, floorPkg},
	} {
		for _, rt := range requestTypes {
			b.Run(m.name+"/"+rt.name, func(b *testing.B) {
				var callbacks, wasi int64
				calls := &guestCalls{}
				if os.Getenv("TOLLGATE_BENCH_CALLS") != "" {
					calls.byFunc = map[string]int64{}
					calls.names = testbuild.Names(b, m.pkg, statsTag)
					calls.byImport = map[string]int64{}
				}
				wasm, bulk, err := instrumentBulkMemory(m.wasm(b))
				if err != nil {
					b.Fatalf("count memory.copy and memory.fill: %v", err)
				}
				calls.bulk = &bulk
				r := newRig(b, wasm, rigOptions{config: rt.config, calls: calls, trace: func(e host.TraceEvent) {
					switch {
					case e.Depth == 0:
						callbacks++
					case !e.Callback && strings.HasPrefix(e.Name, "wasi_"):
						wasi++
					}
					if !e.Callback && calls.byImport != nil {
						calls.byImport[e.Name]++
					}
				}})
				status := rt.status
				if m.name == "floor" {
					status = 200
				}
				key := rt.prepare(b, r, warmup+b.N)
				for i := 0; i < warmup; i++ {
					r.expect(b, key(i), status)
				}
				callbacks, wasi = 0, 0
				before := r.vm.Stats()
				mallocs, bytes := guestStat(b, r, 0), guestStat(b, r, 1)
				calls.total, calls.copies, calls.fills = 0, 0, 0
				clear(calls.byFunc)
				clear(calls.byImport)
				b.ResetTimer()
				for i := warmup; i < warmup+b.N; i++ {
					r.expect(b, key(i), status)
				}
				b.StopTimer()
				guestCallCount := calls.total
				logCounts(b, "guest calls per request", calls.byFunc, b.N)
				logCounts(b, "host calls per request", calls.byImport, b.N)
				mallocs, bytes = guestStat(b, r, 0)-mallocs, guestStat(b, r, 1)-bytes
				c := perRequest(before, r.vm.Stats(), b.N)
				b.ReportMetric(c.hostCalls, "hostcalls/op")
				b.ReportMetric(float64(wasi)/float64(b.N), "wasi-calls/op")
				b.ReportMetric(float64(callbacks)/float64(b.N), "callbacks/op")
				b.ReportMetric(c.allocations, "alloc-callbacks/op")
				b.ReportMetric(float64(guestCallCount)/float64(b.N), "guest-calls/op")
				b.ReportMetric(float64(calls.copies)/float64(b.N), "bulk-copies/op")
				b.ReportMetric(float64(calls.fills)/float64(b.N), "bulk-fills/op")
				b.ReportMetric(float64(mallocs)/float64(b.N), "guest-allocs/op")
				b.ReportMetric(float64(bytes)/float64(b.N), "guest-bytes/op")
			})
		}
	}
}

// guestStat reads a field of the Go runtime's MemStats inside the VM (filter/stats.go).
func guestStat(tb testing.TB, r *rig, field uint64) uint64 {
	res, err := r.vm.CallExport("tollgate_stats", field)
	if err != nil {
		tb.Fatal(err)
	}
	return res[0]
}

// logCounts logs counts per request, most first, when they are kept (TOLLGATE_BENCH_CALLS is set:
// go test -bench Crossings -v): where the guest's calls and the host calls go.
func logCounts(b *testing.B, title string, counts map[string]int64, n int) {
	if counts == nil {
		return
	}
	names := make([]string, 0, len(counts))
	for name := range counts {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return counts[names[i]] > counts[names[j]] })
	var sb strings.Builder
	for _, name := range names {
		fmt.Fprintf(&sb, "%8.2f %s\n", float64(counts[name])/float64(n), name)
	}
	b.Logf("%s:\n%s", title, sb.String())
}

// With rate-limit headers (the example configuration has them), an answer allocates nothing on
// the guest's heap either, once a stream's context has rendered them before: an admitted request
// of a known key and a rejection, in both header styles. Counted by the Go runtime inside the VM,
// as BenchmarkCrossings counts them, over requests after a warm-up.
func TestRateLimitHeadersAllocateNothing(t *testing.T) {
	wasm := tollgateModule(t, statsTag)
	// The header each style's answer carries, admitted or rejected.
	for style, header := range map[string]string{"x-ratelimit": "x-ratelimit-remaining", "draft": "ratelimit"} {
		for _, rt := range requestTypes {
			if rt.name != "admitted-known" && rt.name != "rejected" {
				continue
			}
			t.Run(style+"/"+rt.name, func(t *testing.T) {
				config := strings.Replace(withHeaders(rt.config), "x-ratelimit", style, 1)
				r := newRig(t, wasm, rigOptions{config: config})
				const warm, requests = 2_000, 2_000
				key := rt.prepare(t, r, warm+requests+1)
				for i := 0; i < warm; i++ {
					r.expect(t, key(i), rt.status)
				}
				mallocs := guestStat(t, r, 0)
				for i := warm; i < warm+requests; i++ {
					r.expect(t, key(i), rt.status)
				}
				if n := guestStat(t, r, 0) - mallocs; n != 0 {
					t.Errorf("%d heap allocations in %d requests, want none", n, requests)
				}
				r.req.Headers[len(r.req.Headers)-1][1] = key(warm + requests)
				resp, err := r.vm.Do(r.req, okUpstream)
				if err != nil || resp.Status != rt.status || resp.Header(header) == "" {
					t.Fatalf("the answer lacks %s: %+v, %v", header, resp, err)
				}
			})
		}
	}
}
