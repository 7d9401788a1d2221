package hostcore

import (
	"testing"
	"unsafe"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// Envoy's CAS rules (cpp-host src/shared_data.cc SharedData::set), step by step. The SDK's
// emulator differs on one: there CAS 0 on an existing key is a mismatch, in Envoy it overwrites.
func TestSharedDataCASRules(t *testing.T) {
	s := NewSharedData()
	steps := []struct {
		name    string
		op      string
		key     string
		cas     uint32
		want    wire.Status
		wantCAS uint32 // of a get
		value   string // of a get
	}{
		{"absent key", "get", "k", 0, wire.StatusNotFound, 0, ""},
		{"absent: stored whatever the cas", "set", "k", 77, wire.StatusOK, 0, ""},
		{"the counter starts at 1", "get", "k", 0, wire.StatusOK, 1, "v1"},
		{"a stale cas", "set", "k", 5, wire.StatusCasMismatch, 0, ""},
		{"the stored value is untouched", "get", "k", 0, wire.StatusOK, 1, "v1"},
		{"the current cas", "set", "k", 1, wire.StatusOK, 0, ""},
		{"a new cas", "get", "k", 0, wire.StatusOK, 2, "v5"},
		{"cas 0 overwrites", "set", "k", 0, wire.StatusOK, 0, ""},
		{"another key", "set", "other", 0, wire.StatusOK, 0, ""},
		{"one counter for all keys", "get", "other", 0, wire.StatusOK, 4, "v8"},
		{"the overwrite", "get", "k", 0, wire.StatusOK, 3, "v7"},
		{"the old cas after an overwrite", "set", "k", 2, wire.StatusCasMismatch, 0, ""},
	}
	for i, st := range steps {
		var got wire.Status
		var cas uint32
		var value []byte
		if st.op == "get" {
			value, cas, got = s.Get("vm", st.key)
		} else {
			got = s.Set("vm", st.key, []byte("v"+itoa(i)), st.cas)
		}
		if got != st.want || cas != st.wantCAS || string(value) != st.value {
			t.Fatalf("step %d (%s): %s(%q, cas %d) = status %d cas %d value %q; want %d cas %d value %q",
				i, st.name, st.op, st.key, st.cas, got, cas, value, st.want, st.wantCAS, st.value)
		}
	}
	if _, _, st := s.Get("other-vm-id", "k"); st != wire.StatusNotFound {
		t.Fatalf("namespaces must be separate by vm_id, got %d", st)
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// The counter skips 0 when it wraps: CAS 0 means "unconditional", never a key's CAS.
func TestSharedDataCASSkipsZero(t *testing.T) {
	s := NewSharedData()
	s.lastCAS = ^uint32(0) - 1
	for _, want := range []uint32{^uint32(0), 1, 2} {
		s.Set("vm", "k", nil, 0)
		if _, cas, _ := s.Get("vm", "k"); cas != want {
			t.Fatalf("cas %d, want %d", cas, want)
		}
	}
}

// What the store holds is its own: neither the caller's buffers, even a key string whose memory
// the caller reuses (as admission's Gate does), nor a value it read change it.
func TestSharedDataCopies(t *testing.T) {
	s := NewSharedData()
	key, value := []byte("key"), []byte("value")
	s.Set("vm", unsafe.String(&key[0], len(key)), value, 0)
	s.Set("vm", unsafe.String(&key[0], len(key)), value, 0) // an update
	copy(key, "xxx")
	copy(value, "xxxxx")
	if e := s.Entries("vm"); len(e) != 1 || string(e["key"]) != "value" {
		t.Fatalf("entries %q, want the key and value as stored", e)
	}
	got, _, _ := s.Get("vm", "key")
	got[0] = 'X'
	again, _, st := s.Get("vm", "key")
	if st != wire.StatusOK || string(again) != "value" {
		t.Fatalf("got %q (%d), want the value as stored", again, st)
	}
	buf, _, _ := s.AppendValue([]byte("prefix:"), "vm", "key")
	if string(buf) != "prefix:value" {
		t.Fatalf("AppendValue = %q", buf)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		buf, _, _ = s.AppendValue(buf[:0], "vm", "key")
		s.Set("vm", "key", buf, 0)
	}); allocs != 0 {
		t.Fatalf("%v allocations reading into a buffer and overwriting a key, want 0", allocs)
	}
}

// Mismatches, sets, gets and injected faults are counted, so tests and benchmarks can measure
// CAS contention.
func TestSharedDataStats(t *testing.T) {
	s := NewSharedData()
	s.Set("vm", "k", []byte("a"), 0)                                            // set 1
	_, cas, _ := s.Get("vm", "k")                                               // get 1
	s.Set("vm", "k", []byte("b"), cas)                                          // set 2
	if st := s.Set("vm", "k", []byte("c"), cas); st != wire.StatusCasMismatch { // stale cas
		t.Fatalf("stale cas: %d", st)
	}
	s.SetFault(func(op, key string) wire.Status { return wire.StatusInternalFailure })
	s.Get("vm", "k")
	s.Set("vm", "k", nil, 0)
	s.SetFault(nil)
	want := SharedDataStats{Gets: 2, Sets: 2, Mismatches: 1, Faults: 2}
	if got := s.Stats(); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	if got := s.CASMismatches(); got != 1 {
		t.Fatalf("CASMismatches = %d", got)
	}
	if e := s.Entries("vm"); len(e) != 1 || string(e["k"]) != "b" || s.Keys("vm") != 1 {
		t.Fatalf("entries %q, %d keys", e, s.Keys("vm"))
	}
}

// A fault hook may use the store: another worker writes between a read and a write, and the
// write then loses the race as in Envoy.
func TestSharedDataFaultMayUseTheStore(t *testing.T) {
	s := NewSharedData()
	s.Set("vm", "k", []byte("a"), 0)
	_, cas, _ := s.Get("vm", "k")
	raced := false
	s.SetFault(func(op, key string) wire.Status {
		if op == "set" && !raced {
			raced = true
			if st := s.Set("vm", key, []byte("other"), 0); st != wire.StatusOK {
				t.Fatalf("the racing write: %d", st)
			}
		}
		return wire.StatusOK
	})
	if st := s.Set("vm", "k", []byte("mine"), cas); st != wire.StatusCasMismatch {
		t.Fatalf("the write after the race: %d, want a CAS mismatch", st)
	}
	if v, _, _ := s.Get("vm", "k"); string(v) != "other" {
		t.Fatalf("value %q, want the racing worker's", v)
	}
}

// A vm_id's data lives while a host holds it.
func TestSharedDataGoesWithItsLastHolder(t *testing.T) {
	s := NewSharedData()
	s.Acquire("vm")
	s.Acquire("vm")
	s.Set("vm", "k", nil, 0)
	s.Release("vm")
	if s.Keys("vm") != 1 {
		t.Fatal("the data went with the first of two holders")
	}
	s.Release("vm")
	if s.Keys("vm") != 0 {
		t.Fatal("the data outlived its last holder")
	}
}
