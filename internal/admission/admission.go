package admission

import (
	"errors"
	"strconv"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// Store is Envoy shared data: Get fails with ErrNotFound for an absent key, Set with
// ErrCasMismatch when the key's CAS is no longer cas. The key is only valid during the call (the
// Gate builds it in a reused buffer); a Store that keeps it must copy it. A value Get returns is
// the caller's: it must stay valid until the decision returns, and the Gate may change it (it
// stages its writes in the row it read).
type Store interface {
	Get(key string) (value []byte, cas uint32, err error)
	Set(key string, value []byte, cas uint32) error
}

// The errors a Store reports for the two outcomes the decision handles; any other error is a
// failure of shared data.
var (
	ErrNotFound    = errors.New("no value under the key")
	ErrCasMismatch = errors.New("the key was written since it was read (CAS mismatch)")
)

// causeError is a failure with the error that caused it: its text is msg, ": " and the cause's,
// and errors.Is and errors.As reach the cause (fmt.Errorf's %w would link fmt into the module).
type causeError struct {
	msg   string
	cause error
}

func (e *causeError) Error() string { return e.msg + ": " + e.cause.Error() }
func (e *causeError) Unwrap() error { return e.cause }

// wrapError is not inlined: its callers are the rare failures, which need not each carry a copy.
//
//go:noinline
func wrapError(msg string, cause error) error { return &causeError{msg: msg, cause: cause} }

// Gate decides requests by a Policy, in buffers it reuses from one request to the next so that
// deciding allocates nothing. It holds the scratch of one decision at a time: one Gate per VM
// (VMs are single-threaded).
type Gate struct {
	*Policy // shared, never written by the Gate

	out   Outcome
	paths pathReadings // the readings of the request's path
	held  heldHeader   // the fast path's header read, for the general path to reuse
	// described is the last key part described, description its description (describe).
	described   *config.KeyPart
	description string
	applied     []applied
	buf         [maxRowSlots*SlotSize + markSize]byte // a row or a slot being written
	// rows are the rows the decision being made has read, with what it staged in them (table.go).
	rows    []rowCopy
	preread prereadRow // decideFast's read, for decide (table.go)
	// rejected is the VM's memory of the fast rule's buckets found too low (rejected.go), nil
	// when the policy has no such rule or the Gate runs natively; the Gate remembers in it while
	// it holds it.
	rejected *rejectedBuckets
	hashBuf  []byte
	// ownerBufs hold each limit's owner-hash prefix (by limit.seq), followed by the last key.
	ownerBufs [][]byte
	keyBuf    []byte
	tierBuf   []byte // a tier's value (tierValue)
	rowBuf    []byte
	// rowBufIndex is one more than the row whose key rowBuf holds (rowKey); 0 before the
	// first key (indexes are below MaxKeys, so the sum never wraps).
	rowBufIndex uint64
	starts      []int     // where each shadow rule's limits start in applied
	releasing   []applied // Release's scratch

	// The wall clock, for calendar windows (calendar.go): read at most once per decision.
	wallClock func() (int64, error)
	wallAt    int64
	wallRead  bool

	// Scratch: settleBuf of Settle (settle.go) and SettleUsage (usage.go), settledRules of Settle,
	// oweBuf of SettleUsage.
	settleBuf, oweBuf []applied
	settledRules      []int

	leanOut leanOutcomes // the lean shape's answers (lean.go)

	// reserveBy bounds the reservations of the decisions made inside AdmitBy (slotwait.go).
	reserveBy int64
	bounded   bool
}

// NewGate returns a Gate that decides by p.
func NewGate(p *Policy) *Gate {
	g := &Gate{Policy: p, ownerBufs: make([][]byte, p.limitCount)}
	if p.fast != nil && p.fastBucket != nil {
		g.newLeanOutcomes()
	}
	for i := range p.rules {
		for _, l := range p.rules[i].limits {
			g.ownerBufs[l.seq] = []byte(l.ownerPrefix)
		}
		if t := p.rules[i].tiers; t != nil {
			for _, limits := range t.limits { // every tier's limit j has the same seq and prefix
				for _, l := range limits {
					if g.ownerBufs[l.seq] == nil {
						g.ownerBufs[l.seq] = []byte(l.ownerPrefix)
					}
				}
			}
		}
	}
	return g
}

// applied is one limit about to be charged for this request.
type applied struct {
	rule  *rule
	limit *limit
	owner uint64
	// pkHash identifies the partition key in rate-limit headers (when collecting status).
	pkHash uint64
	// globalKey identifies the partition key to the rate limit service (rules with a global
	// limit only).
	globalKey string
	cost      int64

	// Read in the decision's first phase (table.go):
	place      uint8  // where the bucket is: placeLive, placeFree, ...
	slot       uint64 // index in the key table (row × rowSlots + its place in the row), or overflowSlot
	row        int    // the owner's row among Gate.rows
	cas        uint32 // of the overflow bucket (placeOverflow)
	drew       bool   // the decision's write of the overflow bucket went through
	stamp      int64  // the latest stamp seen: a new bucket starts then
	writeOwner uint64 // the owner the slot is written with (the overflow bucket's, there)
	drawers    uint64 // the overflow bucket's drawers with this key's marks (placeOverflow)
	skip       bool   // no free slot and when_full is allow: not counted
	at         int64  // the wall clock a calendar window decides at (calendar.go)
	next       cells
	decision   limiter.Decision
	due        int64 // when the reserved tokens are due (a delaying limit; delay.go)
}

// Admit decides req at now (monotonic nanoseconds).
//
// Every matching rule applies. The enforced limits (those of rules that are not shadow rules)
// are decided together: the request is admitted only if every one admits it, and then all are
// charged; if one rejects, none is charged, and Retry-After is the time until all would admit.
// Each shadow rule is then decided on its own: if it would reject, the request goes through
// uncharged by it and the rule is reported in ShadowLimited.
//
// The Outcome carries what the caller needs next, for this request alone: the global checks
// still to make (Global) and what was charged (Charge), to give back if the request is rejected
// after all.
func (g *Gate) Admit(req Request, store Store, now int64) *Outcome {
	// A policy of the lean shape decides its common case in one function (lean.go).
	if g.lean() {
		value, found := req.Header(g.fast.key[0].Header)
		return g.AdmitLean(req, value, found, store, now)
	}
	return g.admitGeneral(req, store, now, false)
}

// admitGeneral is Admit for every request AdmitLean leaves. lean: AdmitLean read the key header
// already, and req is g.held, which answers it.
func (g *Gate) admitGeneral(req Request, store Store, now int64, lean bool) *Outcome {
	out := g.resetOutcome()
	// The limits to charge: a policy of the fast shape takes its one key straight from the
	// request (gatherFast), unless the key needs the general way.
	fast := fastGeneral
	if g.fast != nil && !lean {
		fast = g.gatherFast(req)
	}
	switch fast {
	case fastDecided:
		return out // its key is missing, which the rule refuses
	case fastGeneral:
		if g.fast != nil && !lean {
			req = &g.held // the header gatherFast read, not read again
		}
		if !g.gather(req) {
			return out // decided before any limit was read
		}
	}
	enforced := g.applied
	if len(g.starts) > 0 {
		enforced = g.applied[:g.starts[0]]
	}
	var verdict Verdict
	var worst *applied
	var err error
	if fast == fastListed && g.fastBucket != nil && enforced[0].cost > 0 {
		verdict, worst, err = g.decideFast(store, enforced, now)
	} else {
		verdict, worst, err = g.decide(store, enforced, now)
	}
	return g.finish(store, enforced, verdict, worst, err, now)
}

// resetOutcome empties the Outcome for the next decision, keeping its slices' arrays.
func (g *Gate) resetOutcome() *Outcome {
	out := &g.out
	*out = Outcome{Rule: -1, Admitted: out.Admitted[:0], ShadowLimited: out.ShadowLimited[:0],
		MissingKeys: out.MissingKeys[:0], InvalidCost: out.InvalidCost[:0], Limits: out.Limits[:0],
		Global: out.Global[:0], shadowCharged: out.shadowCharged[:0], inFlight: out.inFlight[:0]}
	g.wallRead = false
	return out
}

// finish completes the Outcome of the enforced limits' decision, and decides the shadow rules
// if it admitted the request.
func (g *Gate) finish(store Store, enforced []applied, verdict Verdict, worst *applied, err error, now int64) *Outcome {
	out := &g.out
	switch {
	case err != nil:
		out.Verdict, out.Err = Failed, err
		return out
	case verdict == Limited:
		out.Verdict, out.Rule, out.RetryAfter = Limited, worst.rule.index, worst.decision.RetryAfter
		out.InFlightLimited = worst.limit.isConcurrency()
		if out.InFlightLimited {
			out.InFlightOwner = worst.owner
		}
		if g.collectStatus {
			g.collect(enforced, worst, now)
		}
		return out
	}
	if g.collectStatus {
		g.collect(enforced, nil, now)
	}
	g.admitted(enforced)
	if g.hasConcurrency {
		out.inFlight = appendInFlight(out.inFlight, enforced)
	}
	if g.hasGlobal {
		out.Global = appendGlobalChecks(out.Global, enforced)
	}
	if g.delays {
		requestDelay(out, enforced, now)
	}
	out.enforced, out.decidedAt = enforced, now
	if len(g.starts) > 0 {
		g.decideShadows(store, now)
	}
	out.Verdict = Allow
	return out
}

// gather lists in g.applied the limits of the rules that apply to req, enforced rules' first,
// then each shadow rule's from where g.starts says. It returns false when the request is
// decided before any limit: its path has an escaped slash to refuse, it is exempt, a rule's key
// is missing, or its cost header is bad (g.out says which).
func (g *Gate) gather(req Request) bool {
	view := requestView{req: req, clientIP: g.clientIP, secret: g.secret, maxKeyBytes: g.table.MaxKeyBytes, paths: &g.paths}
	if g.escaped == config.EscapedSlashesReject && view.hasEscapedSlash() {
		g.out.Verdict = EscapedSlash
		return false
	}
	if view.exempt(&g.exempt) {
		g.out.Verdict = Exempt
		return false
	}
	g.applied, g.starts = g.applied[:0], g.starts[:0]
	for pass := 0; pass < 2; pass++ {
		for i := range g.rules {
			r := &g.rules[i]
			if r.shadow != (pass == 1) || !view.matches(&r.match) {
				continue
			}
			if !g.gatherRule(&view, r) {
				return false
			}
		}
	}
	return true
}

// gatherRule appends the limits of a rule that matches the request, with the owner of each;
// a shadow rule's start a group of their own. It returns false when the rule decided the
// request (a missing key it rejects, a bad cost header).
func (g *Gate) gatherRule(view *requestView, r *rule) bool {
	key, verdict := g.ruleKey(view, r, r.shadow)
	if verdict != Allow {
		return false
	}
	if key == nil {
		return true // missing key, and the rule lets such requests through
	}
	cost, ok := ruleCost(view.req, &r.cost)
	switch {
	case !ok && r.shadow:
		// A shadow rule never rejects: the request goes on without it.
		g.out.InvalidCost = append(g.out.InvalidCost, r.index)
		return true
	case !ok:
		g.out.Verdict, g.out.Rule = BadCost, r.index
		return false
	}
	var pkHash uint64
	var global string
	if r.shadow {
		g.starts = append(g.starts, len(g.applied))
	} else {
		if g.collectStatus {
			pkHash = g.partitionHash(r.name, key)
		}
		if r.global {
			global = globalKey(r.name, key)
		}
	}
	limits := r.limits
	if r.tiers != nil {
		limits = g.tierLimits(view, r.tiers)
	}
	for j := range limits {
		l := &limits[j]
		g.applied = append(g.applied, applied{rule: r, limit: l, owner: g.owner(l, key),
			pkHash: pkHash, globalKey: global, cost: cost})
	}
	return true
}

// What gatherFast did with a request.
const (
	fastListed  = iota // its limits are in g.applied
	fastDecided        // its key is missing, and the rule refuses such requests: g.out says so
	fastGeneral        // gather is to list them; g.held answers the header it read
)

// gatherFast lists the limits of a request of the fast shape (Policy.fast) as gather would,
// without its generality: the key is the one header's value, read once, and written where the
// first limit's owner is hashed. A request without the header (or with it empty) is decided
// here when the rule refuses it, as ruleKey would, since nothing but the key could decide it
// first in this shape; otherwise such a request, or one whose key is longer than fastKeyBytes,
// goes the general way.
func (g *Gate) gatherFast(req Request) int {
	r := g.fast
	name := r.key[0].Header
	value, found := req.Header(name)
	if !found || value == "" {
		if mk := &r.missingKey; mk.Action == config.MissingKeyReject {
			g.refuseMissing(r, g.describe(&r.key[0]))
			return fastDecided
		}
	}
	if !found || value == "" || len(value) > fastKeyBytes {
		g.held = heldHeader{Request: req, name: name, value: value, found: found}
		return fastGeneral
	}
	// The partition key, written after the first limit's owner-hash prefix (writeOneKey).
	first := &r.limits[0]
	buf := g.writeOneKey(first, value)
	key := buf[len(first.ownerPrefix):]
	if len(key) > g.table.MaxKeyBytes {
		g.held = heldHeader{Request: req, name: name, value: value, found: found}
		return fastGeneral
	}
	var pkHash uint64
	if g.collectStatus {
		pkHash = g.partitionHash(r.name, key)
	}
	g.applied, g.starts = g.applied[:0], g.starts[:0]
	for j := range r.limits {
		l := &r.limits[j]
		var owner uint64
		if j == 0 {
			owner = sipHash24(g.secret[0], g.secret[1], buf) // Gate.owner, in place
		} else {
			owner = g.owner(l, key)
		}
		g.applied = append(g.applied, applied{rule: r, limit: l, owner: owner, pkHash: pkHash, cost: r.cost.Units})
	}
	return fastListed
}

// decideShadows decides each shadow rule's group of limits on its own, after the enforced ones
// admitted the request: a shadow rule never rejects, not even when the limiter fails.
func (g *Gate) decideShadows(store Store, now int64) {
	out := &g.out
	for s, start := range g.starts {
		end := len(g.applied)
		if s+1 < len(g.starts) {
			end = g.starts[s+1]
		}
		group := g.applied[start:end]
		verdict, _, err := g.decide(store, group, now)
		switch {
		case err != nil:
			out.ShadowErr = err
		case verdict == Limited:
			out.ShadowLimited = append(out.ShadowLimited, group[0].rule.index)
		default:
			// Shadow limits stay out of the rate-limit headers: clients would throttle
			// themselves on a limit that is only being tried.
			g.admitted(group)
			if g.settles {
				out.shadowCharged = append(out.shadowCharged, group)
			}
			if g.hasConcurrency {
				out.inFlight = appendInFlight(out.inFlight, group)
			}
		}
	}
}

// appendDecimal appends n >= 0 in decimal, as strconv.AppendInt would, a byte at a time: the
// few digits of a key's length are cheaper written than copied (a call).
func appendDecimal(dst []byte, n int) []byte {
	u := uint(n)
	div := uint(1)
	for u/div >= 10 {
		div *= 10
	}
	for ; div > 0; div /= 10 {
		dst = append(dst, byte('0'+u/div%10))
	}
	return dst
}

// writeOneKey writes the partition key of one part, its length, ':' and the value
// (appendPartitionKey), straight after l's owner-hash prefix in its buffer (Gate.owner), so that
// l's owner is hashed where the key was built, with no copy. It returns the buffer.
func (g *Gate) writeOneKey(l *limit, value string) []byte {
	buf := appendDecimal(g.ownerBufs[l.seq][:len(l.ownerPrefix)], len(value))
	buf = append(buf, ':')
	buf = append(buf, value...)
	g.ownerBufs[l.seq] = buf
	return buf
}

// describe is describePart of a key part of the policy, the description of the last one kept:
// under a flood of requests without their key, the same part is missing every time, and its
// description is built once.
func (g *Gate) describe(part *config.KeyPart) string {
	if part != g.described {
		g.described, g.description = part, describePart(*part)
	}
	return g.description
}

// heldHeader is a Request whose one header was already read.
type heldHeader struct {
	Request
	name, value string
	found       bool
}

func (h *heldHeader) Header(name string) (string, bool) {
	if name == h.name {
		return h.value, h.found
	}
	return h.Request.Header(name)
}

// ruleKey builds a rule's partition key, following its missing_key policy, in a buffer of the
// Gate's (valid until the next call). A nil key with verdict Allow means the rule does not
// apply; another verdict has been set in g.out.
func (g *Gate) ruleKey(view *requestView, r *rule, shadow bool) ([]byte, Verdict) {
	key, missing := view.appendPartitionKey(g.keyBuf[:0], r.key)
	g.keyBuf = key
	if missing == nil {
		return key, Allow
	}
	mk := &r.missingKey
	switch {
	case shadow || mk.Action == config.MissingKeyAllow:
		// A shadow rule never rejects: counted, and the request goes on without it.
		g.out.MissingKeys = append(g.out.MissingKeys, r.index)
		return nil, Allow
	case mk.Action == config.MissingKeyFallback:
		// The fallback key space is separate: a user id and an address never share a bucket.
		fallback, fallbackMissing := view.appendPartitionKey(append(g.keyBuf[:0], "fallback:"...), mk.Fallback)
		g.keyBuf = fallback
		if fallbackMissing == nil {
			g.out.MissingKeys = append(g.out.MissingKeys, r.index)
			return fallback, Allow
		}
		missing = fallbackMissing
	}
	g.refuseMissing(r, g.describe(missing))
	return nil, MissingKey
}

// refuseMissing decides the request by rule r, whose missing_key policy refuses a request
// without its key; missing describes what it lacks.
func (g *Gate) refuseMissing(r *rule, missing string) {
	g.out.Verdict, g.out.Rule, g.out.Status, g.out.MissingPart = MissingKey, r.index, r.missingKey.Status, missing
}

// ruleCost is the number of units the request takes from each of the rule's limits.
func ruleCost(req Request, c *config.Cost) (int64, bool) {
	if c.Header == "" {
		return c.Units, true
	}
	v, found := req.Header(c.Header)
	if !found {
		return c.Units, true
	}
	if len(v) > 1 && v[0] == '-' && isDigits(v[1:]) {
		// A negative whole number is below 1, like 0: it costs 1.
		return 1, true
	}
	n, err := strconv.ParseUint(v, 10, 63)
	if err != nil {
		// A number too large to parse is still a number: clamp it like any value above max.
		if errors.Is(err, strconv.ErrRange) && isDigits(v) {
			return c.Max, true
		}
		return 0, false
	}
	// The client chooses this number: at least 1, or it could make every request free.
	return min(max(int64(n), 1), c.Max), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func (g *Gate) admitted(group []applied) {
	for i := range group {
		if i == 0 || group[i].rule != group[i-1].rule {
			g.out.Admitted = append(g.out.Admitted, group[i].rule.index)
		}
	}
}

// partitionHash identifies a partition key in headers and logs without revealing it: keyed with
// the table's secret, so that a short key space (addresses, sequential ids) cannot be searched
// for the value.
func (g *Gate) partitionHash(rule string, key []byte) uint64 {
	buf := append(g.hashBuf[:0], "pk\x00"...)
	buf = append(buf, rule...)
	buf = append(buf, 0)
	buf = append(buf, key...)
	g.hashBuf = buf
	return sipHash24(g.secret[0], g.secret[1], buf)
}
