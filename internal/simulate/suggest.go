package simulate

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// Suggestion is --suggest's answer: per rule, the smallest limits under which at most
// KeysPercent of the keys would ever be limited, the keys --config's replay limited most left
// out, and the replay of the configuration with those limits.
type Suggestion struct {
	KeysPercent float64                    `json:"keys_percent"`
	Rules       map[string]*RuleSuggestion `json:"rules"`
	// Config is the suggested configuration: --config with the suggested limits.
	Config json.RawMessage `json:"config"`
	// Result is what the suggested configuration did to the log.
	Result *Result `json:"result"`
}

// RuleSuggestion is one rule's suggested limits.
type RuleSuggestion struct {
	// KeysExcluded counts the keys left out: those --config's replay names as limited most.
	KeysExcluded int `json:"keys_excluded"`
	// KeysConsidered counts the keys the limits were fitted to.
	KeysConsidered int `json:"keys_considered"`
	// Limits are the suggested limits, in the rule's order; Kept says why a limit was left as
	// it was ("" for one that was fitted).
	Limits []SuggestedLimit `json:"limits"`
}

// SuggestedLimit is one suggested limit.
type SuggestedLimit struct {
	LimitInfo
	Kept string `json:"kept,omitempty"`
}

// suggestion fits each rule's limits to the keys of s's replay (Options.RecordRequests), all but
// the top keys by limited requests, and returns the configuration with the fitted limits.
func suggestion(s *Simulator, data []byte, percent float64, top int) (*Suggestion, []byte, error) {
	sug := &Suggestion{KeysPercent: percent, Rules: map[string]*RuleSuggestion{}}
	doc, rules, err := configRules(data)
	if err != nil {
		return nil, nil, err
	}
	for i := range s.rules {
		rule := &s.cfg.Rules[i]
		keys := fittedKeys(s.rules[i].keys, top)
		rs := &RuleSuggestion{KeysExcluded: len(s.rules[i].keys) - len(keys), KeysConsidered: len(keys), Limits: []SuggestedLimit{}}
		unit := unitWord(rule.Cost)
		limits := slices.Clone(rule.Limits)
		fitted := make([]bool, len(limits))
		for j, l := range limits {
			fit, kept := fitLimit(l, rule.Cost, keys, percent, s.opts.Start)
			if kept == "" {
				limits[j], fitted[j] = fit, true
			}
			rs.Limits = append(rs.Limits, SuggestedLimit{LimitInfo: describeLimit(limits[j], "", j, unit), Kept: kept})
		}
		eachLimit(rule, func(tier string, j int, l config.Limit) {
			if tier != "" {
				rs.Limits = append(rs.Limits, SuggestedLimit{LimitInfo: describeLimit(l, tier, j, unit), Kept: "limits_by tiers are not fitted"})
			}
		})
		if err := setLimits(rules[i], limits, fitted); err != nil {
			return nil, nil, err
		}
		sug.Rules[rule.Name] = rs
	}
	out, err := json.Marshal(rules)
	if err != nil {
		return nil, nil, err
	}
	doc["rules"] = out
	suggested, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	sug.Config = suggested
	return sug, append(suggested, '\n'), nil
}

// fittedKeys lists the requests of every key but those the report names as limited most.
func fittedKeys(keys map[string]*keyState, top int) [][]keyRequest {
	all := make([]KeyResult, 0, len(keys))
	for k, st := range keys {
		all = append(all, KeyResult{Key: k, KeyTotals: st.KeyTotals})
	}
	excluded := limitedMost(all, top)
	out := make([][]keyRequest, 0, len(all)-excluded)
	for _, k := range all[excluded:] {
		out = append(out, keys[k.Key].requests)
	}
	return out
}

// fitLimit returns the smallest limit of l's kind and shape under which at most percent of
// keys would ever be limited, or why l is kept as it is.
func fitLimit(l config.Limit, cost config.Cost, keys [][]keyRequest, percent float64, start int64) (config.Limit, string) {
	if len(keys) == 0 {
		return l, "no key to fit it to"
	}
	minCapacity := cost.Units
	if cost.Header != "" {
		minCapacity = cost.Max
	}
	needs := make([]float64, len(keys))
	switch {
	case l.Algorithm == config.TokenBucket:
		// Capacity and refill scaled together: the burst-to-rate shape is kept.
		for i, reqs := range keys {
			needs[i] = bucketScale(reqs, l)
		}
		f := quantileAllowing(needs, percent)
		l.Capacity = max(ceil(f*float64(l.Capacity)), minCapacity, 1)
		l.RefillTokens = max(ceil(f*float64(l.RefillTokens)), 1)
	case l.Algorithm == config.FixedWindow && l.Calendar == config.NoCalendar,
		l.Algorithm == config.SlidingWindow:
		for i, reqs := range keys {
			needs[i] = windowNeed(reqs, time.Duration(l.Window), l.Algorithm == config.SlidingWindow, start)
		}
		l.Capacity = max(ceil(quantileAllowing(needs, percent)), minCapacity, 1)
	default:
		return l, "only token buckets and fixed or sliding windows are fitted"
	}
	if l.Capacity > 1_000_000_000 || l.RefillTokens > 1_000_000_000 {
		return l, "the fitted limit is above what a configuration allows"
	}
	return l, ""
}

// ceil rounds up, but not what is a whole number but for the binary search's last bits.
func ceil(x float64) int64 { return int64(math.Ceil(x - 1e-6)) }

// quantileAllowing is the smallest of needs that at most percent of them exceed.
func quantileAllowing(needs []float64, percent float64) float64 {
	sort.Float64s(needs)
	allowed := int(math.Floor(percent / 100 * float64(len(needs))))
	return needs[len(needs)-1-min(allowed, len(needs)-1)]
}

// bucketScale is the smallest factor f such that a token bucket of f times l's capacity,
// refilled at f times its rate, never limits reqs: a binary search over f, each step replaying
// the requests through the bucket's level (tokens used, refilled continuously).
func bucketScale(reqs []keyRequest, l config.Limit) float64 {
	capacity := float64(l.Capacity)
	perNano := float64(l.RefillTokens) / float64(l.RefillInterval)
	fits := func(f float64) bool {
		used, last := 0.0, reqs[0].at
		for _, r := range reqs {
			used = max(0, used-f*perNano*float64(r.at-last)) + float64(r.cost)
			last = r.at
			if used > f*capacity {
				return false
			}
		}
		return true
	}
	var total float64
	for _, r := range reqs {
		total += float64(r.cost)
	}
	lo, hi := 0.0, total/capacity+1 // hi holds every request at once
	for range 50 {
		if mid := (lo + hi) / 2; fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// windowNeed is the capacity a fixed (or sliding) window of the given length needs never to
// limit reqs, windows aligned as the replay's first phase aligns them (monotonicStart at the
// log's first request, start). A sliding window counts the current window and the previous one
// weighted by the share of it still inside the last window.
func windowNeed(reqs []keyRequest, window time.Duration, sliding bool, start int64) float64 {
	w := int64(window)
	var need, current, previous float64
	index := int64(math.MinInt64)
	for _, r := range reqs {
		mono := monotonicStart + r.at - start
		switch i := mono / w; {
		case i == index+1:
			previous, current = current, 0
			index = i
		case i != index:
			previous, current = 0, 0
			index = i
		}
		estimate := current + float64(r.cost)
		if sliding {
			estimate += previous * (1 - float64(mono%w)/float64(w))
		}
		need = max(need, estimate)
		current += float64(r.cost)
	}
	return need
}

// setLimits writes the fitted limits' capacities and refills into a rule of the configuration's
// JSON.
func setLimits(rule map[string]json.RawMessage, limits []config.Limit, fitted []bool) error {
	if !slices.Contains(fitted, true) {
		return nil
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(rule["limits"], &raw); err != nil {
		return err
	}
	for j, l := range limits {
		if !fitted[j] {
			continue
		}
		raw[j]["capacity"] = json.RawMessage(fmt.Sprint(l.Capacity))
		if _, ok := raw[j]["refill_tokens"]; ok {
			raw[j]["refill_tokens"] = json.RawMessage(fmt.Sprint(l.RefillTokens))
		}
	}
	out, err := json.Marshal(raw)
	rule["limits"] = out
	return err
}
