package admission

import (
	"math"
	"slices"
	"strings"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// The operator's view of the key table: one key's buckets read as they are (Inspect), and
// written whole again or at a given level (Reset). Both run outside any request's decision, on
// the Gate's own buffers, between two Admits; neither touches the Outcome.

// RuleState is one rule's buckets for one partition key.
type RuleState struct {
	Rule string
	// KeyHash identifies the partition key as debug logs and the top offenders do.
	KeyHash uint64
	// Tier is the tier whose limits last wrote the key's buckets (limits_by); "" for a rule
	// without tiers, or when the key has no bucket.
	Tier   string
	Limits []LimitState
}

// LimitState is one limit's bucket of a key.
type LimitState struct {
	Limit     int
	Algorithm config.Algorithm
	// Bucket is false when the key has no bucket of its own for the limit: it is whole (or,
	// with a full key table, draws from the overflow bucket).
	Bucket bool
	// Capacity is the limit's quota; Remaining the whole units a request would find now.
	Capacity, Remaining int64
	// Tokens is a token bucket's whole tokens now; Debt the tokens it owes, as of its last write,
	// for requests held until they are due (on_limit delay), when Tokens is below zero.
	Tokens, Debt int64
	// Count is a window's units counted in its current window, Previous a sliding window's in
	// the one before.
	Count, Previous int64
	// InFlight is a concurrency limit's slots taken.
	InFlight int64
	// NextRefill is the time until one more unit is available (0 when whole); Whole the time
	// until the limit is whole again.
	NextRefill, Whole duration.Duration
	// Written is set by Reset for a bucket it wrote; Skipped says why it left one alone.
	Written bool
	Skipped string
}

// RuleIndex is the index of the rule named name, or -1.
func (p *Policy) RuleIndex(name string) int {
	for i := range p.rules {
		if p.rules[i].name == name {
			return i
		}
	}
	return -1
}

// RuleCount is the number of rules; RuleName and RuleKeyParts describe the rule at index i.
func (p *Policy) RuleCount() int         { return len(p.rules) }
func (p *Policy) RuleName(i int) string  { return p.rules[i].name }
func (p *Policy) RuleKeyParts(i int) int { return len(p.rules[i].key) }
func (g *Gate) KeyHash(rule int, key []byte) uint64 {
	return g.partitionHash(g.rules[rule].name, key)
}

// LimitedKey is the partition key of the rule that limited the request the last Admit decided
// (Outcome.Rule), without a host call: the owner buffer of the rule's first limit still holds it
// (Gate.owner, gatherFast). Valid until the next Admit.
func (g *Gate) LimitedKey(rule int) []byte {
	r := &g.rules[rule]
	first := r.limits
	if r.tiers != nil {
		first = r.tiers.limits[r.tiers.defaultTier]
	}
	if len(first) == 0 {
		return nil
	}
	buf := g.ownerBufs[first[0].seq]
	return buf[len(first[0].ownerPrefix):]
}

// KeyOf is the partition key a request whose key parts have the values given would get
// under the rule at index rule, in a new buffer: values[i] is part i's value as the request
// carries it (a header's value, a client address, a host). false when the rule's key has
// another number of parts, or a value is not one the part can take (a client address that is not
// an address).
func (g *Gate) KeyOf(rule int, values []string) ([]byte, bool) {
	r := &g.rules[rule]
	if len(values) != len(r.key) {
		return nil, false
	}
	req := &givenKey{parts: r.key, values: values}
	view := requestView{req: req, clientIP: config.ClientIP{IPv4Prefix: g.clientIP.IPv4Prefix, IPv6Prefix: g.clientIP.IPv6Prefix},
		secret: g.secret, maxKeyBytes: g.table.MaxKeyBytes}
	key, missing := view.appendPartitionKey(nil, r.key)
	return key, missing == nil
}

// Inspect reads the buckets of key (a KeyOf) under the rule at index rule, at now
// (monotonic nanoseconds).
func (g *Gate) Inspect(store Store, rule int, key []byte, now int64) (RuleState, error) {
	return g.visit(store, rule, key, now, nil)
}

// Reset writes the buckets of key under the rule whole again, or with level units left
// (clamped to each limit's capacity) when whole is false, each with compare-and-swap: a request
// deciding at the same time either wrote first (and its charge is overwritten) or reads the new
// state. A key without a bucket is whole already and is left alone, as are concurrency limits,
// whose slots the requests in flight give back themselves.
func (g *Gate) Reset(store Store, rule int, key []byte, whole bool, level int64, now int64) (RuleState, error) {
	g.ForgetRejected() // this VM sees the reset at once; the others at their tick
	return g.visit(store, rule, key, now, &resetTo{whole: whole, level: max(level, 0)})
}

// resetTo is what Reset writes.
type resetTo struct {
	whole bool
	level int64
}

// visit reads each limit's bucket of the key, and resets it when set is not nil.
func (g *Gate) visit(store Store, rule int, key []byte, now int64, set *resetTo) (RuleState, error) {
	r := &g.rules[rule]
	state := RuleState{Rule: r.name, KeyHash: g.KeyHash(rule, key)}
	limits := r.limits
	if r.tiers != nil {
		limits = r.tiers.limits[r.tiers.defaultTier]
	}
	g.wallRead = false
	for j := range limits {
		ls, tier, err := g.visitLimit(store, r, &limits[j], key, now, set)
		if err != nil {
			return state, err
		}
		if tier != "" {
			state.Tier = tier
		}
		state.Limits = append(state.Limits, ls)
	}
	return state, nil
}

// visitLimit finds one limit's bucket of the key in its row and describes it,
// resetting it when asked (retrying when another worker wrote it in between).
func (g *Gate) visitLimit(store Store, r *rule, l *limit, key []byte, now int64, set *resetTo) (LimitState, string, error) {
	owner := g.owner(l, key)
	ls := LimitState{Limit: l.index, Algorithm: config.Algorithm(l.tag)}
	ls.Capacity, _ = l.algo.policy()
	ls.Remaining = ls.Capacity
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		b, found, err := g.findBucket(store, owner)
		if err != nil || !found {
			if set != nil && err == nil {
				ls.Skipped = "no bucket: the key is whole"
			}
			return ls, "", err
		}
		writer, tier := r.writerOf(l, &b.slot)
		a := applied{limit: writer}
		if writer.wall || writer.wallPeer {
			if a.at, err = g.wallNow(); err != nil {
				return ls, "", err
			}
		}
		cells := writer.resume(&b.slot, &a, now)
		if set != nil && !writer.isConcurrency() {
			cells = writer.leveled(cells, a.when(now), set)
			idleAt := a.idleOnMonotonic(writer.algo.idleAt(cells), now)
			encodeSlot(b.part, &slot{kind: kindLive, algorithm: writer.tag, fingerprint: writer.fingerprint,
				owner: owner, idleAt: idleAt, cells: cells, stamp: max(now, b.slot.stamp)})
			if err := store.Set(g.keyOf(writer, b.index), b.whole, b.cas); err != nil {
				if isCasMismatch(err) {
					continue
				}
				return ls, "", wrapError("cannot write to shared data", err)
			}
			ls.Written = true
		} else if set != nil {
			ls.Skipped = "a concurrency limit: its slots are given back by the requests in flight"
		}
		describeLimit(&ls, writer, cells, a.when(now))
		return ls, tier, nil
	}
	return ls, "", errContended
}

// foundBucket is a live bucket as findBucket read it: its slot's index and value, the row copied
// into the Gate's buffer (whole) and the bucket's part of it, for a write of that slot with the
// CAS the row was read with.
type foundBucket struct {
	index       uint64
	slot        slot
	whole, part []byte
	cas         uint32
}

// findBucket reads the owner's row and returns its live bucket; found is false when the row has
// none (or is absent, or not a row).
func (g *Gate) findBucket(store Store, owner uint64) (b foundBucket, found bool, err error) {
	row := g.rowOf(owner)
	value, cas, err := store.Get(g.rowKey(row))
	switch {
	case isNotFound(err):
		return foundBucket{}, false, nil
	case err != nil:
		return foundBucket{}, false, wrapError("cannot read shared data", err)
	}
	if !g.isRow(value) {
		return foundBucket{}, false, nil // not a row: no bucket of the key
	}
	i, s, ok := bucketIn(value, owner)
	if !ok {
		return foundBucket{}, false, nil
	}
	b = foundBucket{index: row*uint64(g.rowSlots) + uint64(i), slot: s, cas: cas}
	b.whole, b.part, _ = g.slotIn(b.index, value)
	return b, true, nil
}

// writerOf is the limit (of a tier, for limits_by) whose numbers wrote a bucket at l's position,
// with its tier's name; l itself when none matches (a configuration change: resume converts).
func (r *rule) writerOf(l *limit, s *slot) (*limit, string) {
	if r.tiers == nil {
		return l, ""
	}
	for i, limits := range r.tiers.limits {
		if l.index < len(limits) && limits[l.index].fingerprint == s.fingerprint && limits[l.index].tag == s.algorithm {
			return &limits[l.index], r.tiers.names[i]
		}
	}
	return l, ""
}

// leveled is the state set asks for at now: whole, or level units left, never more than the
// capacity.
func (l *limit) leveled(c cells, now int64, set *resetTo) cells {
	fresh := l.algo.initial(now)
	quota, _ := l.algo.policy()
	level := set.level
	if set.whole || level >= quota {
		return fresh
	}
	if _, ok := l.algo.(*tokenBucket); ok {
		return cells{level, now, 0}
	}
	next, d := l.algo.take(fresh, now, quota-level)
	if !d.Allowed {
		return c
	}
	return next
}

// describeLimit fills in what a limit's state says at now.
func describeLimit(ls *LimitState, l *limit, c cells, now int64) {
	ls.Bucket, ls.Algorithm = true, config.Algorithm(l.tag)
	ls.Capacity, _ = l.algo.policy()
	if tb, ok := l.algo.(*tokenBucket); ok && c[0] < 0 {
		// A bucket in debt (on_limit delay): its next token comes once what it owes is repaid.
		ls.Tokens, ls.Debt, ls.Remaining = c[0], -c[0], 0
		ls.Whole = duration.Duration(max(tb.idleAt(c)-now, 0))
		if _, r := tb.b.Reserve(bucketState(c), now, 1, duration.Duration(math.MaxInt64)); r.OK {
			ls.NextRefill = r.Wait
		}
		return
	}
	switch algo := l.algo.(type) {
	case *tokenBucket:
		// Its whole tokens now are what peek finds, below.
	case concurrency:
		ls.InFlight = algo.inFlight(algo.roll(c, now))
	default:
		// A take of more than the capacity is refused and counts nothing, but brings the window
		// to now: the counts are those of the current window and the one before, not the last
		// write's.
		rolled, _ := l.algo.take(c, now, ls.Capacity+1)
		ls.Count, ls.Previous = rolled[1], rolled[2]
	}
	d := peek(l.algo, c, now)
	ls.Remaining = d.Remaining
	if _, ok := l.algo.(*tokenBucket); ok {
		ls.Tokens = d.Remaining
	}
	if ls.Remaining < ls.Capacity { // peek's Reset is that of one unit taken: 0 when whole
		ls.Whole = d.Reset
		if _, next := l.algo.take(c, now, max(ls.Remaining, 0)+1); !next.Allowed {
			ls.NextRefill = next.RetryAfter
		}
	}
}

// QueryValues are every value of the parameter name in a query string, percent-decoded as a
// query key part's are: the operator endpoint reads its own parameters with it.
func QueryValues(query, name string) []string {
	var values []string
	for query != "" {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		k, v, _ := strings.Cut(pair, "=")
		if unescape(k) == name {
			values = append(values, unescape(v))
		}
	}
	return values
}

// Unescape decodes %XX and '+' as a query string does (malformed escapes are kept).
func Unescape(s string) string { return unescape(s) }

// HostOf strips the port from an Envoy address ("10.0.0.1:5000", "[::1]:5000").
func HostOf(addr string) string { return hostOf(addr) }

// givenKey is a Request whose key parts have the values an operator gave, in order: what
// KeyOf builds a rule's key from, the same way a request's is built.
type givenKey struct {
	parts  []config.KeyPart
	values []string
}

func (k *givenKey) value(match func(p *config.KeyPart) bool) (string, bool) {
	for i := range k.parts {
		if match(&k.parts[i]) {
			return k.values[i], true
		}
	}
	return "", false
}

func (k *givenKey) Header(name string) (string, bool) {
	switch name {
	case ":path":
		return k.path(), true
	case ":method":
		return k.value(func(p *config.KeyPart) bool { return p.Kind == config.KeyMethod })
	case ":authority":
		if v, ok := k.value(func(p *config.KeyPart) bool { return p.Kind == config.KeyAuthority }); ok {
			return v, true
		}
	}
	return k.value(func(p *config.KeyPart) bool { return p.Kind == config.KeyHeader && p.Header == name })
}

// path is a :path with the path part's value (or "/") and a query string with each query
// part's value, percent-encoded (queryParam decodes it again).
func (k *givenKey) path() string {
	path, _ := k.value(func(p *config.KeyPart) bool { return p.Kind == config.KeyPath })
	if path == "" {
		path = "/"
	}
	buf := []byte(path)
	sep := byte('?')
	for i := range k.parts {
		if k.parts[i].Kind != config.KeyQuery {
			continue
		}
		buf = append(append(append(buf, sep), k.parts[i].Query...), '=')
		buf = appendQueryEscaped(buf, k.values[i])
		sep = '&'
	}
	return string(buf)
}

// appendQueryEscaped appends s with every byte but the unreserved ones (RFC 3986) as %XX.
func appendQueryEscaped(dst []byte, s string) []byte {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', hexDigits[c>>4], hexDigits[c&15])
	}
	return dst
}

func (k *givenKey) HeaderValues(string) (string, bool) { return "", false }

func (k *givenKey) SourceAddress() (string, bool) {
	return k.value(func(p *config.KeyPart) bool { return p.Kind == config.KeyClientIP })
}

func (k *givenKey) Property(path []string) (string, bool) {
	return k.value(func(p *config.KeyPart) bool { return p.Kind == config.KeyAttribute && slices.Equal(p.Attribute, path) })
}
