package limiter_test

import (
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// BenchmarkWindowTake measures one decision of each window algorithm: 100
// per second with a request every 5ms, so past the first window requests
// are both admitted and rejected, and windows roll over every 200 requests.
func BenchmarkWindowTake(b *testing.B) {
	l := limiter.WindowLimit{Capacity: 100, Window: time.Second}
	b.Run("fixed", func(b *testing.B) {
		w := mustFixed(b, l)
		s := w.Initial(0)
		now := int64(0)
		var d limiter.Decision
		b.ReportAllocs()
		for b.Loop() {
			now += 5 * ms
			s, d = w.Take(s, now, 1)
		}
		_ = d
	})
	b.Run("sliding", func(b *testing.B) {
		w := mustSliding(b, l)
		s := w.Initial(0)
		now := int64(0)
		var d limiter.Decision
		b.ReportAllocs()
		for b.Loop() {
			now += 5 * ms
			s, d = w.Take(s, now, 1)
		}
		_ = d
	})
}
