package config

import "github.com/tollgate-proxy/tollgate/internal/duration"

// OnLimit is what a rule does with a request over its limits: reject it at once (429 with
// Retry-After, the default), or hold it until its tokens are due, up to MaxDelay, which paces
// requests instead of rejecting them (a client-side limit in front of a third-party API).
type OnLimit struct {
	Action OnLimitAction
	// MaxDelay is the longest a request is held (OnLimitDelay): a request whose tokens are due
	// later is rejected at once, as with OnLimitReject.
	MaxDelay duration.Duration
}

// OnLimitAction is what happens to a request over a rule's limits.
type OnLimitAction uint8

const (
	// OnLimitReject answers 429 at once.
	OnLimitReject OnLimitAction = iota
	// OnLimitDelay holds the request until its tokens are due (at most MaxDelay).
	OnLimitDelay
)

var onLimitActionNames = []string{OnLimitReject: "reject", OnLimitDelay: "delay"}

func (a OnLimitAction) String() string {
	return enumString(onLimitActionNames[:], int(a), "OnLimitAction")
}

// Delays reports whether the rule holds requests over its limits (and is not a shadow rule,
// which never holds).
func (r *Rule) Delays(cfg *Config) bool {
	return r.OnLimit.Action == OnLimitDelay && !r.Shadow && !cfg.Shadow
}

// Bounds of max_delay.
const (
	minMaxDelay = duration.Millisecond
	maxMaxDelay = 60 * duration.Second
)

var onLimitFields = []string{"action", "max_delay"}

const (
	exampleOnLimit = `{"action": "delay", "max_delay": "2s"}`
	onLimitShape   = `on_limit is {"action": "reject"} (answer 429 at once, the default) or ` + exampleOnLimit +
		` (hold the request until its tokens are due, at most max_delay)`
	onLimitActionRule = `action is "reject" (answer 429 at once, the default) or "delay" (hold the request ` +
		`until its tokens are due, at most max_delay)`
	maxDelayRule = `max_delay is the longest a request is held, a duration from "1ms" to "60s", e.g. "500ms" or "2s"`
)

// onLimit reads a rule's on_limit.
func (v *validator) onLimit(path string, value *jsonValue) OnLimit {
	var o OnLimit
	if !v.wantKind(path, value, kindObject, onLimitShape) {
		return o
	}
	v.checkFieldNames(path, value, onLimitFields)
	action := v.required(value, path, "action", `"delay"`)
	if action != nil {
		index, ok := v.enum(fieldPath(path, "action"), action, onLimitActionNames, "an on_limit action", onLimitActionRule)
		if !ok {
			return o
		}
		o.Action = OnLimitAction(index)
	}
	maxDelay := value.member("max_delay")
	switch {
	case o.Action == OnLimitDelay && maxDelay == nil:
		v.add(fieldPath(path, "max_delay"), `missing: a delaying rule needs the longest a request may be held, e.g. "max_delay": "2s"`)
	case o.Action == OnLimitReject && maxDelay != nil && action != nil:
		v.add(fieldPath(path, "max_delay"), `is only for "action": "delay": a rejecting rule holds nothing; remove max_delay or write "action": "delay"`)
	case maxDelay != nil:
		o.MaxDelay = v.maxDelay(fieldPath(path, "max_delay"), maxDelay)
	}
	return o
}

func (v *validator) maxDelay(path string, value *jsonValue) duration.Duration {
	if value.kind == kindString {
		if d, problem := parseDuration(value.text); problem == "" && (d < minMaxDelay || d > maxMaxDelay) {
			v.add(path, quoteClipped(value.text)+" is out of range: "+maxDelayRule)
			return 0
		}
	}
	d, _ := v.boundedDuration(path, value, &durations, maxDelayRule)
	return d
}

// checkDelayFits reports the limits a delaying rule cannot hold requests for: a window counts
// the requests of its window, and a request held for the next window would be counted twice or
// not at all, so only token buckets delay (and concurrency limits, whose requests wait for a
// free slot).
func (v *validator) checkDelayFits(path string, o OnLimit, limitsPath string, limits []Limit) {
	if o.Action != OnLimitDelay {
		return
	}
	for i, l := range limits {
		if l.Algorithm == FixedWindow || l.Algorithm == SlidingWindow {
			v.add(fieldPath(path, "action"), `"delay" works with token_bucket and concurrency limits only, and `+
				indexPath(limitsPath, i)+` is a `+l.Algorithm.String()+`: make it a token bucket (capacity, refill_tokens, `+
				`refill_interval), which paces requests evenly, or use "action": "reject"`)
			return
		}
	}
}
