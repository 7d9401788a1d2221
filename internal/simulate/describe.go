package simulate

import (
	"fmt"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// eachLimit calls fn with every limit of a rule: its limits, or every tier's (tier "" for the
// former), each with its position in its list.
func eachLimit(r *config.Rule, fn func(tier string, position int, l config.Limit)) {
	for j, l := range r.Limits {
		fn("", j, l)
	}
	if r.LimitsBy != nil {
		for _, tier := range r.LimitsBy.Tiers {
			for j, l := range tier.Limits {
				fn(tier.Name, j, l)
			}
		}
	}
}

// unitWord is what a rule's limits count: requests when each costs one, units otherwise.
func unitWord(c config.Cost) string {
	if c.Header == "" && c.Units == 1 {
		return "requests"
	}
	return "units"
}

// describeCost says what a request costs, in words.
func describeCost(c config.Cost) string {
	switch {
	case c.Header != "":
		return fmt.Sprintf("a request costs its %s header's value, 1 to %s units (%s without the header)",
			c.Header, Thousands(c.Max), Thousands(c.Units))
	case c.Units == 1:
		return "a request costs 1 unit"
	}
	return fmt.Sprintf("a request costs %s units", Thousands(c.Units))
}

// describeLimitWords says what a limit admits, in words: "20 requests at once, then 5 per
// second".
func describeLimitWords(l config.Limit, unit string) string {
	switch l.Algorithm {
	case config.TokenBucket:
		return fmt.Sprintf("%s %s at once, then %s", Thousands(l.Capacity), unit, per(l.RefillTokens, time.Duration(l.RefillInterval)))
	case config.FixedWindow:
		if l.Calendar != config.NoCalendar {
			return fmt.Sprintf("%s %s per calendar %s (UTC)", Thousands(l.Capacity), unit, l.Calendar)
		}
		return fmt.Sprintf("%s %s per %s window (fixed windows, one after the other)", Thousands(l.Capacity), unit, describeWindow(time.Duration(l.Window)))
	case config.SlidingWindow:
		return fmt.Sprintf("%s %s in any %s (sliding window)", Thousands(l.Capacity), unit, spanWords(time.Duration(l.Window)))
	case config.Concurrency:
		return fmt.Sprintf("%s requests in flight at once", Thousands(l.MaxInFlight))
	}
	return l.Algorithm.String()
}

// per says "5 per second", "300 per minute" or "3 every 250ms".
func per(n int64, d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Second, "second"}, {time.Minute, "minute"}, {time.Hour, "hour"}, {24 * time.Hour, "day"}} {
		if d == u.d {
			return fmt.Sprintf("%s per %s", Thousands(n), u.name)
		}
	}
	return fmt.Sprintf("%s every %s", Thousands(n), d)
}

// spanWords says "1 hour", "10 minutes", "1.5s".
func spanWords(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if d%u.d == 0 {
			if n := d / u.d; n != 1 {
				return fmt.Sprintf("%d %ss", n, u.name)
			}
			return "1 " + u.name
		}
	}
	return d.String()
}
