package admission

import (
	"math"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// A concurrency limit admits at most max requests of a key between their admission and the end
// of their stream. A counter of requests in flight alone cannot tell which of them will never
// be released (a worker VM that died, a stream end that never arrived), so acquisitions are
// counted per timeout period instead: the periods are the multiples of slot_timeout on the monotonic
// clock (the same for every worker VM), and the cells hold
//
//	cell 0  the start of the current period (ns)
//	cell 1  the acquisitions of the current period still in flight
//	cell 2  the acquisitions of the previous period still in flight
//
// The requests in flight are cell 1 + cell 2. When the clock enters the next period, the current
// count becomes the previous one and the previous one is dropped: whatever was acquired more
// than one whole period ago is forgotten, released or not. A release decrements the count of
// the period its acquisition was made in (the stream keeps the cells it wrote, whose cell 0
// names it), if that period is still current or previous; otherwise it was already dropped.
//
// So a request is counted from its admission until its release, or for at least slot_timeout and less
// than 2 × timeout if its release never comes: a slot whose end is never seen is free again
// within 2 × timeout, and a request that lasts longer than slot_timeout may be forgotten while still in
// flight, letting one more request in. docs/design.md gives the argument.
//
// A request takes one slot whatever its cost; a request that costs 0 takes none (as it takes
// nothing from any limit). The fingerprint covers the timeout only: a changed max_in_flight
// keeps the counts, and the releases of the requests in flight still find them.
type concurrency struct {
	max     int64
	timeout int64 // ns, >= 1s
}

func newConcurrency(l config.Limit) concurrency {
	return concurrency{max: l.MaxInFlight, timeout: max(int64(l.SlotTimeout), 1)}
}

// isConcurrency reports whether a limit is a concurrency limit, whose slots a stream's end
// releases.
func (l *limit) isConcurrency() bool { return l.tag == uint8(config.Concurrency) }

// period is the start of the timeout period holding now.
func (c concurrency) period(now int64) int64 { return floorDiv(now, c.timeout) * c.timeout }

// roll brings the cells to the period of now. Cells of a later period (another VM read the
// clock a little later) stay as they are; cells more than a period ahead can only come from a
// clock that stepped back, and are moved to now's period with everything counted as current.
func (c concurrency) roll(s cells, now int64) cells {
	p := c.period(now)
	switch {
	case p == s[0] || p < s[0] && s[0]-p <= c.timeout:
		return s
	case p < s[0]:
		return cells{p, satAdd(max(s[1], 0), max(s[2], 0)), 0}
	case p-c.timeout == s[0]:
		return cells{p, 0, max(s[1], 0)}
	default:
		return cells{p, 0, 0}
	}
}

func (c concurrency) inFlight(s cells) int64 { return max(s[1], 0) + max(s[2], 0) }

func (c concurrency) initial(now int64) cells { return cells{c.period(now), 0, 0} }

// take admits the request if a slot is free and counts it in the current period. A rejection
// waits RetryAfter 1 s: when a slot frees depends on streams ending, which nothing predicts,
// and one second is the shortest wait Retry-After can say.
func (c concurrency) take(s cells, now, _ int64) (cells, limiter.Decision) {
	s = c.roll(s, now)
	n := c.inFlight(s)
	d := limiter.Decision{Allowed: n < c.max}
	if d.Allowed {
		s[1] = max(s[1], 0) + 1
		n++
	} else {
		d.RetryAfter = duration.Second
	}
	d.Remaining = max(c.max-n, 0)
	if n > 0 {
		d.Reset = duration.Second
	}
	return s, d
}

// give releases a request acquired at now (in the current period).
func (c concurrency) give(s cells, now, _ int64) cells {
	s = c.roll(s, now)
	s[1] = max(s[1]-1, 0)
	return s
}

// undo releases the request whose acquisition wrote written: from the count of its period, if
// that is still the current or the previous one.
func (c concurrency) undo(s, written cells, now, _ int64) cells {
	s = c.roll(s, now)
	switch written[0] {
	case s[0]:
		s[1] = max(s[1]-1, 0)
	case s[0] - c.timeout:
		s[2] = max(s[2]-1, 0)
	}
	return s
}

func (c concurrency) valid(s cells) bool {
	return s[0]%c.timeout == 0 && s[1] >= 0 && s[2] >= 0
}

// concurrencyTag starts the fingerprint; the other algorithms' tags are limiter's.
const concurrencyTag = 'C'

// fingerprint is FNV-1a of the tag and the timeout.
func (c concurrency) fingerprint() uint32 {
	h := uint32(2166136261)
	h = (h ^ concurrencyTag) * 16777619
	for v, i := uint64(c.timeout), 0; i < 8; i++ {
		h = (h ^ uint32(v&0xff)) * 16777619
		v >>= 8
	}
	return h
}

// idleAt: the counts of a period are felt until the end of the next one.
func (c concurrency) idleAt(s cells) int64 {
	ends := int64(0)
	switch {
	case s[1] > 0:
		ends = 2
	case s[2] > 0:
		ends = 1
	}
	if s[0] > math.MaxInt64-ends*c.timeout {
		return math.MaxInt64
	}
	return s[0] + ends*c.timeout
}

// convert carries the requests in flight over to a changed slot_timeout: counted as acquired in the new
// period that holds the start of their old one, so they are dropped by the new timeout's rule
// (their releases, made under the old timeout, are not applied any more: they hold their slots
// until then, which errs towards admitting less). A state that is never written again is
// converted anew each time, to the same counts.
func (c concurrency) convert(s cells, now int64) (cells, bool) {
	return c.roll(cells{c.period(s[0]), min(c.inFlight(s), c.max), 0}, now), true
}

// policy: rate-limit headers describe a concurrency limit as max_in_flight per second, the
// Retry-After of its rejections.
func (c concurrency) policy() (int64, int64) { return c.max, 1 }

// InFlight is a slot of a concurrency limit an admitted request holds until its stream ends:
// what Gate.Release needs to give it back.
type InFlight struct {
	charged // at cost 1: a request takes one slot whatever its cost
}

// appendInFlight appends the concurrency slots a group that was charged took.
func appendInFlight(dst []InFlight, group []applied) []InFlight {
	for i := range group {
		a := &group[i]
		if a.skip || a.cost == 0 || !a.limit.isConcurrency() {
			continue
		}
		c := a.charge()
		c.cost = 1
		dst = append(dst, InFlight{c})
	}
	return dst
}

// AppendInFlight appends to dst the slots of concurrency limits the request took (Allow only), of
// enforced and shadow rules alike: the caller keeps them with the stream and gives them to
// Release when it ends. Nothing is appended when no rule has a concurrency limit.
func (o *Outcome) AppendInFlight(dst []InFlight) []InFlight {
	if o.Verdict != Allow {
		return dst
	}
	return append(dst, o.inFlight...)
}

// Release gives back the slots of concurrency limits a request held, at the end of its stream
// (now in monotonic nanoseconds). It is best effort, as every refund: a slot that holds another
// key's state by now is left alone, and if shared data fails the slot stays taken until its
// slot_timeout runs out.
func (g *Gate) Release(store Store, held []InFlight, now int64) {
	group := g.releasing[:0]
	for i := range held {
		group = append(group, held[i].undo())
	}
	g.refund(store, group, now)
	clear(group) // drop the references to the limits
	g.releasing = group[:0]
}

// HasConcurrency reports whether some rule has a concurrency limit: only then do admitted
// requests hold slots until their streams end.
func (p *Policy) HasConcurrency() bool { return p.hasConcurrency }

func ruleHasConcurrency(r *config.Rule) bool { return r.HasConcurrency() }
