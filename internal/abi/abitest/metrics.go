package abitest

import (
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// Metrics as Envoy keeps them for a VM (envoy context.cc defineMetric, incrementMetric,
// recordMetric, getMetric; proxy-wasm-cpp-host kMetricIdIncrement): ids carry the type in their
// low two bits and step by 4, one name is one stat, a counter only goes up, and a histogram
// cannot be read.

type metric struct {
	kind  abi.MetricType
	value int64
}

type metrics struct {
	byName map[string]*metric
	byID   map[uint32]*metric
	last   [3]uint32
}

// Counter is a counter's value by name; 0 when the plugin never defined it.
func (h *Host) Counter(name string) uint64 {
	if m, ok := h.metrics.byName[name]; ok && m.kind == abi.MetricCounter {
		return uint64(m.value)
	}
	return 0
}

// Gauge is a gauge's value by name, and whether the plugin defined it.
func (h *Host) Gauge(name string) (int64, bool) {
	m, ok := h.metrics.byName[name]
	if !ok || m.kind != abi.MetricGauge {
		return 0, false
	}
	return m.value, true
}

// Defined reports whether the plugin defined a metric of that name.
func (h *Host) Defined(name string) bool {
	_, ok := h.metrics.byName[name]
	return ok
}

// DefineMetric is proxy_define_metric.
func (c hostcalls) DefineMetric(kind abi.MetricType, name string) (uint32, wire.Status) {
	if kind > abi.MetricHistogram {
		return 0, wire.StatusBadArgument
	}
	ms := &c.metrics
	if ms.byName == nil {
		ms.byName, ms.byID = map[string]*metric{}, map[uint32]*metric{}
	}
	m, ok := ms.byName[name]
	if !ok {
		m = &metric{kind: kind}
		ms.byName[name] = m
	}
	ms.last[kind]++
	id := ms.last[kind]*4 + uint32(kind)
	ms.byID[id] = m
	return id, wire.StatusOK
}

// IncrementMetric is proxy_increment_metric.
func (c hostcalls) IncrementMetric(id uint32, delta int64) wire.Status {
	m, ok := c.metrics.byID[id]
	switch {
	case !ok:
		return wire.StatusNotFound
	case m.kind == abi.MetricHistogram, m.kind == abi.MetricCounter && delta <= 0:
		return wire.StatusBadArgument
	}
	m.value += delta
	return wire.StatusOK
}

// RecordMetric is proxy_record_metric: a gauge is set, a counter added to.
func (c hostcalls) RecordMetric(id uint32, value uint64) wire.Status {
	m, ok := c.metrics.byID[id]
	switch {
	case !ok:
		return wire.StatusNotFound
	case m.kind == abi.MetricCounter:
		m.value += int64(value)
	case m.kind == abi.MetricGauge:
		m.value = int64(value)
	}
	return wire.StatusOK
}

// Metric is proxy_get_metric.
func (c hostcalls) Metric(id uint32) (uint64, wire.Status) {
	m, ok := c.metrics.byID[id]
	switch {
	case !ok:
		return 0, wire.StatusNotFound
	case m.kind == abi.MetricHistogram:
		return 0, wire.StatusBadArgument
	}
	return uint64(m.value), wire.StatusOK
}
