package limiter_test

import (
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/limiter"
)

// BenchmarkTake measures one decision: 100 per second with a request every
// 5ms, so once the burst is spent requests alternate between admitted and
// rejected.
func BenchmarkTake(b *testing.B) {
	bucket := mustBucket(b, limiter.BucketLimit{Capacity: 100, RefillTokens: 100, RefillInterval: time.Second})
	s := bucket.Initial(0)
	now := int64(0)
	var d limiter.Decision
	b.ReportAllocs()
	for b.Loop() {
		now += 5 * ms
		s, d = bucket.Take(s, now, 1)
	}
	_ = d
}
