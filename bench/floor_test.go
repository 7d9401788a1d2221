package bench

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// requestType is one kind of request the ratio is reported for.
type requestType struct {
	name   string
	config string
	status int // what Tollgate answers; the floor always lets the request continue
	// prepare readies the keys on a rig (known keys are written once, rejected ones drained)
	// and returns the key of request i.
	prepare func(tb testing.TB, r *rig, n int) func(i int) string
}

const knownKeys = 1024

// known cycles through knownKeys keys, each sent once before the measurement.
func known(tb testing.TB, r *rig, n int) func(int) string {
	ks := keys("known", knownKeys)
	for _, k := range ks {
		r.expect(tb, k, 200)
	}
	return func(i int) string { return ks[i%knownKeys] }
}

// knownRejected is known with each key sent once more, which Tollgate rejects: its bucket is
// then empty and remembered as such by the VM, as for a client that keeps coming back over its
// limit. The floor probes, which decide nothing, answer every key 200, and must do so for all.
func knownRejected(tb testing.TB, r *rig, n int) func(int) string {
	key := known(tb, r, n)
	first := r.do(tb, key(0))
	if first != 429 && first != 200 {
		tb.Fatalf("key %q: status %d, want 429 (or 200 from a floor probe)", key(0), first)
	}
	for i := 1; i < knownKeys; i++ {
		r.expect(tb, key(i), first)
	}
	return key
}

// fresh gives every request a key never seen.
func fresh(tb testing.TB, r *rig, n int) func(int) string {
	ks := keys("new", n)
	return func(i int) string { return ks[i] }
}

// freshOnReusedSlots gives every request a key never seen, in a key table every row of which
// holds an idle bucket of an earlier key: the lot of new keys once a long-running proxy's table has
// been through many keys (shared data has no delete, so a row once written stays written).
// Filler keys write the rows first; the clock moves a microsecond per request, so each bucket is
// idle again (full: the admit-all limit refills a token a nanosecond) when the next key needs
// its slot.
func freshOnReusedSlots(tb testing.TB, r *rig, n int) func(int) string {
	for _, k := range keys("filler", 8*reusedSlots) {
		r.clock.Advance(time.Microsecond)
		r.expect(tb, k, 200)
	}
	ks := keys("new", n)
	return func(i int) string {
		r.clock.Advance(time.Microsecond)
		return ks[i]
	}
}

var requestTypes = []requestType{
	{name: "admitted-known", config: admitConfig, status: 200, prepare: known},
	// The keys' only token is spent when they are written once: every later request is rejected,
	// and each key is rejected once before the measurement.
	{name: "rejected", config: rejectConfig, status: 429, prepare: knownRejected},
	// A key never seen in a table that is all but empty: its row was never written.
	{name: "new-key", config: admitConfig, status: 200, prepare: fresh},
	{name: "new-key-reused-slot", config: reusedSlotConfig, status: 200, prepare: freshOnReusedSlots},
	// Requests without their key (the header empty, which is missing): the rule refuses them
	// with 401, as it would a flood of clients that send none.
	{name: "missing-key", config: admitConfig, status: 401, prepare: noKey},
	// The first two with the example configuration's rate-limit headers: rendered for each answer,
	// and added to an admitted request's response with three host calls more.
	{name: "admitted-known-headers", config: withHeaders(admitConfig), status: 200, prepare: known},
	{name: "rejected-headers", config: withHeaders(rejectConfig), status: 429, prepare: knownRejected},
}

// noKey gives every request an empty key.
func noKey(testing.TB, *rig, int) func(int) string { return func(int) string { return "" } }

// block is how many requests each module serves in turn.
const block = 128

// BenchmarkFloor runs Tollgate and the floor probe in the same host, interleaved in blocks of
// requests so that both see the same machine conditions. ns/op is Tollgate's time per request;
// floor-ns/op the probe's, and floor+clock-ns/op the clocked probe's, with one monotonic clock
// read per request (any time-based limiter needs one). vs-floor is Tollgate's time over the
// probe's, the ratio the target is set on (BENCHMARKS.md), and vs-clocked-floor over the clocked
// probe's: distinct units, neither a prefix of the other, so that no reader takes one for the
// other. hostcalls/op and alloc-callbacks/op are Tollgate's crossings
// out of the module and into its allocator per request, floor-hostcalls/op the probe's.
//
// With TOLLGATE_BENCH_BASELINE=FILE.wasm, a second build of Tollgate (another version, built as
// `make build` builds) takes its turns too, and baseline/floor is its ratio in the same run: the
// way to measure a change before and after against one floor.
func BenchmarkFloor(b *testing.B) {
	var baseline []byte
	if path := os.Getenv("TOLLGATE_BENCH_BASELINE"); path != "" {
		var err error
		if baseline, err = os.ReadFile(path); err != nil {
			b.Fatal(err)
		}
	}
	for _, rt := range requestTypes {
		b.Run(rt.name, func(b *testing.B) {
			tg := tollgateRig(b, tollgateModule(b), rt)
			fl, flc := newRig(b, floorModule(b), rigOptions{}), clockedFloorRig(b)
			rigs, status := []*rig{tg, fl, flc}, []int{rt.status, 200, 200}
			if baseline != nil {
				rigs, status = append(rigs, tollgateRig(b, baseline, rt)), append(status, rt.status)
			}
			turns := warmTurns(b, rt, rigs, status)
			tgBefore, flBefore := tg.vm.Stats(), fl.vm.Stats()
			b.ReportAllocs()
			times := inTurns(b, turns[0], turns[1:]...)
			floorTime, floorClockTime := times[0], times[1]
			tgCross, flCross := perRequest(tgBefore, tg.vm.Stats(), b.N), perRequest(flBefore, fl.vm.Stats(), b.N)
			b.ReportMetric(float64(floorTime.Nanoseconds())/float64(b.N), "floor-ns/op")
			b.ReportMetric(float64(floorClockTime.Nanoseconds())/float64(b.N), "floor+clock-ns/op")
			b.ReportMetric(float64(b.Elapsed())/float64(floorTime), "vs-floor")
			b.ReportMetric(float64(b.Elapsed())/float64(floorClockTime), "vs-clocked-floor")
			b.ReportMetric(tgCross.hostCalls, "hostcalls/op")
			b.ReportMetric(tgCross.allocations, "alloc-callbacks/op")
			b.ReportMetric(flCross.hostCalls, "floor-hostcalls/op")
			if baseline != nil {
				b.ReportMetric(float64(times[2])/float64(floorTime), "baseline/floor")
			}
		})
	}
}

// turn is one module's part in an interleaved benchmark: its rig, the key of request i, and the
// status it answers.
type turn struct {
	r      *rig
	key    func(i int) string
	status int
}

// warmup is how many requests each module serves before a benchmark measures it. A rig's first
// requests cost the host's side more than its later ones (its Go heap still grows, its garbage
// collector runs often), by about as many nanoseconds for every module: in a rig's first 20,000
// requests the clocked floor took 1.5 to 1.8 times its later time, and Tollgate's ratios were
// 0.15 to 0.4 lower (BENCHMARKS.md, "The first requests of a rig").
const warmup = 20_000

// warmTurns readies rt's requests on each rig for an interleaved benchmark: it prepares the keys
// of warmup+b.N requests (the measured rig's, the first, last), serves the first warmup of them
// in blocks in the order inTurns uses, and returns the turns inTurns measures, whose request i has
// the key of request warmup+i (a fresh key is never served twice). status is each rig's answer.
func warmTurns(b *testing.B, rt requestType, rigs []*rig, status []int) []turn {
	turns := make([]turn, len(rigs))
	for i := range rigs {
		k := (i + 1) % len(rigs) // the others in order, the measured rig last
		turns[k] = turn{rigs[k], rt.prepare(b, rigs[k], warmup+b.N), status[k]}
	}
	for done, round := 0, 0; done < warmup; round++ {
		n := min(block, warmup-done)
		for j := range turns {
			t := turns[(round+j)%len(turns)]
			for i := done; i < done+n; i++ {
				t.r.expect(b, t.key(i), t.status)
			}
		}
		done += n
	}
	shifted := make([]turn, len(turns))
	for i, t := range turns {
		key := t.key
		shifted[i] = turn{t.r, func(i int) string { return key(warmup + i) }, t.status}
	}
	return shifted
}

// inTurns sends b.N requests to each turn's module, in blocks of block requests, so that all see
// the same machine conditions: the measured module's under the benchmark's timer, every other's
// timed with the timer stopped. The modules take their turns in an order that rotates from one
// block to the next, so that none always runs right after the same other: which module ran after
// which moved the ratios measurably (the caches hold the code and data of the one before). Each
// still follows the same other in two blocks of three (three of four among four modules); an
// order drawn at random for each round measured no differently (BENCHMARKS.md, section 1, "Turn
// order"). It returns the others' times.
func inTurns(b *testing.B, measured turn, others ...turn) []time.Duration {
	turns := append([]turn{measured}, others...)
	times := make([]time.Duration, len(others))
	b.StopTimer()
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; round++ {
		n := min(block, b.N-done)
		for j := range turns {
			k := (round + j) % len(turns)
			t := turns[k]
			if k == 0 {
				b.StartTimer()
			}
			start := time.Now()
			for i := done; i < done+n; i++ {
				t.r.expect(b, t.key(i), t.status)
			}
			if k == 0 {
				b.StopTimer()
			} else {
				times[k-1] += time.Since(start)
			}
		}
		done += n
	}
	return times
}

// The floor probe does what it claims and nothing more: per request exactly one header read, one
// shared-data read and one write, with one allocator call per non-empty result, and the value it
// writes back is the one it read.
func TestFloorProbe(t *testing.T) {
	var names []string
	r := newRig(t, floorModule(t), rigOptions{trace: func(e host.TraceEvent) {
		if e.Depth > 0 {
			names = append(names, e.Name)
		}
	}})
	want := map[string][]string{
		"new": {"env.proxy_get_header_map_value", "proxy_on_memory_allocate", "env.proxy_get_shared_data", "env.proxy_set_shared_data"},
		"known": {"env.proxy_get_header_map_value", "proxy_on_memory_allocate", "env.proxy_get_shared_data",
			"proxy_on_memory_allocate", "env.proxy_set_shared_data"},
	}
	for _, step := range []string{"new", "known", "known"} {
		names = nil
		r.expect(t, "alice", 200)
		if !slices.Equal(names, want[step]) {
			t.Errorf("%s key: crossings %q, want %q", step, names, want[step])
		}
	}
	if value, cas, st := r.shared.Get("tollgate", "alice"); st != wire.StatusOK || len(value) != 32 || cas != 3 {
		t.Errorf("stored value %x, cas %d, status %d; want 32 zero bytes written three times", value, cas, st)
	}
}

// The known keys of the benchmarks each have a bucket of their own, so no run can find one
// charged by another (a rejected request where 200 was expected) and the crossings measured are
// those of a known key: once written, each key's request reads exactly one row. The secret is
// fixed (benchSecret), so this holds on every run.
func TestKnownKeysHaveSlotsOfTheirOwn(t *testing.T) {
	r := newRig(t, tollgateModule(t), rigOptions{config: rejectConfig})
	known(t, r, 0)
	before := r.shared.Stats()
	for _, k := range keys("known", knownKeys) {
		r.expect(t, k, 429)
	}
	after := r.shared.Stats()
	if reads := after.Gets - before.Gets; reads != knownKeys || after.Sets != before.Sets {
		t.Fatalf("%d rejected requests of known keys read %d rows and wrote %d, want one read each and no write",
			knownKeys, reads, after.Sets-before.Sets)
	}
}

// The new keys of new-key-reused-slot each find their row written, its first slot holding an idle
// bucket of a filler key, so each bucket takes that one over: it reads the row and writes it,
// never creating a row nor lengthening one (shared data holds as many values, and as many bytes,
// after the request as before), and reads no overflow bucket, as no key drew from it: the request
// type measures what it is named for, in as many reads and writes as a new key whose row was
// never written.
func TestReusedSlotsAreAllWritten(t *testing.T) {
	const n = 64
	r := newRig(t, tollgateModule(t), rigOptions{config: reusedSlotConfig})
	key := freshOnReusedSlots(t, r, n)
	// stored is how many values shared data holds, and their bytes.
	stored := func() (values, bytes int) {
		entries := r.shared.Entries("tollgate")
		for _, v := range entries {
			bytes += len(v)
		}
		return len(entries), bytes
	}
	for i := range n {
		before := r.shared.Stats()
		values, size := stored()
		r.expect(t, key(i), 200)
		after := r.shared.Stats()
		if reads, writes := after.Gets-before.Gets, after.Sets-before.Sets; reads != 1 || writes != 1 {
			t.Fatalf("new key %d read %d times and wrote %d times, want 1 and 1", i, reads, writes)
		}
		nowValues, nowSize := stored()
		if nowValues != values {
			t.Fatalf("new key %d: shared data holds %d values, %d before: it created a row", i, nowValues, values)
		}
		if nowSize != size {
			t.Fatalf("new key %d: shared data holds %d bytes, %d before: it lengthened a row", i, nowSize, size)
		}
	}
}
