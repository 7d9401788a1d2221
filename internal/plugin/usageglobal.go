package plugin

import (
	"math"
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/rls"
)

// A rule with usage and a global limit is checked with the rate limit service for its reserve
// when the request is admitted, like any global rule for its cost. When the response has told
// what the request used, what it used beyond the reserve is spent from the replica's lease of
// the key if the rule has one and the lease covers it, and is otherwise sent to the service as
// hits_addend in a call of the plugin's own (not the stream's: the stream is ending, and its
// calls would be cancelled with it), whose answer is counted like a check's and decides nothing.
// The service cannot give anything back, so a request that used less than its reserve keeps
// the reserve charged globally.

// holdGlobalUsage keeps the global checks of the rules with usage, to settle at the response.
func (h *httpContext) holdGlobalUsage(checks []admission.GlobalCheck) {
	m := h.usageMeter()
	m.globals = m.globals[:0]
	for _, c := range checks {
		if h.plugin.rules[c.Rule].usage != nil {
			c.Key = strings.Clone(c.Key) // the Outcome's buffers are reused by the next request
			m.globals = append(m.globals, c)
		}
	}
}

// settleGlobalUsage spends or sends what the response used beyond the reserve, for each rule
// with usage and a global limit whose check the request passed.
func (h *httpContext) settleGlobalUsage(now int64) {
	p, m := h.plugin, h.meter
	for _, c := range m.globals {
		extra := m.amounts[c.Rule] - c.Cost
		if extra <= 0 {
			continue
		}
		g := p.rules[c.Rule].global
		if g.inFlight != nil { // a lease
			take, err := p.gate.TakeLease(sharedData, c.Rule, c.Key, extra, now)
			if err == nil && take.Verdict == admission.LeaseServed {
				continue
			}
		}
		g.entries[len(g.entries)-1].Value = c.Key
		msg := rls.AppendRequest(nil, g.config.Domain, g.entries, uint32(min(extra, math.MaxUint32)))
		rule, sent := c.Rule, now
		_, err := abi.DispatchGrpcCall(0, g.config.Cluster, rls.Service, rls.Method, nil, msg, g.timeoutMs,
			func(status uint32, message string, response []byte) {
				elapsed := int64(0)
				if at, err := abi.MonotonicNanos(); err == nil {
					elapsed = at - sent
				}
				p.readAnswer(rule, status, message, response, elapsed) // counted; it decides nothing
			})
		if err != nil {
			g.metrics.failed.add(1)
			p.globalFailed(rule, "cannot send a response's usage to cluster "+strconv.Quote(g.config.Cluster)+": "+err.Error())
		}
	}
	m.globals = m.globals[:0]
}
