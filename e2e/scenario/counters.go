package scenario

import "strings"

// This file is the one place outside the module where the names of its counters are written
// down: as the stat names the module defines (proxy_define_metric), and as the series Envoy's
// /stats/prometheus shows for them.
//
// Envoy files a module's metric under "wasmcustom.<name>" at the root of its stats, applies the
// bootstrap's stats_config.stats_tags to that full name, and for Prometheus strips "wasmcustom."
// again, turns every character other than letters, digits and "_" into "_", and leaves out the
// "envoy_" prefix its own metrics get. The RuleTag that envoy.yaml defines moves the rule name of
// a per-rule counter into a label: tollgate.rule.per-api-key.admitted is shown as
// tollgate_rule_admitted{tollgate_rule="per-api-key"}.

// Kinds of per-rule counters; each is named tollgate.rule.<rule>.<kind>.
const (
	Admitted      = "admitted"
	Limited       = "limited"
	ShadowLimited = "shadow_limited"
	MissingKey    = "missing_key"
	// Refunded counts the charges a rule with count or refund gave back at the response; only
	// such rules define it.
	Refunded = "refunded"
	// A rule with on_limit delay: requests held, their total delay in milliseconds, and the
	// longest delay (a gauge).
	Delayed    = "delayed"
	DelayMs    = "delay_ms"
	MaxDelayMs = "max_delay_ms"
	// InFlightLimited counts the rejections by a concurrency limit (rules with one only; also
	// counted in Limited).
	InFlightLimited = "in_flight_limited"
)

// RuleKinds lists every kind of per-rule counter.
var RuleKinds = []string{Admitted, Limited, ShadowLimited, MissingKey, Refunded, InFlightLimited}

// Kinds of per-rule counters of a rule with a global limit that has a lease (global.lease).
const (
	GlobalLeaseRequests       = "global_lease_requests"
	GlobalLeaseTokens         = "global_lease_tokens"
	GlobalLeaseExpired        = "global_lease_expired"
	GlobalLeaseServed         = "global_lease_served"
	GlobalOverLimitRemembered = "global_over_limit_remembered"
)

// LeaseKinds lists the per-rule counters of a rule with a lease.
var LeaseKinds = []string{GlobalLeaseRequests, GlobalLeaseTokens, GlobalLeaseExpired, GlobalLeaseServed, GlobalOverLimitRemembered}

// DelayKinds lists the per-rule metrics of a rule with on_limit delay only; MaxDelayMs is a
// gauge.
var DelayKinds = []string{Delayed, DelayMs, MaxDelayMs}

// Plugin-wide counters.
const (
	ExemptStat         = "tollgate.exempt"
	InternalErrorsStat = "tollgate.internal_errors"
)

// PluginStats lists every plugin-wide counter.
var PluginStats = []string{ExemptStat, InternalErrorsStat}

// OperatorStats are the counters of the operator endpoint, defined only with an "operator" block.
var OperatorStats = []string{
	"tollgate.operator.answered", "tollgate.operator.resets", "tollgate.operator.rate_limited",
	"tollgate.operator.forbidden", "tollgate.operator.unauthorized", "tollgate.operator.not_found",
}

// RuleTag is the stats tag that carries the rule of a per-rule counter. Every shipped Envoy
// configuration defines it in stats_config.stats_tags with RuleTagRegex.
const RuleTag = "tollgate_rule"

// RuleTagRegex is RuleTag's regex. Envoy cuts group 1 out of the stat name and takes group 2 as
// the tag's value. It must start with `^wasmcustom\.`: Envoy matches it against the full name,
// and only tries a regex whose literal prefix equals the name's first segment. The greedy (.+)
// before a last segment of kind characters keeps a rule name that contains dots whole.
const RuleTagRegex = `^wasmcustom\.tollgate\.rule\.((.+)\.)[a-z_]+$`

// RuleStat is the stat name of a per-rule counter.
func RuleStat(rule, kind string) string { return "tollgate.rule." + rule + "." + kind }

// RuleSeries is the Prometheus series Envoy shows for a per-rule counter.
func RuleSeries(rule, kind string) string {
	return "tollgate_rule_" + kind + "{" + RuleTag + `="` + rule + `"}`
}

// PluginSeries is the Prometheus series Envoy shows for a plugin-wide counter.
func PluginSeries(stat string) string { return strings.ReplaceAll(stat, ".", "_") }

// CounterValue is the value a counter must have after Steps.
type CounterValue struct {
	// Stat is the name the module defines it under.
	Stat string
	// Series is how Envoy's /stats/prometheus shows it.
	Series string
	Value  int64
}

// WantCounters lists the counters the module must report after Steps, counted from the steps'
// statuses.
func WantCounters() []CounterValue {
	var admitted, limited, missingKey int64
	for _, s := range Steps {
		switch s.Status {
		case 200:
			admitted++
		case 429:
			limited++
		case 401:
			missingKey++
		}
	}
	return []CounterValue{
		{RuleStat(Rule, Admitted), RuleSeries(Rule, Admitted), admitted},
		{RuleStat(Rule, Limited), RuleSeries(Rule, Limited), limited},
		{RuleStat(Rule, MissingKey), RuleSeries(Rule, MissingKey), missingKey},
		{InternalErrorsStat, PluginSeries(InternalErrorsStat), 0},
	}
}
