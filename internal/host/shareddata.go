package host

import (
	"sync"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// SharedData is Envoy's shared key-value store: process-wide, one namespace per vm_id, one mutex
// (cpp-host src/shared_data.cc). Share one SharedData between Hosts to model several plugins in
// one Envoy process.
type SharedData struct {
	mu      sync.Mutex
	lastCAS uint32
	byVMID  map[string]map[string]sharedValue
	// fault, when set, is consulted before every operation (fault injection in tests).
	fault func(op, key string) wire.Status
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
	return &SharedData{byVMID: map[string]map[string]sharedValue{}}
}

// Get returns a copy of the value and its CAS; wire.StatusNotFound when absent.
func (s *SharedData) Get(vmID, key string) ([]byte, uint32, wire.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Gets++
	if s.fault != nil {
		if st := s.fault("get", key); st != wire.StatusOK {
			s.stats.Faults++
			return nil, 0, st
		}
	}
	v, ok := s.byVMID[vmID][key]
	if !ok {
		return nil, 0, wire.StatusNotFound
	}
	return append([]byte(nil), v.value...), v.cas, wire.StatusOK
}

// Set stores value under Envoy's CAS rules: an absent key is stored whatever cas is; cas 0
// overwrites; a cas other than the stored one is wire.StatusCasMismatch.
func (s *SharedData) Set(vmID, key string, value []byte, cas uint32) wire.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fault != nil {
		if st := s.fault("set", key); st != wire.StatusOK {
			s.stats.Faults++
			return st
		}
	}
	ns := s.byVMID[vmID]
	if ns == nil {
		ns = map[string]sharedValue{}
		s.byVMID[vmID] = ns
	}
	if old, ok := ns[key]; ok && cas != 0 && cas != old.cas {
		s.stats.Mismatches++
		return wire.StatusCasMismatch
	}
	s.stats.Sets++
	s.lastCAS++
	if s.lastCAS == 0 {
		s.lastCAS = 1
	}
	ns[key] = sharedValue{value: append([]byte(nil), value...), cas: s.lastCAS}
	return wire.StatusOK
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
// other than wire.StatusOK is returned instead of doing the operation. nil removes it.
func (s *SharedData) SetFault(f func(op, key string) wire.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// CASMismatches counts the sets refused because another VM wrote the key first, since the store
// was created: each is one retry of a read-modify-write loop.
func (s *SharedData) CASMismatches() int64 { return s.Stats().Mismatches }

// acquire records a host (a plugin's base VM) using vmID.
func (s *SharedData) acquire(vmID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders == nil {
		s.holders = map[string]int{}
	}
	s.holders[vmID]++
}

// release forgets a host using vmID, and the namespace's data with the last one.
func (s *SharedData) release(vmID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders[vmID]--; s.holders[vmID] <= 0 {
		delete(s.holders, vmID)
		delete(s.byVMID, vmID)
	}
}
