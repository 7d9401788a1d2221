package simulate

import (
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// Warning is something in the setup that is probably wrong, found in a replay's figures: the
// numbers are right for the log and the configuration, but likely not what was meant.
type Warning struct {
	// Rule is the rule the warning is about ("" for the whole configuration).
	Rule string `json:"rule,omitempty"`
	// Kind is one of the WarnMissingKey, WarnInvalidCost or WarnShortLog.
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// The kinds of warnings.
const (
	WarnMissingKey  = "missing_key"
	WarnInvalidCost = "invalid_cost"
	WarnShortLog    = "short_log"
)

// missingKeyShare is the share of a rule's requests without its key above which the log most
// likely does not record the key.
const missingKeyShare = 0.5

// warnings lists what in the replay's figures points at a wrong setup.
func (s *Simulator) warnings(res *Result) []Warning {
	out := []Warning{}
	for i, rule := range s.cfg.Rules {
		rr := res.Rules[rule.Name]
		if rr.Requests > 0 && float64(rr.MissingKey) > missingKeyShare*float64(rr.Requests) {
			out = append(out, Warning{Rule: rule.Name, Kind: WarnMissingKey, Message: fmt.Sprintf(
				"rule %s: %s of its %s requests (%.0f %%) have no key: %s",
				rule.Name, Thousands(rr.MissingKey), Thousands(rr.Requests),
				100*float64(rr.MissingKey)/float64(rr.Requests), missingKeyHint(rule.Key, s.opts.LogFormat))})
		}
		if rr.InvalidCost > 0 {
			out = append(out, Warning{Rule: rule.Name, Kind: WarnInvalidCost, Message: fmt.Sprintf(
				"rule %s: %s requests had a cost header (%s) that is not a whole number and were answered 400",
				rule.Name, Thousands(rr.InvalidCost), rule.Cost.Header)})
		}
		if window, name := longestWindow(&s.cfg.Rules[i]); window > s.opts.Span {
			out = append(out, Warning{Rule: rule.Name, Kind: WarnShortLog, Message: fmt.Sprintf(
				"rule %s: the log covers %s, less than its %s window: every window starts empty at the log's "+
					"start, so the replay shows fewer limited requests than a longer log would",
				rule.Name, roundSpan(s.opts.Span), name)})
		}
	}
	return out
}

// missingKeyHint says where a rule's key may be missing from the log.
func missingKeyHint(parts []config.KeyPart, format Format) string {
	var headers, others []string
	for _, p := range parts {
		switch p.Kind {
		case config.KeyHeader:
			headers = append(headers, p.Header)
		case config.KeyAttribute:
			others = append(others, "an attribute part (never in a log)")
		default:
			others = append(others, p.Kind.String())
		}
	}
	if len(headers) == 0 {
		return "does the log record " + strings.Join(others, " and ") + "?"
	}
	if format == Combined {
		return "a combined log records no request header but referer and user-agent, so " +
			strings.Join(headers, " and ") + " is always absent: replay an envoy-json log that records it"
	}
	fields := make([]string, len(headers))
	for i, h := range headers {
		fields[i] = fmt.Sprintf(`"req.%s": "%%REQ(%s)%%"`, h, strings.ToUpper(h))
	}
	return "does the log record " + strings.Join(headers, " and ") + "? Envoy's json_format needs " +
		strings.Join(fields, " and ")
}

// longestWindow is the longest window of a rule's fixed or sliding windows (0 for none), and
// its name ("1-hour", "calendar day").
func longestWindow(r *config.Rule) (longest time.Duration, name string) {
	eachLimit(r, func(_ string, _ int, l config.Limit) {
		if w := windowOf(l); w > longest {
			longest, name = w, describeWindow(w)
			if l.Calendar != config.NoCalendar {
				name = "calendar " + l.Calendar.String()
			}
		}
	})
	return longest, name
}

// windowOf is a window limit's window, a calendar one's shortest length (0 for other limits).
func windowOf(l config.Limit) time.Duration {
	if l.Algorithm != config.FixedWindow && l.Algorithm != config.SlidingWindow {
		return 0
	}
	switch l.Calendar {
	case config.CalendarDay:
		return 24 * time.Hour
	case config.CalendarWeek:
		return 7 * 24 * time.Hour
	case config.CalendarMonth:
		return 28 * 24 * time.Hour
	}
	return time.Duration(l.Window)
}

func describeWindow(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d-day", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%d-hour", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d-minute", d/time.Minute)
	}
	return d.String()
}

// roundSpan writes a log's span to the second (to the millisecond under one second).
func roundSpan(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
