package bench

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// nativeKeys is how many keys the native decisions cycle through.
const nativeKeys = 10_000

// BenchmarkDecision compares one rate-limit decision natively, in the same run: Tollgate's token
// bucket (package limiter) and golang.org/x/time/rate's Limiter.Allow, each on a per-key limiter
// looked up in a map by a string key, each reading the clock once (Allow reads time.Now itself;
// Tollgate's decision takes the time as an argument). 100 per second with a burst of 100, cycling
// over 10,000 keys, serial. Admission is the whole decision of the module (rules, key, state
// decoding, CAS write-back) on Envoy's shared data in memory (hostcore.SharedData), natively:
// its allocs/op are the admission package's own.
func BenchmarkDecision(b *testing.B) {
	ks := keys("key", nativeKeys)
	b.Run("limiter", func(b *testing.B) {
		bucket, err := limiter.NewBucket(limiter.BucketLimit{Capacity: 100, RefillTokens: 100, RefillInterval: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		states := make(map[string]*limiter.BucketState, nativeKeys)
		for _, k := range ks {
			s := bucket.Initial(0)
			states[k] = &s
		}
		admitted := 0
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s := states[ks[i%nativeKeys]]
			next, d := bucket.Take(*s, int64(time.Since(start)), 1)
			*s = next
			if d.Allowed {
				admitted++
			}
			i++
		}
		b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
	})
	b.Run("x-time-rate", func(b *testing.B) {
		limiters := make(map[string]*rate.Limiter, nativeKeys)
		for _, k := range ks {
			limiters[k] = rate.NewLimiter(100, 100)
		}
		admitted := 0
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if limiters[ks[i%nativeKeys]].Allow() {
				admitted++
			}
			i++
		}
		b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
	})
	b.Run("admission", func(b *testing.B) {
		cfg, err := config.Parse([]byte(admitConfig))
		if err != nil {
			b.Fatal(err)
		}
		policy, err := admission.Compile(cfg, "tollgate")
		if err != nil {
			b.Fatal(err)
		}
		gate := admission.NewGate(policy)
		store := &sharedStore{data: hostcore.NewSharedData()}
		req := &nativeRequest{headers: map[string]string{":method": "GET", ":path": "/api/items"}}
		start := time.Now()
		for _, k := range ks {
			req.headers["x-api-key"] = k
			store.reset()
			gate.Admit(req, store, int64(time.Since(start)))
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			req.headers["x-api-key"] = ks[i%nativeKeys]
			store.reset()
			if out := gate.Admit(req, store, int64(time.Since(start))); out.Verdict != admission.Allow {
				b.Fatalf("verdict %d: %v", out.Verdict, out.Err)
			}
			i++
		}
	})
}

// nativeRequest is a request whose headers are a map.
type nativeRequest struct{ headers map[string]string }

func (r *nativeRequest) Header(name string) (string, bool) {
	v, ok := r.headers[name]
	return v, ok
}
func (r *nativeRequest) HeaderValues(name string) (string, bool) { return r.Header(name) }
func (r *nativeRequest) SourceAddress() (string, bool)           { return "192.0.2.10:40000", true }
func (r *nativeRequest) Property([]string) (string, bool)        { return "", false }

// sharedStore is Envoy's shared data (hostcore.SharedData, the store both hosts use) behind
// admission's Store interface. It reads into a buffer of its own, emptied before each decision
// (reset), as the module reads into its arena: the store, not the decision, should not
// allocate.
type sharedStore struct {
	data *hostcore.SharedData
	buf  []byte
}

func (s *sharedStore) reset() { s.buf = s.buf[:0] }

func (s *sharedStore) Get(key string) ([]byte, uint32, error) {
	start := len(s.buf)
	buf, cas, st := s.data.AppendValue(s.buf, "tollgate", key)
	switch st {
	case wire.StatusOK:
		s.buf = buf
		return buf[start:len(buf):len(buf)], cas, nil
	case wire.StatusNotFound:
		return nil, 0, admission.ErrNotFound
	}
	return nil, 0, errors.New("shared data failed")
}

func (s *sharedStore) Set(key string, value []byte, cas uint32) error {
	switch s.data.Set("tollgate", key, value, cas) {
	case wire.StatusOK:
		return nil
	case wire.StatusCasMismatch:
		return admission.ErrCasMismatch
	}
	return errors.New("shared data failed")
}
