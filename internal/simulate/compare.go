package simulate

import "sort"

// Changes is what the second configuration (--compare) changes from the first (--config) on the
// same log, request by request: "newly limited" requests an enforced rule of the second limits
// and the first did not, "newly admitted" the reverse.
type Changes struct {
	// From and To name the configurations: --config, then --compare.
	From string `json:"from"`
	To   string `json:"to"`
	// NewlyLimited and NewlyAdmitted count requests any enforced rule limited under one
	// configuration and none under the other.
	NewlyLimited  int64 `json:"newly_limited"`
	NewlyAdmitted int64 `json:"newly_admitted"`
	// Rules holds every rule of either configuration, matched by name; a rule in one only is
	// compared with a rule that limits nothing.
	Rules map[string]*RuleChanges `json:"rules"`
}

// RuleChanges is what changes for one rule.
type RuleChanges struct {
	// In says where the rule is: "both", "from" or "to".
	In            string `json:"in"`
	NewlyLimited  int64  `json:"newly_limited"`
	NewlyAdmitted int64  `json:"newly_admitted"`
	// KeysNewlyLimited counts the keys limited under To and never under From; KeysNewlyAdmitted
	// the keys limited under From and never under To.
	KeysNewlyLimited  int `json:"keys_newly_limited"`
	KeysNewlyAdmitted int `json:"keys_newly_admitted"`
	// MovedMost are the keys whose limited requests change most, either way.
	MovedMost []KeyChange `json:"keys_moved_most"`
}

// KeyChange is one key's limited requests under both configurations.
type KeyChange struct {
	Key         string `json:"key"`
	Requests    int64  `json:"requests"`
	LimitedFrom int64  `json:"limited_from"`
	LimitedTo   int64  `json:"limited_to"`
}

// compare says what the simulator to changes from the simulator from, which replayed the same
// requests with Options.RecordVerdicts.
func compare(from, to *Simulator, top int) *Changes {
	c := &Changes{From: from.opts.ConfigName, To: to.opts.ConfigName, Rules: map[string]*RuleChanges{}}
	for i := range from.limitedBy {
		was, is := from.limitedBy[i] != 0, to.limitedBy[i] != 0
		switch {
		case is && !was:
			c.NewlyLimited++
		case was && !is:
			c.NewlyAdmitted++
		}
	}
	index := func(s *Simulator) map[string]int {
		m := map[string]int{}
		for i := range s.rules {
			m[s.rules[i].name] = i
		}
		return m
	}
	fromRules, toRules := index(from), index(to)
	for name, i := range fromRules {
		j, ok := toRules[name]
		in := "both"
		if !ok {
			in, j = "from", -1
		}
		c.Rules[name] = compareRule(from, to, i, j, in, top)
	}
	for name, j := range toRules {
		if _, ok := fromRules[name]; !ok {
			c.Rules[name] = compareRule(from, to, -1, j, "to", top)
		}
	}
	return c
}

// compareRule compares rule i of from with rule j of to (-1: the configuration lacks it).
func compareRule(from, to *Simulator, i, j int, in string, top int) *RuleChanges {
	rc := &RuleChanges{In: in, MovedMost: []KeyChange{}}
	limited := func(s *Simulator, rule, request int) bool {
		return rule >= 0 && s.limitedBy[request]&(1<<rule) != 0
	}
	for n := range from.limitedBy {
		was, is := limited(from, i, n), limited(to, j, n)
		switch {
		case is && !was:
			rc.NewlyLimited++
		case was && !is:
			rc.NewlyAdmitted++
		}
	}
	keys := map[string]*KeyChange{}
	add := func(s *Simulator, rule int, set func(*KeyChange, *keyState)) {
		if rule < 0 {
			return
		}
		for k, st := range s.rules[rule].keys {
			kc := keys[k]
			if kc == nil {
				kc = &KeyChange{Key: k}
				keys[k] = kc
			}
			kc.Requests = max(kc.Requests, st.Requests)
			set(kc, st)
		}
	}
	add(from, i, func(kc *KeyChange, st *keyState) { kc.LimitedFrom = st.Limited })
	add(to, j, func(kc *KeyChange, st *keyState) { kc.LimitedTo = st.Limited })
	var moved []KeyChange
	for _, kc := range keys {
		switch {
		case kc.LimitedTo > 0 && kc.LimitedFrom == 0:
			rc.KeysNewlyLimited++
		case kc.LimitedFrom > 0 && kc.LimitedTo == 0:
			rc.KeysNewlyAdmitted++
		}
		if kc.LimitedFrom != kc.LimitedTo {
			moved = append(moved, *kc)
		}
	}
	// The largest change first; ties by key, so that a report does not change from run to run.
	sort.Slice(moved, func(a, b int) bool {
		da, db := absDiff(moved[a]), absDiff(moved[b])
		if da != db {
			return da > db
		}
		return moved[a].Key < moved[b].Key
	})
	var ruleName string
	if i >= 0 {
		ruleName = from.rules[i].name
	} else {
		ruleName = to.rules[j].name
	}
	for _, kc := range moved[:min(top, len(moved))] {
		kc.Key = from.opts.Keys.Name(ruleName, []byte(kc.Key))
		rc.MovedMost = append(rc.MovedMost, kc)
	}
	return rc
}

func absDiff(k KeyChange) int64 {
	if d := k.LimitedTo - k.LimitedFrom; d > 0 {
		return d
	}
	return k.LimitedFrom - k.LimitedTo
}
