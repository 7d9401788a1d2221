package host

import (
	"sync"
	"sync/atomic"
)

// SharedData is Envoy's shared key-value store: process-wide, one namespace per vm_id, one mutex
// (cpp-host src/shared_data.cc). Share one SharedData between Hosts to model several plugins in
// one Envoy process.
type SharedData struct {
	mu      sync.Mutex
	lastCAS uint32
	byVMID  map[string]map[string]sharedValue
	// fault, when set, is consulted before every operation (fault injection in tests).
	fault func(op, key string) Status
	// casMismatches counts sets refused with StatusCasMismatch.
	casMismatches atomic.Int64
}

type sharedValue struct {
	value []byte
	cas   uint32
}

// NewSharedData returns an empty store.
func NewSharedData() *SharedData {
	return &SharedData{byVMID: map[string]map[string]sharedValue{}}
}

// Get returns a copy of the value and its CAS; StatusNotFound when absent.
func (s *SharedData) Get(vmID, key string) ([]byte, uint32, Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fault != nil {
		if st := s.fault("get", key); st != StatusOK {
			return nil, 0, st
		}
	}
	v, ok := s.byVMID[vmID][key]
	if !ok {
		return nil, 0, StatusNotFound
	}
	return append([]byte(nil), v.value...), v.cas, StatusOK
}

// Set stores value under Envoy's CAS rules: an absent key is stored whatever cas is; cas 0
// overwrites; a cas other than the stored one is StatusCasMismatch.
func (s *SharedData) Set(vmID, key string, value []byte, cas uint32) Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fault != nil {
		if st := s.fault("set", key); st != StatusOK {
			return st
		}
	}
	ns := s.byVMID[vmID]
	if ns == nil {
		ns = map[string]sharedValue{}
		s.byVMID[vmID] = ns
	}
	if old, ok := ns[key]; ok && cas != 0 && cas != old.cas {
		s.casMismatches.Add(1)
		return StatusCasMismatch
	}
	s.lastCAS++
	if s.lastCAS == 0 {
		s.lastCAS = 1
	}
	ns[key] = sharedValue{value: append([]byte(nil), value...), cas: s.lastCAS}
	return StatusOK
}

// Keys counts the keys of a vm_id namespace.
func (s *SharedData) Keys(vmID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byVMID[vmID])
}

// SetFault installs f, called with "get" or "set" and the key before every operation; a status
// other than StatusOK is returned instead of doing the operation. nil removes it.
func (s *SharedData) SetFault(f func(op, key string) Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// CASMismatches counts the sets refused because another VM wrote the key first, since the store
// was created: each is one retry of a read-modify-write loop.
func (s *SharedData) CASMismatches() int64 { return s.casMismatches.Load() }
