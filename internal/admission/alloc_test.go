package admission

import (
	"testing"
)

// steadyStore is shared data that allocates nothing once a key exists, so that the Gate's own
// allocations can be counted. Get answers with a copy in a scratch buffer it reuses, as the
// module's arena does (the Gate may change it), started over when full: a decision's few reads
// are long done by then.
type steadyStore struct {
	values  map[string][]byte
	cas     map[string]uint32
	scratch []byte
}

func (s *steadyStore) Get(key string) ([]byte, uint32, error) {
	v, ok := s.values[key]
	if !ok {
		return nil, 0, ErrNotFound
	}
	if len(s.scratch)+len(v) > cap(s.scratch) {
		s.scratch = make([]byte, 0, max(64<<10, len(v)))
	}
	start := len(s.scratch)
	s.scratch = append(s.scratch, v...)
	return s.scratch[start:len(s.scratch):len(s.scratch)], s.cas[key], nil
}

func (s *steadyStore) Set(key string, value []byte, cas uint32) error {
	if v, ok := s.values[key]; ok {
		s.values[key] = append(v[:0], value...)
		s.cas[key]++
		return nil
	}
	k := string([]byte(key))
	s.values[k] = append([]byte(nil), value...)
	s.cas[k] = 1
	return nil
}

// In steady state a decision allocates nothing: keys, slot keys and hashes are built in the
// Gate's reused buffers. (Envoy runs one VM per worker; garbage per request is GC time on the
// request path.)
func TestAdmitDoesNotAllocate(t *testing.T) {
	for name, doc := range map[string]string{
		"header key": `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "1s"}]}]}`,
		"client address and two limits": `{"rules": [{"name": "r", "key": [{"client_ip": {}}, {"header": "k"}], "limits": [
		  {"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "1s"},
		  {"algorithm": "sliding_window", "capacity": 1000000000, "window": "1m"}]}]}`,
		"grouped address, host, path readings and match": `{"client_ip": {"ipv4_prefix": 24},
		  "rules": [{"name": "r", "match": {"hosts": ["api.example.com"], "path": {"exact": "/"}},
		  "key": [{"client_ip": {}}, {"authority": {}}, {"path": {}}], "limits": [{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "1s"}]}]}`,
	} {
		g := mustGate(t, doc)
		setCollectStatus(g.Policy, false)
		store := &steadyStore{values: map[string][]byte{}, cas: map[string]uint32{}}
		var r Request = req("192.0.2.1:1", "k", "alice") // boxed once: the test's own allocation
		g.Admit(r, store, sec)                           // the first request creates the slots
		allocs := testing.AllocsPerRun(100, func() {
			if out := g.Admit(r, store, sec); out.Verdict != Allow {
				t.Fatalf("%s: %+v", name, out)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per decision, want 0", name, allocs)
		}
	}
}

// A request without its key is refused without allocating once its part has been described:
// a flood of them, the commonest hostile traffic, makes no garbage. Both paths: the fast one
// (one header), and the general one (a rule it does not fit).
func TestMissingKeyDoesNotAllocate(t *testing.T) {
	for name, doc := range map[string]string{
		"fast": `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`,
		"general": `{"rules": [{"name": "r", "key": [{"client_ip": {}}, {"query": "user"}],
		  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`,
	} {
		g := mustGate(t, doc)
		store := &steadyStore{values: map[string][]byte{}, cas: map[string]uint32{}}
		var r Request = req("192.0.2.1:1") // boxed once: the test's own allocation
		out := g.Admit(r, store, sec)
		if out.Verdict != MissingKey {
			t.Fatalf("%s: %+v, want a missing key", name, out)
		}
		part := out.MissingPart
		allocs := testing.AllocsPerRun(100, func() {
			if out := g.Admit(r, store, sec); out.Verdict != MissingKey || out.MissingPart != part {
				t.Fatalf("%s: %+v", name, out)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per refusal, want 0", name, allocs)
		}
	}
}

// A rejection allocates nothing, whether the key's bucket is read and remembered or answered
// from the memory of rejected buckets, with and without rate-limit headers.
func TestRejectionDoesNotAllocate(t *testing.T) {
	for _, headers := range []bool{false, true} {
		for _, remembered := range []bool{false, true} {
			g := ownMemory(mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`))
			setCollectStatus(g.Policy, headers)
			store := &steadyStore{values: map[string][]byte{}, cas: map[string]uint32{}}
			var r Request = req("192.0.2.1:1", "k", "alice") // boxed once: the test's own allocation
			g.Admit(r, store, sec)                           // the bucket's only token
			g.Admit(r, store, sec)                           // rejected, and remembered
			allocs := testing.AllocsPerRun(100, func() {
				if !remembered {
					g.ForgetRejected()
				}
				if out := g.Admit(r, store, sec); out.Verdict != Limited {
					t.Fatalf("%+v", out)
				}
			})
			if allocs != 0 {
				t.Errorf("headers %v, from the memory %v: %.1f allocations per rejection, want 0", headers, remembered, allocs)
			}
		}
	}
}
