package admission

import "github.com/tollgate-proxy/tollgate/internal/duration"

// Verdict is what the filter must do with the request.
type Verdict uint8

const (
	// Allow: every enforced limit of every matching rule admitted the request and was charged.
	Allow Verdict = iota
	// Limited: an enforced limit rejected the request; nothing was charged.
	Limited
	// MissingKey: a matching rule's key could not be built and the rule rejects such requests.
	MissingKey
	// Exempt: the request matched an exemption; no rule applied.
	Exempt
	// BadCost: the rule's cost header is not a whole number.
	BadCost
	// Failed: shared data failed or stayed contended; the failure mode decides.
	Failed
	// EscapedSlash: the path has %2F or %5C and escaped_slashes is "reject": answer 400.
	EscapedSlash
)

// LimitStatus describes one applied limit after the decision, for rate-limit headers.
type LimitStatus struct {
	Rule          int   // index in the configuration's rules
	Limit         int   // index in the rule's limits
	Quota         int64 // the limit's capacity
	WindowSeconds int64 // time to restore the whole quota
	Remaining     int64 // whole units left
	// Reset is the time until the limit is whole again (X-RateLimit-Reset), on a rejection too:
	// Retry-After and Next say when the request would be admitted.
	Reset duration.Duration
	// Next is the time until one more unit than Remaining is available (0 when whole); for the
	// limit that rejected, the time until the request would be admitted.
	Next duration.Duration
	// Rejecting is true for the limit whose wait decided a rejection.
	Rejecting bool
	// PartitionHash identifies the partition key without revealing it.
	PartitionHash uint64
}

// Outcome is the decision for one request, with what the caller needs next. It and its slices
// belong to the Gate that made it and are valid until that Gate's next Admit; Charge makes a copy
// that outlives it. A caller does not write to it: the lean shape's two Outcomes (lean.go) are
// kept from one decision to the next, with only the fields that vary set. (The plugin rewrites
// the verdict of a delaying rule's Outcome, which is never of that shape.)
type Outcome struct {
	Verdict Verdict
	// Rule is the index of the rule that limited the request, whose key was missing, or whose
	// cost header was bad; -1 otherwise.
	Rule int
	// Status is the response status for MissingKey (the rule's missing_key status).
	Status int
	// MissingPart describes the key part that was missing, for the response body.
	MissingPart string
	// RetryAfter is the exact wait before the request would be admitted (Limited).
	RetryAfter duration.Duration
	// Admitted lists the rules that applied and admitted the request (Allow).
	Admitted []int
	// InvalidCost lists the shadow rules skipped because their cost header was bad.
	InvalidCost []int
	// ShadowErr is why a shadow rule could not be decided (the request went on).
	ShadowErr error
	// Corrupt counts the slots that held a value Tollgate did not write (replaced).
	Corrupt int
	// TableFull counts the limits whose row had no free slot (when_full).
	TableFull int
	// ShadowLimited lists the shadow rules that would have limited the request.
	ShadowLimited []int
	// MissingKeys lists the rules whose key was missing and which let the request through or
	// fell back to their fallback key.
	MissingKeys []int
	// Limits describes every limit applied, when rate-limit headers are configured.
	Limits []LimitStatus
	// Err is why shared data failed (Failed).
	Err error
	// Global lists the global checks the request still needs (Allow only): one per enforced rule
	// with a global limit, in rule order.
	Global []GlobalCheck
	// Delay is how long the request must be held before it goes on (Allow, a rule with
	// on_limit delay): its tokens are reserved, and due then (delay.go). DelayRule is the rule
	// whose tokens are due last, DelayOwner that bucket's owner hash (for logs: it does not
	// reveal the key).
	Delay      duration.Duration
	DelayRule  int
	DelayOwner uint64
	// InFlightLimited is true when the limit that rejected the request (Limited) is a
	// concurrency limit: every slot of the key was taken. InFlightOwner is that limit's owner
	// hash (its limit and key), to tell requests waiting for the same slots apart.
	InFlightLimited bool
	InFlightOwner   uint64
	// inFlight are the concurrency slots the request took (AppendInFlight).
	inFlight []InFlight

	// enforced are the enforced limits as decided (Allow only), at decidedAt: what Charge
	// copies, read only when it is asked for.
	enforced  []applied
	decidedAt int64
	// shadowCharged are the shadow rules' groups that admitted and were charged, when some
	// rule settles at the response (settle.go).
	shadowCharged [][]applied
}

// RetryAfterSeconds is the Retry-After header value: whole seconds, rounded up, at least 1.
func (o *Outcome) RetryAfterSeconds() int64 { return max(ceilSeconds(o.RetryAfter), 1) }

// collect records the status of a group's limits for rate-limit headers.
func (g *Gate) collect(group []applied, rejecting *applied, now int64) {
	if !g.collectStatus {
		return
	}
	for i := range group {
		a := &group[i]
		status := LimitStatus{
			Rule: a.rule.index, Limit: a.limit.index, Quota: a.limit.quota, WindowSeconds: a.limit.windowSeconds,
			Remaining: a.decision.Remaining, Reset: a.decision.Reset,
			PartitionHash: a.pkHash,
		}
		at := now
		if a.limit.wall {
			// A calendar window decides on the wall clock, and a month's length depends on
			// the month.
			at = a.at
			if c, ok := a.limit.algo.(calendarWindow); ok {
				status.WindowSeconds = c.windowSeconds(a.next)
			}
		}
		switch {
		case a == rejecting:
			status.Next, status.Rejecting = a.decision.RetryAfter, true
		case a.skip:
			continue
		default:
			state := a.next
			if rejecting != nil && a.decision.Allowed && a.cost > 0 {
				// Decided as if charged, but the group was rejected: nothing was taken.
				status.Remaining += a.cost
				state = a.limit.algo.give(a.next, at, a.cost)
			}
			if status.Remaining < a.limit.quota {
				if _, d := a.limit.algo.take(state, at, status.Remaining+1); !d.Allowed {
					status.Next = d.RetryAfter
				}
			}
		}
		g.out.Limits = append(g.out.Limits, status)
	}
}
