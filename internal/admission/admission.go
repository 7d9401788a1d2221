package admission

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// MaxAttempts bounds the read-decide-write loop on one key. Each retry means another worker VM
// updated the key in between, so the bound is only reached under extreme contention; then the
// configured failure mode applies.
const MaxAttempts = 16

// casCreate is the CAS passed when writing a key that did not exist. Envoy stores a value for an
// absent key whatever the CAS argument, but cas 0 would overwrite unconditionally if another
// worker created the key in between; any non-zero CAS makes that case a CasMismatch instead. The
// one collision left is a concurrently created key whose CAS is exactly this value.
const casCreate = math.MaxUint32

// Request gives the parts of a request that partition keys are made of.
type Request interface {
	// Header returns the first value of a request header (name lower-case).
	Header(name string) (value string, found bool)
	// SourceAddress returns the downstream address as Envoy reports it ("10.0.0.1:5000",
	// "[::1]:5000").
	SourceAddress() (address string, found bool)
}

// Store is Envoy shared data: Get fails with types.ErrorStatusNotFound for an absent key, Set
// with types.ErrorStatusCasMismatch when the key's CAS is no longer cas.
type Store interface {
	Get(key string) (value []byte, cas uint32, err error)
	Set(key string, value []byte, cas uint32) error
}

// Verdict is what the filter must do with the request.
type Verdict uint8

const (
	// Allow: every limit of every rule admitted the request and was charged.
	Allow Verdict = iota
	// Limited: a limit rejected the request; nothing was charged.
	Limited
	// MissingKey: a rule's key could not be built from the request.
	MissingKey
	// Failed: shared data failed or stayed contended; the failure mode decides.
	Failed
)

// Outcome is the decision for one request.
type Outcome struct {
	Verdict Verdict
	// Rule names the rule that limited the request or whose key was missing.
	Rule string
	// MissingPart describes the key part that was missing, for the response body.
	MissingPart string
	// Remaining is the fewest whole tokens left over the charged limits (Allow), 0 otherwise.
	Remaining int64
	// RetryAfter is the exact wait before the request would be admitted (Limited).
	RetryAfter time.Duration
	// Err is why shared data failed (Failed).
	Err error
}

// RetryAfterSeconds is the Retry-After header value: whole seconds, rounded up, at least 1.
func (o Outcome) RetryAfterSeconds() int64 {
	s := int64(o.RetryAfter / time.Second)
	if o.RetryAfter%time.Second != 0 {
		s++
	}
	return max(s, 1)
}

// Gate holds the compiled rules of one plugin configuration.
type Gate struct {
	rules []rule
}

type rule struct {
	name   string
	key    []config.KeyPart
	limits []limit
}

type limit struct {
	bucket      limiter.Bucket
	fingerprint uint32
	// keyPrefix namespaces the limit's shared-data keys: namespace, rule name and limit index.
	keyPrefix string
}

// New compiles a validated configuration. namespace separates the keys of different plugins:
// Istio gives every WasmPlugin of a proxy one shared-data namespace.
func New(cfg *config.Config, namespace string) (*Gate, error) {
	g := &Gate{}
	for _, r := range cfg.Rules {
		compiled := rule{name: r.Name, key: r.Key}
		for i, l := range r.Limits {
			b, err := limiter.NewBucket(limiter.Limit{Capacity: l.Capacity, RefillTokens: l.RefillTokens, RefillInterval: l.RefillInterval})
			if err != nil {
				return nil, errors.New("rule " + r.Name + " limit " + strconv.Itoa(i) + ": " + err.Error())
			}
			compiled.limits = append(compiled.limits, limit{
				bucket:      b,
				fingerprint: b.Fingerprint(),
				keyPrefix:   "tollgate/v1/" + namespace + "/" + r.Name + "/" + strconv.Itoa(i) + "/",
			})
		}
		g.rules = append(g.rules, compiled)
	}
	return g, nil
}

// charge is one limit charged for this request, kept to refund it if a later limit rejects.
type charge struct {
	limit *limit
	key   string
}

// Admit decides req at now (monotonic nanoseconds). Every rule applies; a request is admitted
// only if every limit admits it, and then all are charged. When one rejects, the limits charged
// before it are refunded, so a rejected request costs nothing.
func (g *Gate) Admit(req Request, store Store, now int64) Outcome {
	keys := make([]string, len(g.rules))
	for i := range g.rules {
		key, missing := partitionKey(req, g.rules[i].key)
		if missing != "" {
			return Outcome{Verdict: MissingKey, Rule: g.rules[i].name, MissingPart: missing}
		}
		keys[i] = key
	}

	out := Outcome{Verdict: Allow, Remaining: math.MaxInt64}
	var charged []charge
	for i := range g.rules {
		r := &g.rules[i]
		for j := range r.limits {
			l := &r.limits[j]
			key := l.keyPrefix + keys[i]
			d, err := take(store, l, key, now)
			if err != nil {
				refund(store, charged, now)
				return Outcome{Verdict: Failed, Rule: r.name, Err: err}
			}
			if !d.Allowed {
				refund(store, charged, now)
				return Outcome{Verdict: Limited, Rule: r.name, RetryAfter: d.RetryAfter}
			}
			charged = append(charged, charge{limit: l, key: key})
			out.Remaining = min(out.Remaining, d.Remaining)
		}
	}
	return out
}

// take runs the CAS loop for one limit and one key.
func take(store Store, l *limit, key string, now int64) (limiter.Decision, error) {
	var buf [StateSize]byte
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		state, cas, err := load(store, l, key, now)
		if err != nil {
			return limiter.Decision{}, err
		}
		next, d := l.bucket.Take(state, now, 1)
		if !d.Allowed {
			// Nothing was taken; the refill is recomputed on the next read, so no write.
			return d, nil
		}
		EncodeState(buf[:], l.fingerprint, next)
		err = store.Set(key, buf[:], cas)
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, types.ErrorStatusCasMismatch) {
			return limiter.Decision{}, errors.New("set shared data " + key + ": " + err.Error())
		}
	}
	return limiter.Decision{}, errors.New("shared data key " + key + " stayed contended for " + strconv.Itoa(MaxAttempts) + " attempts")
}

// refund gives back one token to each limit charged so far. It is best effort: if it fails, the
// request stays rejected and the charge stands, which errs towards admitting less, never more.
func refund(store Store, charged []charge, now int64) {
	var buf [StateSize]byte
	for _, c := range charged {
		for attempt := 0; attempt < MaxAttempts; attempt++ {
			state, cas, err := load(store, c.limit, c.key, now)
			if err != nil {
				break
			}
			EncodeState(buf[:], c.limit.fingerprint, c.limit.bucket.Give(state, now, 1))
			if err := store.Set(c.key, buf[:], cas); err == nil || !errors.Is(err, types.ErrorStatusCasMismatch) {
				break
			}
		}
	}
}

// load reads a key's state; an absent or foreign value is a full bucket.
func load(store Store, l *limit, key string, now int64) (limiter.State, uint32, error) {
	value, cas, err := store.Get(key)
	if errors.Is(err, types.ErrorStatusNotFound) {
		return l.bucket.Full(now), casCreate, nil
	}
	if err != nil {
		return limiter.State{}, 0, errors.New("get shared data " + key + ": " + err.Error())
	}
	state, ok := DecodeState(value, l.fingerprint)
	if !ok || !l.bucket.Valid(state) {
		state = l.bucket.Full(now)
	}
	return state, cas, nil
}

// partitionKey joins the key parts into one string. Each part is length-prefixed so that no two
// different part lists produce the same key ("a|b"+"c" never equals "a"+"b|c"). missing describes
// the first part the request lacks.
func partitionKey(req Request, parts []config.KeyPart) (key string, missing string) {
	for _, p := range parts {
		var value string
		switch p.Kind {
		case config.KeyHeader:
			v, found := req.Header(p.Header)
			if !found || v == "" {
				return "", "header " + p.Header
			}
			value = v
		case config.KeyClientIP:
			addr, found := req.SourceAddress()
			ip := hostOf(addr)
			if !found || ip == "" {
				return "", "client address"
			}
			value = ip
		default:
			return "", "unsupported key part"
		}
		key += strconv.Itoa(len(value)) + ":" + value
	}
	return key, ""
}

// hostOf strips the port from an Envoy address: "10.0.0.1:5000" → "10.0.0.1",
// "[::1]:5000" → "::1"; an address without a port is returned as is.
func hostOf(addr string) string {
	if len(addr) > 0 && addr[0] == '[' {
		for i := 1; i < len(addr); i++ {
			if addr[i] == ']' {
				return addr[1:i]
			}
		}
		return ""
	}
	colon := -1
	for i := 0; i < len(addr); i++ {
		if addr[i] == ':' {
			if colon >= 0 {
				return addr // several colons and no brackets: a bare IPv6 address
			}
			colon = i
		}
	}
	if colon >= 0 {
		return addr[:colon]
	}
	return addr
}
