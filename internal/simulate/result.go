package simulate

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"
)

// Summary is DIR/summary.json: the log, then what the configuration did, then (with --compare)
// what the other one did.
type Summary struct {
	Log LogInfo `json:"log"`
	// Keys says how keys are named: "hashed" (a keyed hash per run) or "shown".
	Keys string `json:"keys"`
	// Changes says what the second configuration changes from the first (with --compare):
	// first, as the figure a comparison is for.
	Changes *Changes `json:"changes,omitempty"`
	// Suggestion is, with --suggest, the limits fitted to the log and their replay.
	Suggestion *Suggestion `json:"suggestion,omitempty"`
	*Result
	Compare *Result `json:"compare,omitempty"`
	// Fleet is the fleet model's figures (--replicas), fleet*.go.
	Fleet *FleetResult `json:"fleet,omitempty"`
}

// LogInfo describes the replayed log.
type LogInfo struct {
	File       string    `json:"file"`
	Format     string    `json:"format"`
	Lines      int       `json:"lines"`
	BadLines   int       `json:"bad_lines"`
	BadSamples []BadLine `json:"bad_line_samples,omitempty"`
	First      time.Time `json:"first"`
	Last       time.Time `json:"last"`
}

// Result is what one configuration did to the log.
type Result struct {
	Config   string `json:"config"`
	Requests int64  `json:"requests"`
	// Exempt counts the requests an exemption let through (no rule applied).
	Exempt int64 `json:"exempt"`
	// InternalErrors is the module's tollgate.internal_errors: a global limit's failed check,
	// among others.
	InternalErrors int64 `json:"internal_errors"`
	// Statuses counts the responses by status: 200 for every request the module let through.
	Statuses map[string]int64       `json:"statuses"`
	Rules    map[string]*RuleResult `json:"rules"`
	// Warnings name what in the setup is probably wrong (a log without the key's header, …).
	Warnings []Warning `json:"warnings"`

	// SeriesStart and SeriesStep place the rules' series: bucket i covers
	// [SeriesStart + i·SeriesStep, SeriesStart + (i+1)·SeriesStep).
	SeriesStart time.Time     `json:"-"`
	SeriesStep  time.Duration `json:"-"`
	// changes, on the second configuration's result, is what it changes from the first.
	changes *Changes
	// suggestion, on the first configuration's result, is --suggest's answer.
	suggestion *Suggestion
}

// RuleTotals are a rule's counters over the log.
type RuleTotals struct {
	Admitted      int64 `json:"admitted"`
	Limited       int64 `json:"limited"`
	ShadowLimited int64 `json:"shadow_limited"`
	// MissingKey counts the requests without the rule's key: rejected, let through or given the
	// fallback key, as the rule's missing_key says.
	MissingKey int64 `json:"missing_key"`
	// Exempt counts the exempt requests the rule's match would have selected.
	Exempt int64 `json:"exempt"`
	// InvalidCost counts the requests whose cost header was not a whole number (answered 400).
	InvalidCost int64 `json:"invalid_cost"`
}

// RuleResult is one rule's figures.
type RuleResult struct {
	RuleTotals
	Shadow bool `json:"shadow,omitempty"`
	// Cost says what a request costs, in words; Limits are the rule's limits.
	Cost   string      `json:"cost"`
	Limits []LimitInfo `json:"limits"`
	// Requests counts the requests the rule matched, exempt ones left out.
	Requests int64 `json:"requests"`
	// Keys counts the distinct partition keys the rule saw, KeysLimited those it limited (or
	// shadow-limited) at least once.
	Keys        int `json:"keys"`
	KeysLimited int `json:"keys_limited"`
	// EnforcedAlone is, for a shadow rule, what it would have done enforced as the only rule:
	// unlike ShadowLimited, it counts the requests an enforced rule rejected too.
	EnforcedAlone *AloneResult `json:"enforced_alone,omitempty"`
	// WindowPhases is, for a configuration with fixed or sliding windows replayed at several
	// phases (--phases), the range of the rule's figures over them.
	WindowPhases *PhaseRange `json:"window_phases,omitempty"`
	// TopLimitedKeys are the keys with the most limited (or shadow-limited) requests.
	TopLimitedKeys []KeyResult `json:"top_limited_keys"`
	// BusiestKeys are the keys with the highest peak rate.
	BusiestKeys []KeyResult `json:"busiest_keys"`
	// Series counts the decisions per time bucket (Result.SeriesStep).
	Series []Point `json:"-"`
	order  int
	unit   string // what the limits count: "requests" (each costs 1) or "units"
}

// LimitInfo is a limit's burst and sustained rate, to compare keys' peaks with.
type LimitInfo struct {
	// Tier is the limits_by tier the limit belongs to; "" for a rule with limits.
	Tier      string  `json:"tier,omitempty"`
	Algorithm string  `json:"algorithm"`
	Capacity  int64   `json:"capacity"`
	PerSecond float64 `json:"per_second"`
	// Text says what the limit admits, in words: "20 requests at once, then 5 per second".
	Text     string `json:"text"`
	position int    // the limit's index in its rule's (or tier's) limits
	// phased: a fixed or sliding window on the monotonic clock, whose windows start at an
	// instant that differs on every Envoy start.
	phased bool
}

// KeyTotals are one partition key's figures under one rule.
type KeyTotals struct {
	// Requests counts the requests the rule matched with this key (not exempt).
	Requests      int64 `json:"requests"`
	Admitted      int64 `json:"admitted"`
	Limited       int64 `json:"limited"`
	ShadowLimited int64 `json:"shadow_limited"`
	// PeakPerSecond is the most requests in one calendar second, PeakUnitsPerSecond the most
	// units (the rule's cost) in one: what the rule's limits count.
	PeakPerSecond      int64 `json:"peak_per_second"`
	PeakUnitsPerSecond int64 `json:"peak_units_per_second"`
}

// KeyResult is a key with its figures.
type KeyResult struct {
	Key string `json:"key"`
	KeyTotals
}

// AloneResult is what a shadow rule would have done enforced, with no other rule: the question
// shadow mode exists to answer, from a replay of the log through that rule alone.
type AloneResult struct {
	Admitted    int64       `json:"admitted"`
	Limited     int64       `json:"limited"`
	MissingKey  int64       `json:"missing_key"`
	KeysLimited int         `json:"keys_limited"`
	TopKeys     []KeyResult `json:"top_limited_keys"`
}

// Point is one bucket of a rule's time series.
type Point struct {
	Admitted, Limited, ShadowLimited, MissingKey int64
}

// Changes is, on the second configuration's result, what it changes from the first (nil on
// the first).
func (r *Result) Changes() *Changes { return r.changes }

// RuleNames lists the rules in configuration order.
func (r *Result) RuleNames() []string {
	names := make([]string, len(r.Rules))
	for name, rr := range r.Rules {
		names[rr.order] = name
	}
	return names
}

// topKeys returns the top keys by limited requests (those with any) and by peak rate.
func topKeys(rule string, keys map[string]*keyState, namer *KeyNamer, top int) (limited, busiest []KeyResult) {
	all := make([]KeyResult, 0, len(keys))
	for k, st := range keys {
		all = append(all, KeyResult{Key: k, KeyTotals: st.KeyTotals})
	}
	name := func(list []KeyResult) []KeyResult {
		out := make([]KeyResult, len(list))
		for i, k := range list {
			out[i] = k
			out[i].Key = namer.Name(rule, []byte(k.Key))
		}
		return out
	}
	limited = name(all[:limitedMost(all, top)])
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.PeakPerSecond != b.PeakPerSecond {
			return a.PeakPerSecond > b.PeakPerSecond
		}
		if a.Requests != b.Requests {
			return a.Requests > b.Requests
		}
		return a.Key < b.Key
	})
	busiest = name(all[:min(top, len(all))])
	return limited, busiest
}

// limitedMost sorts keys by limited (and shadow-limited) requests, most first, and returns how
// many of the first top have any: the keys the report names as limited most.
func limitedMost(keys []KeyResult, top int) int {
	// Ties are broken by the peak, then the key itself, so that a report does not change from
	// run to run.
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if x, y := a.Limited+a.ShadowLimited, b.Limited+b.ShadowLimited; x != y {
			return x > y
		}
		if a.PeakPerSecond != b.PeakPerSecond {
			return a.PeakPerSecond > b.PeakPerSecond
		}
		return a.Key < b.Key
	})
	n := 0
	for n < len(keys) && n < top && keys[n].Limited+keys[n].ShadowLimited > 0 {
		n++
	}
	return n
}

// MarshalIndent writes the summary as summary.json holds it.
func (s *Summary) MarshalIndent() ([]byte, error) {
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Thousands writes n with comma separators: 1,234,567.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	start := 0
	if n < 0 {
		start = 1
	}
	out := []byte(s[:start])
	for i := start; i < len(s); i++ {
		if i > start && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
