package simulate

import (
	"time"

	"github.com/tollgate-proxy/tollgate/internal/admission"
)

// FleetFigures are one rule's costs and accuracy in the fleet model, with or without leases.
// Amounts of tokens are in the rule's cost units: requests, when each costs 1.
type FleetFigures struct {
	// Checked counts the requests the local limits admitted that the global limit then decided;
	// Admitted those it admitted (all of the request's global limits did), Limited the others.
	Checked  int64 `json:"checked"`
	Admitted int64 `json:"admitted"`
	Limited  int64 `json:"limited"`
	// Calls are the calls to the rate limit service (ShouldRateLimit), lease requests included;
	// CallsPerRequest is Calls / Checked; the peak is the most in one calendar second, the mean
	// over the seconds from the log's first request to its last.
	Calls              int64   `json:"calls"`
	CallsPerRequest    float64 `json:"calls_per_request"`
	CallsPerSecondPeak int64   `json:"calls_per_second_peak"`
	CallsPerSecondMean float64 `json:"calls_per_second_mean"`
	// Descriptors are the descriptors the calls carry (one each: Tollgate sends a descriptor per
	// rule and call); RedisCommands what envoyproxy/ratelimit sends Redis for them (INCRBY and
	// EXPIRE per descriptor, one pipeline per call), per second at the peak and on average.
	Descriptors                int64   `json:"descriptors"`
	RedisCommands              int64   `json:"redis_commands"`
	RedisCommandsPerSecondPeak int64   `json:"redis_commands_per_second_peak"`
	RedisCommandsPerSecondMean float64 `json:"redis_commands_per_second_mean"`
	// HotKeyCallsPerSecondPeak is the most calls one key made in one second: its counter lives on
	// one Redis node (one shard of a cluster), whatever the fleet's size.
	HotKeyCallsPerSecondPeak int64 `json:"hot_key_calls_per_second_peak"`
	// BusiestShardCommandsPerSecondPeak is the most Redis commands one master of the cluster
	// (FleetResult.RedisShards) took for the rule in one second.
	BusiestShardCommandsPerSecondPeak int64 `json:"busiest_shard_redis_commands_per_second_peak"`
	// LeaseTokensGranted are the tokens the service granted to lease requests; LeaseTokensStranded
	// those no request spent (dropped at their ttl or window's end, or still held at the log's end).
	LeaseTokensGranted  int64 `json:"lease_tokens_granted"`
	LeaseTokensStranded int64 `json:"lease_tokens_stranded"`
	// UnderAdmitted is, summed over every key and service window, what was admitted below
	// min(demand, limit): quota the key wanted and the service had, lost to tokens held by other
	// replicas or stranded. OverAdmitted is what was admitted beyond the limit (0 unless the model
	// or the plugin is wrong).
	UnderAdmitted int64 `json:"under_admitted"`
	OverAdmitted  int64 `json:"over_admitted"`
}

// fleetStats counts one fleet run's figures.
type fleetStats struct {
	rules   []ruleStats // by rule index
	keys    map[ruleKey]*keyStats
	seconds int64 // calendar seconds from the log's first request to its last
}

type ruleStats struct {
	FleetFigures
	second, inSecond int64
	spentTokens      int64
	// shardCalls are the calls of the current second (second) on each master.
	shardCalls        []int64
	busiestShardCalls int64
}

// keyStats are one key's figures: its demand and admissions in the service's current and
// previous windows (a held request is decided after it arrived, at most a window later), and its
// calls in the current second.
type keyStats struct {
	windows          [2]keyWindow // [0] the current window
	second, inSecond int64
}

type keyWindow struct {
	start            int64 // Unix seconds; 0 none
	demand, admitted int64
}

func newFleetStats(rules int, first, last int64) *fleetStats {
	return &fleetStats{rules: make([]ruleStats, rules), keys: map[ruleKey]*keyStats{},
		seconds: floorDiv(last, int64(time.Second)) - floorDiv(first, int64(time.Second)) + 1}
}

func (s *fleetStats) key(rule int, key string) *keyStats {
	id := ruleKey{rule, key}
	k := s.keys[id]
	if k == nil {
		k = &keyStats{second: -1}
		s.keys[id] = k
	}
	return k
}

// demand counts a global check arriving at now, in the service's window of now, and returns the
// window's start.
func (s *fleetStats) demand(c admission.GlobalCheck, limit GlobalLimit, now int64) int64 {
	start := limit.windowStart(now)
	k := s.key(c.Rule, c.Key)
	if k.windows[0].start != start {
		s.fold(c.Rule, k.windows[1], limit)
		k.windows[1], k.windows[0] = k.windows[0], keyWindow{start: start}
	}
	k.windows[0].demand += c.Cost
	s.rules[c.Rule].Checked++
	return start
}

// fold adds a finished window's under- and over-admission to its rule.
func (s *fleetStats) fold(rule int, w keyWindow, limit GlobalLimit) {
	r := &s.rules[rule]
	r.UnderAdmitted += max(min(w.demand, limit.RequestsPerUnit)-w.admitted, 0)
	r.OverAdmitted += max(w.admitted-limit.RequestsPerUnit, 0)
}

// decided counts a global check's request as admitted or not, in the window it arrived in.
func (s *fleetStats) decided(c heldCheck, admitted bool) {
	r := &s.rules[c.Rule]
	if !admitted {
		r.Limited++
		return
	}
	r.Admitted++
	k := s.key(c.Rule, c.Key)
	for i := range k.windows {
		if k.windows[i].start == c.window {
			k.windows[i].admitted += c.Cost
		}
	}
}

// call counts a call to the service for a rule's key at now, on master shard of shards.
func (s *fleetStats) call(rule int, key string, now int64, shard, shards int) {
	r := &s.rules[rule]
	sec := floorDiv(now, int64(time.Second))
	r.Calls++
	if r.shardCalls == nil {
		r.shardCalls = make([]int64, shards)
	}
	if sec != r.second {
		r.second, r.inSecond = sec, 0
		clear(r.shardCalls)
	}
	r.inSecond++
	r.shardCalls[shard]++
	r.busiestShardCalls = max(r.busiestShardCalls, r.shardCalls[shard])
	r.CallsPerSecondPeak = max(r.CallsPerSecondPeak, r.inSecond)
	k := s.key(rule, key)
	if sec != k.second {
		k.second, k.inSecond = sec, 0
	}
	k.inSecond++
	r.HotKeyCallsPerSecondPeak = max(r.HotKeyCallsPerSecondPeak, k.inSecond)
}

func (s *fleetStats) granted(rule int, tokens int64) { s.rules[rule].LeaseTokensGranted += tokens }
func (s *fleetStats) spent(rule int, tokens int64)   { s.rules[rule].spentTokens += tokens }

// figures folds the windows still open and returns each rule's figures.
func (s *fleetStats) figures(rules []fleetRule) []FleetFigures {
	for id, k := range s.keys {
		for _, w := range k.windows {
			s.fold(id.rule, w, rules[id.rule].limit)
		}
	}
	out := make([]FleetFigures, len(s.rules))
	for i := range s.rules {
		r := &s.rules[i]
		f := r.FleetFigures
		f.Descriptors = f.Calls
		f.RedisCommands = redisCommandsPerDescriptor * f.Descriptors
		f.RedisCommandsPerSecondPeak = redisCommandsPerDescriptor * f.CallsPerSecondPeak
		f.BusiestShardCommandsPerSecondPeak = redisCommandsPerDescriptor * r.busiestShardCalls
		f.CallsPerSecondMean = float64(f.Calls) / float64(s.seconds)
		f.RedisCommandsPerSecondMean = float64(f.RedisCommands) / float64(s.seconds)
		if f.Checked > 0 {
			f.CallsPerRequest = float64(f.Calls) / float64(f.Checked)
		}
		f.LeaseTokensStranded = f.LeaseTokensGranted - r.spentTokens
		out[i] = f
	}
	return out
}
