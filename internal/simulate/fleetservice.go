package simulate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/rls"
)

// The rate limit service of the fleet model: envoyproxy/ratelimit's fixed windows on Redis, as
// its source does it (src/redis/fixed_cache_impl.go and src/limiter/base_limiter.go):
//
//   - the counter of a descriptor lives under a key named by the domain, the descriptor and the
//     window's start (Unix seconds truncated to the unit), so a window is a calendar second,
//     minute, hour or day;
//   - every call adds its hits_addend to the counter (INCRBY, then EXPIRE, in one pipeline per
//     call: Tollgate sends one descriptor per call, so no GET pipeline first), also when the
//     answer is OVER_LIMIT: hits over the limit are counted all the same;
//   - the answer is OVER_LIMIT when the counter after the call exceeds requests_per_unit, else OK
//     with limit_remaining = requests_per_unit − counter;
//   - duration_until_reset is whole seconds, unit − (now in Unix seconds mod unit).
//
// Its local cache of keys over the limit (LOCAL_CACHE_SIZE_IN_BYTES, off by default) is not
// modelled: with it, calls for a key already over its limit skip Redis.

// redisCommandsPerDescriptor is what envoyproxy/ratelimit sends Redis per descriptor: INCRBY
// and EXPIRE.
const redisCommandsPerDescriptor = 2

// GlobalLimit is a rule's limit in the rate limit service: requests_per_unit per unit. It lives
// in the service's configuration, not in Tollgate's, so the fleet model is told it.
type GlobalLimit struct {
	RequestsPerUnit int64
	// Unit is the window's length (the unit times its unit_multiplier) and UnitName how the
	// service names it (second, minute, …, "5 minute" with a multiplier).
	Unit     time.Duration
	UnitName string
	// Unlimited is a descriptor the service never limits (unlimited: true): every call is OK.
	Unlimited bool
	// code is the unit as the protocol numbers it (RateLimitResponse.RateLimit.Unit).
	code uint8
}

func (l GlobalLimit) String() string {
	if l.Unlimited {
		return "unlimited"
	}
	return strconv.FormatInt(l.RequestsPerUnit, 10) + "/" + l.UnitName
}

// NewGlobalLimit is a limit of n requests per multiplier units (unit in any case), as the
// service's configuration gives it.
func NewGlobalLimit(n int64, unit string, multiplier int64) (GlobalLimit, error) {
	// rls.Unit.Seconds gives a unit's length as the service counts it (utils.UnitToDivider).
	u, known := rls.UnitNamed(unit)
	switch {
	case !known:
		names := rls.UnitNames()
		return GlobalLimit{}, fmt.Errorf("unknown unit %q: use %s or %s (the service's units)", unit,
			strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
	case n < 1 || n > 1<<32-1:
		return GlobalLimit{}, fmt.Errorf("%d requests per unit: use 1 to 4294967295 (the service's requests_per_unit)", n)
	case multiplier < 1 || multiplier > 1<<32-1:
		return GlobalLimit{}, fmt.Errorf("unit_multiplier %d: use 1 to 4294967295", multiplier)
	}
	name := strings.ToLower(unit)
	if multiplier > 1 {
		name = strconv.FormatInt(multiplier, 10) + " " + name
	}
	length := time.Duration(u.Seconds()) * time.Second
	return GlobalLimit{RequestsPerUnit: n, Unit: length * time.Duration(multiplier), UnitName: name, code: uint8(u)}, nil
}

// UnlimitedGlobalLimit is a descriptor the service never limits: a count it never reaches.
func UnlimitedGlobalLimit() GlobalLimit {
	return GlobalLimit{RequestsPerUnit: 1 << 62, Unit: time.Second, UnitName: "second", Unlimited: true}
}

// ParseGlobalLimit reads a --global-limit value: RULE=N/UNIT, as in 100/minute.
func ParseGlobalLimit(s string) (rule string, limit GlobalLimit, err error) {
	rule, spec, ok := strings.Cut(s, "=")
	if !ok || rule == "" {
		return "", GlobalLimit{}, fmt.Errorf("%q is not RULE=N/UNIT, e.g. per-api-key=100/minute", s)
	}
	count, unit, ok := strings.Cut(spec, "/")
	n, err := strconv.ParseInt(count, 10, 64)
	if !ok || err != nil {
		return "", GlobalLimit{}, fmt.Errorf("%q: the limit must be N/UNIT with N a whole number (the service's requests_per_unit), e.g. %s=100/minute", s, rule)
	}
	if limit, err = NewGlobalLimit(n, unit, 1); err != nil {
		return "", GlobalLimit{}, fmt.Errorf("%q: %w", s, err)
	}
	return rule, limit, nil
}

// serviceAnswer is the service's answer to one call.
type serviceAnswer struct {
	over       bool
	remaining  int64
	untilReset time.Duration
}

// fleetService is the service's counters, one per rule and key, in the current window.
type fleetService struct {
	counters map[ruleKey]*serviceCounter
}

// ruleKey is a rule (by its index) and a partition key as the service knows it (GlobalKey).
type ruleKey struct {
	rule int
	key  string
}

type serviceCounter struct {
	window int64 // the window's start, Unix seconds
	count  int64
}

func newFleetService() *fleetService { return &fleetService{counters: map[ruleKey]*serviceCounter{}} }

// hit counts hits for a rule's key at now (Unix nanoseconds) and answers as the service would.
func (s *fleetService) hit(id ruleKey, limit GlobalLimit, hits, now int64) serviceAnswer {
	window := limit.windowStart(now)
	c := s.counters[id]
	if c == nil {
		c = &serviceCounter{window: window}
		s.counters[id] = c
	}
	if c.window != window {
		c.window, c.count = window, 0
	}
	c.count += hits
	// Whole seconds, as the service computes it from Unix seconds.
	answer := serviceAnswer{untilReset: limit.Unit - time.Duration(floorDiv(now, int64(time.Second))-window)*time.Second}
	if c.count > limit.RequestsPerUnit {
		answer.over = true
	} else {
		answer.remaining = limit.RequestsPerUnit - c.count
	}
	return answer
}

// windowStart is the start of the service's window holding now (Unix nanoseconds), in Unix
// seconds: the time truncated to the unit (src/limiter/cache_key.go).
func (l GlobalLimit) windowStart(now int64) int64 {
	unit := int64(l.Unit / time.Second)
	sec := floorDiv(now, int64(time.Second))
	return sec - sec%unit
}

// floorDiv divides rounding towards minus infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// ErrNoGlobalRule is CheckFleet's error for a configuration without a global limit.
var ErrNoGlobalRule = errors.New("the configuration has no rule with a global limit")
