package host

import (
	"sort"
	"sync"
)

// MetricType is proxy_metric_type_t.
type MetricType uint32

const (
	Counter   MetricType = 0
	Gauge     MetricType = 1
	Histogram MetricType = 2
)

// Metrics holds every metric the VMs of a host defined, by name. Envoy binds each name to one
// stat however many VMs define it, so workers aggregate (envoy context.cc defineMetric).
type Metrics struct {
	mu     sync.Mutex
	byName map[string]*metric
}

type metric struct {
	kind   MetricType
	value  int64
	record []uint64
}

func newMetrics() *Metrics { return &Metrics{byName: map[string]*metric{}} }

func (m *Metrics) define(kind MetricType, name string) *metric {
	m.mu.Lock()
	defer m.mu.Unlock()
	if existing, ok := m.byName[name]; ok && existing.kind == kind {
		return existing
	}
	created := &metric{kind: kind}
	m.byName[name] = created
	return created
}

// Value returns a counter's or gauge's value; ok is false for an unknown name.
func (m *Metrics) Value(name string) (value int64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mt, found := m.byName[name]; found {
		return mt.value, true
	}
	return 0, false
}

// Names lists the defined metrics, sorted.
func (m *Metrics) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.byName))
	for n := range m.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (m *Metrics) add(mt *metric, delta int64) {
	m.mu.Lock()
	mt.value += delta
	m.mu.Unlock()
}

func (m *Metrics) set(mt *metric, value int64) {
	m.mu.Lock()
	mt.value = value
	m.mu.Unlock()
}

func (m *Metrics) observe(mt *metric, value uint64) {
	m.mu.Lock()
	mt.record = append(mt.record, value)
	m.mu.Unlock()
}

func (m *Metrics) get(mt *metric) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return mt.value
}
