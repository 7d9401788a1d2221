package config

import "github.com/tollgate-proxy/tollgate/internal/duration"

// GlobalLease makes a global limit take tokens from the rate limit service ahead of demand: a
// replica asks for several hits at once and spends them locally, across all its worker VMs,
// without a call per request. docs/global-limits.md gives the design and its bounds.
type GlobalLease struct {
	// MaxTokens is the most tokens one lease request asks for.
	MaxTokens int64
	// TTL is how long leased tokens may be spent; unspent ones are dropped then (or earlier, at
	// the end of the service's window).
	TTL duration.Duration
}

// Defaults and bounds of a lease.
const (
	DefaultLeaseTTL = duration.Second
	MinLeaseTTL     = 10 * duration.Millisecond
	MaxLeaseTTL     = duration.Hour
	MaxLeaseTokens  = 10_000
)

var leaseFields = []string{"max_tokens", "ttl"}

const (
	leaseShape = `lease is an object such as {"max_tokens": 16, "ttl": "1s"}: how many tokens a replica may ` +
		`take from the service at once, and how long it may keep them`
	leaseMaxTokensRule = `max_tokens is the most tokens one lease request asks the service for, a whole number ` +
		`from 1 to 10000, e.g. 16`
	leaseTTLRule = `ttl is how long leased tokens may be spent before they are dropped, a duration from "10ms" ` +
		`to "1h" (default "1s"), e.g. "1s" or "500ms"`
)

// lease reads a global limit's lease.
func (v *validator) lease(path string, value *jsonValue) *GlobalLease {
	l := &GlobalLease{TTL: DefaultLeaseTTL}
	if !v.wantKind(path, value, kindObject, leaseShape) {
		return l
	}
	v.checkFieldNames(path, value, leaseFields)
	if n := v.required(value, path, "max_tokens", "16"); n != nil {
		if tokens, ok := v.wholeNumber(fieldPath(path, "max_tokens"), n, 1, MaxLeaseTokens, leaseMaxTokensRule); ok {
			l.MaxTokens = tokens
		}
	}
	if ttl := value.member("ttl"); ttl != nil {
		if d, ok := v.boundedDuration(fieldPath(path, "ttl"), ttl, &leaseTTLs, leaseTTLRule); ok {
			l.TTL = d
		}
	}
	return l
}

var leaseTTLs = durationBounds{parseDuration, MinLeaseTTL, MaxLeaseTTL, "10ms", "1h",
	`quote the ttl and give it a unit, e.g. "1s" or "500ms"`}
