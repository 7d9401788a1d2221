package hostcore

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// SharedData is Envoy's shared key-value store: process-wide, one namespace per vm_id, one mutex
// (proxy-wasm-cpp-host src/shared_data.cc). Its CAS rules (SharedData::set): an absent key is
// stored whatever the CAS; CAS 0 overwrites an existing key; any other CAS that is not the key's
// is CasMismatch; every write takes the next value of one counter shared by all keys, from 1,
// skipping 0 when it wraps (SharedData::nextCas). Share one SharedData between hosts to model
// several plugins in one Envoy process.
type SharedData struct {
	mu      sync.Mutex
	lastCAS uint32
	byVMID  map[string]map[string]*sharedValue
	// fault, when set, is consulted before every operation (fault injection in tests). It is
	// read without the lock, which every operation would otherwise take twice.
	fault atomic.Pointer[func(op, key string) wire.Status]
	stats SharedDataStats
	// holders counts the open hosts per vm_id: a namespace is dropped when its last one closes.
	holders map[string]int
}

// SharedDataStats counts the store's operations since it was created, over every vm_id.
type SharedDataStats struct {
	Gets int64 // proxy_get_shared_data calls, found or not
	Sets int64 // successful proxy_set_shared_data calls
	// Mismatches are sets refused because the key's CAS had changed since the caller read it:
	// another VM wrote first. Each one costs the writer a retry.
	Mismatches int64
	// Faults are operations answered by the injected fault (SetFault) instead of the store.
	Faults int64
}

type sharedValue struct {
	value []byte
	cas   uint32
}

// NewSharedData returns an empty store.
func NewSharedData() *SharedData {
	return &SharedData{byVMID: map[string]map[string]*sharedValue{}}
}

// Get returns a copy of the value and its CAS; wire.StatusNotFound when absent.
func (s *SharedData) Get(vmID, key string) ([]byte, uint32, wire.Status) {
	return s.AppendValue(nil, vmID, key)
}

// AppendValue is Get appending the value to dst, so that a caller reusing its buffer reads
// without allocating; it returns dst unchanged on an error.
func (s *SharedData) AppendValue(dst []byte, vmID, key string) ([]byte, uint32, wire.Status) {
	if st := s.injected("get", key); st != wire.StatusOK {
		return dst, 0, st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Gets++
	v, ok := s.byVMID[vmID][key]
	if !ok {
		return dst, 0, wire.StatusNotFound
	}
	return append(dst, v.value...), v.cas, wire.StatusOK
}

// Set stores value under Envoy's CAS rules (see SharedData). The key and the value are copied:
// the caller may reuse their memory.
func (s *SharedData) Set(vmID, key string, value []byte, cas uint32) wire.Status {
	if st := s.injected("set", key); st != wire.StatusOK {
		return st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.byVMID[vmID]
	if ns == nil {
		ns = map[string]*sharedValue{}
		s.byVMID[vmID] = ns
	}
	old, exists := ns[key]
	if exists && cas != 0 && cas != old.cas {
		s.stats.Mismatches++
		return wire.StatusCasMismatch
	}
	s.stats.Sets++
	s.lastCAS++
	if s.lastCAS == 0 {
		s.lastCAS = 1
	}
	if exists {
		// Updated in place: assigning to the map would also store the caller's key string, whose
		// memory the caller may reuse. Nobody else holds the old value (Get copies it out), so
		// its memory is reused too.
		old.value, old.cas = append(old.value[:0], value...), s.lastCAS
		return wire.StatusOK
	}
	ns[strings.Clone(key)] = &sharedValue{value: append([]byte(nil), value...), cas: s.lastCAS}
	return wire.StatusOK
}

// injected runs the fault hook, if any, outside the lock: a hook may use the store itself, as a
// test does when another worker writes between a read and a write.
func (s *SharedData) injected(op, key string) wire.Status {
	fault := s.fault.Load()
	if fault == nil {
		return wire.StatusOK
	}
	st := (*fault)(op, key)
	if st != wire.StatusOK {
		s.mu.Lock()
		s.stats.Faults++
		if op == "get" {
			s.stats.Gets++
		}
		s.mu.Unlock()
	}
	return st
}

// Keys counts the keys of a vm_id namespace.
func (s *SharedData) Keys(vmID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byVMID[vmID])
}

// Stats returns the operation counts so far.
func (s *SharedData) Stats() SharedDataStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Entries returns a copy of every key and value of a vm_id namespace, for tests that inspect or
// corrupt what the module stored.
func (s *SharedData) Entries(vmID string) map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]byte, len(s.byVMID[vmID]))
	for k, v := range s.byVMID[vmID] {
		out[k] = append([]byte(nil), v.value...)
	}
	return out
}

// SetFault installs f, called with "get" or "set" and the key before every operation; a status
// other than wire.StatusOK is returned instead of doing the operation. nil removes it. f runs
// outside the store's lock, so it may call the store; where several VMs run in parallel it must
// be safe for concurrent use.
func (s *SharedData) SetFault(f func(op, key string) wire.Status) {
	if f == nil {
		s.fault.Store(nil)
		return
	}
	s.fault.Store(&f)
}

// CASMismatches counts the sets refused because another VM wrote the key first, since the store
// was created: each is one retry of a read-modify-write loop.
func (s *SharedData) CASMismatches() int64 { return s.Stats().Mismatches }

// Acquire records a host (a plugin's base VM) using vmID.
func (s *SharedData) Acquire(vmID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders == nil {
		s.holders = map[string]int{}
	}
	s.holders[vmID]++
}

// Release forgets a host using vmID, and the namespace's data with the last one (cpp-host keeps
// a vm_id's data while any VM of it lives).
func (s *SharedData) Release(vmID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders[vmID]--; s.holders[vmID] <= 0 {
		delete(s.holders, vmID)
		delete(s.byVMID, vmID)
	}
}
