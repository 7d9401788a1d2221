package config

import (
	"strconv"
	"strings"
)

// cost reads a rule's cost. ok says whether the value compared with the
// limits' capacities, the fixed cost or max, is valid.
func (v *validator) cost(path string, value *jsonValue) (cost Cost, ok bool) {
	cost.Units = defaultCostUnits
	switch value.kind {
	case kindNumber:
		cost.Units, ok = v.wholeNumber(path, value, 0, maxCost, costRule)
		return cost, ok
	case kindObject:
	default:
		v.add(path, "got "+describe(value)+", want a number or an object: "+costRule)
		return cost, false
	}
	v.checkFieldNames(path, value, costFields)
	if header := v.required(value, path, "header", `"x-cost"`); header != nil {
		cost.Header = v.headerName(fieldPath(path, "header"), header)
	}
	if maximum := v.required(value, path, "max", "100"); maximum != nil {
		cost.Max, ok = v.wholeNumber(fieldPath(path, "max"), maximum, 1, maxCost, costMaxRule)
	}
	if units := value.member("default"); units != nil {
		defaultPath := fieldPath(path, "default")
		// A default of 0 would make every request that leaves the header out free.
		if n, unitsOK := v.wholeNumber(defaultPath, units, 1, maxCost, costDefaultRule); unitsOK {
			cost.Units = n
			if ok && n > cost.Max {
				v.add(defaultPath, strconv.FormatInt(n, 10)+" is above max "+strconv.FormatInt(cost.Max, 10)+
					": "+costDefaultRule)
			}
		}
	}
	return cost, ok
}

// checkCostFits reports a cost that exceeds the capacity of one of the
// rule's limits: no request could ever be admitted. fromHeader says cost
// was given as an object, so that its max is what must fit. path names the
// field (cost, or usage.reserve), which the fix names too.
func (v *validator) checkCostFits(path string, cost Cost, fromHeader bool, limitsPath string, limits []Limit) {
	smallest := -1
	for i, limit := range limits {
		// A capacity of 0 is a limit whose capacity was invalid, already reported.
		if limit.Capacity > 0 && (smallest < 0 || limit.Capacity < limits[smallest].Capacity) {
			smallest = i
		}
	}
	if smallest < 0 {
		return
	}
	capacity := limits[smallest].Capacity
	limitName := indexPath(limitsPath, smallest)
	if !fromHeader && cost.Units > capacity {
		v.add(path, strconv.FormatInt(cost.Units, 10)+" is above the capacity "+strconv.FormatInt(capacity, 10)+
			" of "+limitName+", so no request could ever be admitted: use a "+path[strings.LastIndexByte(path, '.')+1:]+" of at most "+
			strconv.FormatInt(capacity, 10)+" or raise that limit's capacity")
	}
	if fromHeader && cost.Max > capacity {
		v.add(path, "max "+strconv.FormatInt(cost.Max, 10)+" is above the capacity "+strconv.FormatInt(capacity, 10)+
			" of "+limitName+", so a request declaring that cost could never be admitted: use a max of at most "+
			strconv.FormatInt(capacity, 10)+" or raise that limit's capacity")
	}
}

func (v *validator) limits(path string, value *jsonValue) []Limit {
	var limits []Limit
	for i, item := range v.listItems(path, value, maxLimitsPerRule, "limits",
		"limits is a list of 1 to 8 limit objects such as ["+exampleLimit+"] or ["+exampleWindowLimit+"]",
		"add a limit such as "+exampleLimit) {
		limits = append(limits, v.limit(indexPath(path, i), item))
	}
	return limits
}

func (v *validator) limit(path string, value *jsonValue) Limit {
	var limit Limit
	if !v.wantKind(path, value, kindObject, "a limit is an object such as "+exampleLimit+" or "+exampleWindowLimit) {
		return limit
	}
	v.checkFieldNames(path, value, limitFields)
	algorithm := value.member("algorithm")
	if algorithm != nil {
		index, ok := v.enum(fieldPath(path, "algorithm"), algorithm, algorithmNames[:], "an algorithm", algorithmRule)
		if !ok {
			// Which other fields belong depends on the algorithm; only
			// capacity is common to all.
			if capacity := v.required(value, path, "capacity", "10"); capacity != nil {
				v.tokenCount(fieldPath(path, "capacity"), capacity, anyCapacityRule)
			}
			return limit
		}
		limit.Algorithm = Algorithm(index)
	}
	switch {
	case limit.Algorithm == Concurrency:
		v.concurrency(path, value, &limit)
	case limit.Algorithm == TokenBucket:
		v.tokenBucket(path, value, &limit, algorithm == nil)
	default:
		v.window(path, value, &limit)
	}
	if limit.Algorithm != Concurrency {
		v.refuseConcurrencyFields(path, value, limit.Algorithm)
	}
	return limit
}

// tokenBucket reads the fields of a token bucket limit. defaulted says the
// algorithm was not given.
func (v *validator) tokenBucket(path string, value *jsonValue, limit *Limit, defaulted bool) {
	window := value.member("window")
	// A limit with a window and neither refill field was meant to be a
	// window limit: say only that the algorithm is missing.
	meantWindow := defaulted && window != nil && value.member("refill_tokens") == nil && value.member("refill_interval") == nil
	if capacity := v.required(value, path, "capacity", "10"); capacity != nil {
		limit.Capacity, _ = v.tokenCount(fieldPath(path, "capacity"), capacity, capacityRule)
	}
	var refillInterval *jsonValue
	if !meantWindow {
		if refillTokens := v.required(value, path, "refill_tokens", "1"); refillTokens != nil {
			limit.RefillTokens, _ = v.tokenCount(fieldPath(path, "refill_tokens"), refillTokens, refillTokensRule)
		}
		refillInterval = v.required(value, path, "refill_interval", `"1s"`)
		if refillInterval != nil {
			limit.RefillInterval, _ = v.boundedDuration(fieldPath(path, "refill_interval"), refillInterval, &quotaDurations, refillIntervalRule)
		}
	}
	if calendar := value.member("calendar"); calendar != nil {
		v.add(fieldPath(path, "calendar"), `calendar belongs to "algorithm": "fixed_window", but this limit is a token bucket: `+
			`remove calendar, or set "algorithm": "fixed_window" and remove refill_tokens and refill_interval`)
	}
	if window != nil {
		message := `window belongs to the window algorithms, "fixed_window" and "sliding_window", but this limit is a token bucket`
		if defaulted {
			message += ` (the default algorithm)`
		}
		if meantWindow {
			message += `: add "algorithm": "fixed_window" or "sliding_window"`
		} else {
			message += `: remove window, or set "algorithm": "fixed_window" or "sliding_window" and remove refill_tokens and refill_interval`
		}
		v.add(fieldPath(path, "window"), message)
	}
}

// window reads the fields of a fixed or sliding window limit.
func (v *validator) window(path string, value *jsonValue, limit *Limit) {
	if capacity := v.required(value, path, "capacity", "100"); capacity != nil {
		limit.Capacity, _ = v.tokenCount(fieldPath(path, "capacity"), capacity, windowCapacityRule)
	}
	for _, name := range []string{"refill_tokens", "refill_interval"} {
		if value.member(name) != nil {
			v.add(fieldPath(path, name), name+` belongs to the "token_bucket" algorithm, but this limit is a `+
				strconv.Quote(limit.Algorithm.String())+`, which admits capacity units per window: remove it, `+
				`or remove "algorithm" to use a token bucket`)
		}
	}
	calendar := value.member("calendar")
	switch {
	case calendar != nil && limit.Algorithm != FixedWindow:
		v.add(fieldPath(path, "calendar"), `calendar belongs to "algorithm": "fixed_window", but this limit is a `+
			strconv.Quote(limit.Algorithm.String())+`: remove calendar, or use "algorithm": "fixed_window"`)
	case calendar != nil:
		v.calendar(path, calendar, limit)
		if value.member("window") != nil {
			v.add(fieldPath(path, "window"), `window and calendar are exclusive: a calendar window's length is the `+
				`day, week or month it falls in; remove window, or remove calendar for a window of a fixed length`)
		}
		return
	}
	if window := v.required(value, path, "window", `"1m"`); window != nil {
		limit.Window, _ = v.boundedDuration(fieldPath(path, "window"), window, &quotaDurations, windowRule)
	}
}

// tokenCount reads a whole number of tokens from 1 to maxTokens.
func (v *validator) tokenCount(path string, value *jsonValue, rule string) (int64, bool) {
	return v.wholeNumber(path, value, 1, maxTokens, rule)
}
