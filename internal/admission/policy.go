package admission

import (
	"strconv"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// Policy is one plugin configuration compiled for deciding: its rules and limits, the key table's
// shape and the names of its shared-data keys. Compile builds it and LoadSecret completes it,
// once per configuration and outside the request path; after that nothing writes it, so any
// number of Gates may decide by it.
type Policy struct {
	rules    []rule
	exempt   config.Exemptions
	clientIP config.ClientIP
	table    config.KeyTable
	// collectStatus fills Outcome.Limits: rate-limit headers are configured.
	collectStatus bool
	escaped       config.EscapedSlashes
	// hasGlobal: some rule has a global limit, so an admitted request's global checks and charge
	// are recorded.
	hasGlobal bool
	// hasConcurrency: some rule has a concurrency limit, whose slots admitted requests hold.
	hasConcurrency bool
	// fast is the policy's one rule when it has the common shape that Admit decides without the
	// general machinery (fastShape), nil otherwise.
	fast *rule
	// fastBucket is the token bucket of the fast rule's one limit when it only rejects
	// (plainBucket): Admit decides it with decideFast. Nil otherwise.
	fastBucket *tokenBucket
	// remembersRejected: the fast rule's plain token bucket gives nothing back (no count or
	// refund), so a VM may remember the buckets it finds too low (rejected.go).
	remembersRejected bool
	// settles: some rule has count or refund (settle.go).
	settles bool
	// delays: some rule holds requests over its limits (delay.go).
	delays bool

	limitCount int // over all rules

	secret    [2]uint64
	secretKey string
	rowPrefix string
	rowSlots  int    // slots per row: those a bucket may take
	rowCount  uint64 // rows in the table (setRowSlots)
}

// rule is one configured rule compiled for deciding: everything a request reads of it, copied
// from the configuration once.
type rule struct {
	index int
	name  string
	// shadow: the rule, or the whole configuration, only tries its limits and never rejects.
	shadow     bool
	match      config.Match
	key        []config.KeyPart
	missingKey config.MissingKey
	cost       config.Cost
	// global: the rule has a global limit; leased: with a lease, whose terms are lease.
	global bool
	leased bool
	lease  config.GlobalLease
	limits []limit
	// settle is what the rule does with its charge at the response (count, refund); nil for
	// the rules that settle at admission.
	settle *settlement
	// tiers chooses the limits by a tier (limits_by); nil for a rule with limits.
	tiers *tierSet
}

type limit struct {
	index       int
	seq         int // the limit's number in the policy, over all rules
	algo        algorithm
	tag         uint8 // the config.Algorithm, stored in the slot
	fingerprint uint32
	// ownerPrefix goes before the partition key in the owner hash: rule name and limit index.
	ownerPrefix string
	// overflowKey holds the bucket shared by the keys that find no free slot; overflowOwner
	// is the owner written in it.
	overflowKey          string
	overflowOwner        uint64
	quota, windowSeconds int64
	// wall: the limit decides on the wall clock (a calendar window, calendar.go).
	wall bool
	// peers are the other tiers' limits at the same position (limits_by), whose states this
	// limit carries over when a key changes tier (switchTier).
	peers []*limit
	// wallPeer: a peer is a calendar window, whose state is read on the wall clock.
	wallPeer bool
	// maxWait is how far ahead the limit reserves (its rule's max_delay; delay.go), 0 if it
	// only rejects.
	maxWait duration.Duration
	// owes: the limit is a token bucket that may be in debt, decided by Reserve (usage.go).
	owes bool
}

// Compile compiles a validated configuration. namespace separates the keys of different
// plugins: Istio gives every WasmPlugin of a proxy one shared-data namespace.
func Compile(cfg *config.Config, namespace string) (*Policy, error) {
	p := &Policy{exempt: cfg.Exempt, clientIP: cfg.ClientIP, table: cfg.KeyTable, escaped: cfg.EscapedSlashes,
		collectStatus: cfg.RateLimitHeaders != config.HeadersOff,
		secretKey:     "tollgate/v2/" + namespace + "/secret", rowPrefix: "tollgate/v2/" + namespace + "/row/"}
	if p.table.MaxKeys < 1 {
		p.table.MaxKeys = config.DefaultMaxKeys
	}
	p.setRowSlots(defaultRowSlots)
	if p.table.MaxKeyBytes < 1 {
		p.table.MaxKeyBytes = config.DefaultMaxKeyBytes
	}
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		compiled, err := p.compileRule(cfg, i, namespace)
		if err != nil {
			return nil, err
		}
		p.rules = append(p.rules, compiled)
		p.settles = p.settles || compiled.settle != nil
		p.delays = p.delays || ruleDelay(cfg, r) > 0
		p.hasGlobal = p.hasGlobal || compiled.global
		p.hasConcurrency = p.hasConcurrency || ruleHasConcurrency(r)
	}
	if fastShape(cfg) {
		p.fast = &p.rules[0]
		if len(p.fast.limits) == 1 {
			p.fastBucket = p.fast.limits[0].plainBucket()
		}
		p.remembersRejected = p.fastBucket != nil && p.fast.settle == nil
	}
	return p, nil
}

// compileRule compiles the rule at index i of cfg, its limits numbered from p.limitCount on.
func (p *Policy) compileRule(cfg *config.Config, i int, namespace string) (rule, error) {
	r := &cfg.Rules[i]
	compiled := rule{index: i, name: r.Name, shadow: cfg.Shadow || r.Shadow, match: r.Match, key: r.Key,
		missingKey: r.MissingKey, cost: r.Cost, global: r.Global != nil, settle: compileSettlement(r)}
	if r.Global != nil && r.Global.Lease != nil {
		compiled.leased, compiled.lease = true, *r.Global.Lease
	}
	if r.LimitsBy != nil {
		if err := p.compileTiers(&compiled, r, namespace); err != nil {
			return rule{}, err
		}
	}
	for j, l := range r.Limits {
		compiledLimit, err := p.compileLimit(r.Name, j, l, p.limitCount, namespace)
		if err != nil {
			return rule{}, wrapError("rules["+strconv.Itoa(i)+"].limits["+strconv.Itoa(j)+"]", err)
		}
		compiled.limits = append(compiled.limits, compiledLimit)
		p.limitCount++
	}
	if maxWait := ruleDelay(cfg, r); maxWait > 0 {
		compiled.delay(maxWait)
	}
	if r.Usage != nil {
		compiled.owe()
	}
	return compiled, nil
}

// compileLimit compiles the limit at index j of a rule (of a tier, for limits_by), numbered seq.
func (p *Policy) compileLimit(ruleName string, j int, l config.Limit, seq int, namespace string) (limit, error) {
	algo, err := newAlgorithm(l)
	if err != nil {
		return limit{}, err
	}
	quota, window := algo.policy()
	prefix := ruleName + "\x00" + strconv.Itoa(j) + "\x00"
	return limit{
		index:         j,
		seq:           seq,
		algo:          algo,
		tag:           uint8(l.Algorithm),
		fingerprint:   algo.fingerprint(),
		ownerPrefix:   prefix,
		overflowKey:   "tollgate/v2/" + namespace + "/overflow/" + strconv.Itoa(j) + "/" + ruleName,
		overflowOwner: sipHash24(0, 0, []byte("overflow\x00"+prefix)),
		quota:         quota,
		windowSeconds: window,
		wall:          l.Calendar != config.NoCalendar,
	}, nil
}

// fastShape reports whether a configuration is the common one: one enforced rule that applies
// to every request, keyed by one header, at a fixed cost, without a global limit, and no
// exemptions, nor escaped slashes to refuse (which needs the path). Admit then reads the key directly; TestFastPathMatchesGeneral holds it to the
// general path's decisions.
func fastShape(cfg *config.Config) bool {
	if len(cfg.Rules) != 1 || cfg.Shadow || cfg.EscapedSlashes == config.EscapedSlashesReject {
		return false
	}
	e, r := &cfg.Exempt, &cfg.Rules[0]
	m := &r.Match
	return len(e.Paths) == 0 && len(e.ClientCIDRs) == 0 && len(e.Headers) == 0 &&
		m.Path == nil && len(m.Methods) == 0 && len(m.Hosts) == 0 && len(m.Headers) == 0 &&
		len(r.Limits) > 0 && len(r.Key) == 1 && r.Key[0].Kind == config.KeyHeader && r.Cost.Header == "" && !r.Shadow &&
		r.Global == nil && r.LimitsBy == nil && r.OnLimit.Action == config.OnLimitReject && !ruleHasConcurrency(r) &&
		r.Usage == nil
}

// lean reports whether the policy has the lean shape, whose common case AdmitLean decides
// (lean.go): the fast rule's plain token bucket, remembered when too low, at a constant cost above
// 0, and no rate-limit headers. (Derived on each use: tests turn the fast path and the headers on
// and off after Compile.)
func (p *Policy) lean() bool {
	return p.fast != nil && p.remembersRejected && !p.collectStatus && p.fast.cost.Units > 0
}

// fastKeyBytes bounds the header values the fast path takes: a longer one goes the general way,
// whatever that does with long keys.
const fastKeyBytes = 256
