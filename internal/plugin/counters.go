package plugin

import (
	"strconv"

	"github.com/tollgate-proxy/tollgate/internal/abi"
)

// Counters are counted inside the VM and handed to Envoy on the plugin's tick, not one host call
// per event: a request then costs no metric host call at all. What Envoy shows lags by at most
// tickPeriod; the plugin also flushes when its root context goes away (a new configuration
// replaced it, or the plugin is removed), so nothing counted is lost but what a VM counted in
// the moment before it crashed.
const tickPeriod = 1000 // milliseconds

// counter is one metric: its host id and what was counted since the last flush.
type counter struct {
	id      abi.Counter
	pending uint64
}

func (c *counter) add(n uint64) { c.pending += n }

// flush hands the pending count to the host; kept for the next flush if the host refuses it.
func (c *counter) flush() error {
	if c.pending == 0 {
		return nil
	}
	if err := c.id.Increment(c.pending); err != nil {
		return err
	}
	c.pending = 0
	return nil
}

// flushCounters hands every pending count to the host. A failure is logged once per flush, not
// counted: counting it would need the counters that just failed.
func (p *pluginContext) flushCounters() {
	failed := 0
	var last error
	for _, c := range p.counters {
		if err := c.flush(); err != nil {
			failed, last = failed+1, err
		}
	}
	if failed > 0 {
		abi.Log(abi.LogLevelError, "tollgate: cannot hand "+strconv.Itoa(failed)+" counter(s) to the host: "+last.Error())
	}
	if p.mayHold {
		p.flushDelayGauges()
	}
}

// OnTick wakes the held requests that are due (held.go) and flushes the counters.
func (p *pluginContext) OnTick() {
	if len(p.held.list) > 0 {
		if now, err := abi.MonotonicNanos(); err == nil {
			p.wakeHeld(now)
		} else {
			p.failed("cannot read the monotonic clock: " + err.Error())
		}
	}
	if p.operator != nil {
		p.operator.flushTop()
	}
	if p.gate != nil {
		p.gate.ForgetRejected() // an operator's reset through another worker is seen from now
	}
	p.flushCounters()
}

// OnPluginDone flushes the counters, and the top offenders counted since the last tick, when
// the root context goes away.
func (p *pluginContext) OnPluginDone() bool {
	if p.operator != nil {
		p.operator.flushTop()
	}
	p.flushCounters()
	return true
}
