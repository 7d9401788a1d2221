package bench

import (
	"bytes"
	"compress/gzip"
	"testing"
	"time"
)

// BenchmarkModuleSize reports the size of the modules as built by `make build`: raw bytes and
// gzip (default level) bytes, the form an OCI image layer or an HTTP fetch carries; for Tollgate
// also its pieces (modulePieces), which add up to its size.
func BenchmarkModuleSize(b *testing.B) {
	for _, m := range []struct {
		name string
		wasm func(testing.TB) []byte
	}{{"tollgate", func(tb testing.TB) []byte { return tollgateModule(tb) }}, {"floor", func(tb testing.TB) []byte { return floorModule(tb) }}} {
		b.Run(m.name, func(b *testing.B) {
			wasm := m.wasm(b)
			var gz bytes.Buffer
			w := gzip.NewWriter(&gz)
			w.Write(wasm)
			w.Close()
			for b.Loop() {
			}
			b.ReportMetric(float64(len(wasm)), "bytes")
			b.ReportMetric(float64(gz.Len()), "gzip-bytes")
			if m.name == "tollgate" {
				sizes, err := pieceSizes(wasm, tollgateNames(b))
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range modulePieces {
					b.ReportMetric(float64(sizes[p.unit]), p.unit)
				}
			}
		})
	}
}

// BenchmarkMemory reports one VM's linear memory in 64 KiB pages: right after _initialize, after
// the plugin started (configuration parsed), after 1,000,000 requests over 10,000 keys and after
// 2,000,000. Go on wasm never gives memory back, so the last two must be equal: the benchmark
// fails if memory grew between them. The seed rule (3 per key, then 1 per second) with the clock
// advancing 10 µs per request mixes admitted and rejected requests (about 1 in 10 admitted once
// the first 30,000 have spent the bursts). It does its fixed work once, whatever b.N; ns/request
// is the mean time per request over the 2,000,000.
func BenchmarkMemory(b *testing.B) {
	const (
		keyCount = 10_000
		first    = 1_000_000
	)
	r := newRig(b, tollgateModule(b), rigOptions{config: seedConfig})
	start := r.vm.Stats()
	ks := keys("user", keyCount)
	admitted := 0
	send := func(from, to int) {
		for i := from; i < to; i++ {
			r.clock.Advance(10 * time.Microsecond)
			switch r.do(b, ks[i%keyCount]) {
			case 200:
				admitted++
			case 429:
			default:
				b.Fatal("unexpected status")
			}
		}
	}
	began := time.Now()
	send(0, first)
	atFirst := r.vm.Stats()
	send(first, 2*first)
	elapsed := time.Since(began)
	atSecond := r.vm.Stats()
	for b.Loop() {
	}
	b.ReportMetric(float64(start.InitPages), "init-pages")
	b.ReportMetric(float64(start.MemoryPages), "started-pages")
	b.ReportMetric(float64(atFirst.MemoryPages), "1M-pages")
	b.ReportMetric(float64(atSecond.MemoryPages), "2M-pages")
	b.ReportMetric(float64(elapsed.Nanoseconds())/(2*first), "ns/request")
	b.ReportMetric(float64(admitted)/(2*first), "admitted/request")
	if atSecond.MemoryPages > atFirst.MemoryPages {
		b.Errorf("linear memory grew from %d pages after %d requests to %d after %d", atFirst.MemoryPages, first, atSecond.MemoryPages, 2*first)
	}
}
