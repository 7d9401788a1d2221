package plugin

import (
	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
)

// rule is everything the lifecycle keeps about one configured rule, compiled once when the
// plugin starts (compileRules): its name, its counters, and the state of each feature it has,
// nil or zero for those it has not. The decision itself is the admission.Policy's; this is what
// happens around it. Nothing reads the configuration's rule at request time.
type rule struct {
	name string
	// costHeader is the header a request's cost is read from, named in the 400 a bad one gets.
	costHeader string
	// policyNames name the rule's limits, by position, in the draft rate-limit headers.
	policyNames []string

	admitted, limited, shadowLimited, missingKey, invalidCost counter
	// refunded counts the charges given back at the response (count or refund, settle.go).
	refunded counter
	// inFlightLimited counts the rejections by a concurrency limit (concurrency.go).
	inFlightLimited counter
	// delay holds the counters of a rule with on_limit delay (delay.go).
	delay *delayMetrics
	// slotWait is how long, in nanoseconds, a request may wait for a free slot of the rule's
	// concurrency limit (slotwait.go); 0 when it is rejected at once.
	slotWait int64
	// global is the rate limit service's side of a rule with a global limit (global.go).
	global *globalRule
	// usage is the response's side of a rule with usage (usage.go).
	usage *usageRule
	// A rule is never compared: comparable, it would cost the module an equality function.
	_ [0]func()
}

// defineFunc defines a counter named name into c, and keeps it for flushing.
type defineFunc func(name string, c *counter) bool

// compileRules compiles every rule of the configuration, defining its counters; false when a
// counter cannot be defined (logged), which fails the plugin's start. It sets the plugin-wide
// flags of the features some rule has.
func (p *pluginContext) compileRules(cfg *config.Config, define defineFunc) bool {
	p.rules = make([]rule, len(cfg.Rules))
	for i := range cfg.Rules {
		r, c := &cfg.Rules[i], &p.rules[i]
		c.name = r.Name
		c.costHeader = r.Cost.Header
		c.policyNames = policyNames(r)
		prefix := "tollgate.rule." + r.Name + "."
		if !define(prefix+"admitted", &c.admitted) || !define(prefix+"limited", &c.limited) ||
			!define(prefix+"shadow_limited", &c.shadowLimited) || !define(prefix+"missing_key", &c.missingKey) ||
			!define(prefix+"invalid_cost", &c.invalidCost) {
			return false
		}
		if (r.Count != nil || r.Refund != nil) && !define(prefix+"refunded", &c.refunded) {
			return false
		}
		if r.HasConcurrency() && !define(prefix+"in_flight_limited", &c.inFlightLimited) {
			return false
		}
		var ok bool
		if c.delay, ok = compileDelay(cfg, r, define); !ok {
			return false
		}
		if c.global, ok = compileGlobal(r, define); !ok {
			return false
		}
		if c.usage, ok = compileUsage(r.Usage, prefix, define); !ok {
			return false
		}
		p.usageReadsBody = p.usageReadsBody || r.Usage != nil && r.Usage.Source.ReadsBody()
		p.hasUsage = p.hasUsage || r.Usage != nil
		c.slotWait = int64(slotWaitFor(cfg, r))
		p.mayHold = p.mayHold || c.delay != nil || c.slotWait > 0
		p.hasGlobal = p.hasGlobal || c.global != nil
		p.shadowRules = p.shadowRules || cfg.Shadow || r.Shadow
	}
	return true
}

// defineCounter is the plugin's defineFunc.
func (p *pluginContext) defineCounter(name string, c *counter) bool {
	var err error
	if c.id, err = abi.DefineCounter(name); err != nil {
		abi.Log(abi.LogLevelCritical, "tollgate: cannot define metric "+name+": "+err.Error())
		return false
	}
	p.counters = append(p.counters, c)
	return true
}
