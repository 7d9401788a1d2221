package simulate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// monotonicStart is the module's monotonic clock at the first request: far from zero, like a
// host that has been up for a while.
const monotonicStart = int64(3600 * time.Second)

// pluginName is Envoy's config.name and vm_id for the simulated plugin, as in envoy.yaml.
const pluginName = "tollgate"

// Options configure a Simulator.
type Options struct {
	// Wasm is the module (build/tollgate.wasm).
	Wasm []byte
	// Config is the plugin configuration (JSON) and ConfigName how reports name it.
	Config     []byte
	ConfigName string
	// Start is the time of the first request (Unix nanoseconds): the clocks start there.
	Start int64
	// Span is the time from the first request to the last, for the time series' resolution.
	Span time.Duration
	// Keys names partition keys in results (see KeyNamer).
	Keys *KeyNamer
	// Seed seeds the module's randomness (WASI random_get): the key table's secret, and with it
	// which keys share a slot, is then the same on every run with the same seed.
	Seed uint64
	// Cache, when set, is shared by Simulators of the same module to compile it once.
	Cache wazero.CompilationCache
	// Phase moves the monotonic clock's start, and with it where fixed and sliding windows
	// start (they are aligned on that clock, whose zero differs on every Envoy start).
	Phase time.Duration
	// LogFormat is the replayed log's format, for the warnings' advice.
	LogFormat Format
	// RecordVerdicts keeps, per request, whether each rule limited it, for Compare.
	RecordVerdicts bool
	// RecordRequests keeps every key's requests (time and cost), for Suggest.
	RecordRequests bool
}

// Simulator replays requests through the module in the embedded host on a manual clock: one
// worker VM, requests in time order, the clock jumping to each request's time. The decisions are
// the module's (its counters, read after each request); the native admission code only names
// the partition key each rule charged, for the per-key figures.
type Simulator struct {
	opts   Options
	cfg    *config.Config
	host   *host.Host
	vm     *host.VM
	clock  *host.ManualClock
	attrib *admission.Gate
	req    request
	// upstreamFunc is s.upstream, made once; answer is its response, reused.
	upstreamFunc host.Upstream
	answer       host.Response
	usageBody    []byte // the body of a response_bytes usage, reused

	rules    []ruleState
	exempt   counter
	internal counter
	statuses map[int]int64
	requests int64

	series seriesClock
	// limitedBy holds, when Options.RecordVerdicts, one bit per rule per request: whether the
	// rule limited it (rule i in bit i of a uint64, so at most 64 rules, as config allows).
	limitedBy []uint64

	logMu sync.Mutex
	logs  []string
}

// counter is one of the module's counters with its value after the last request.
type counter struct {
	name string
	last int64
}

// delta reads the counter and returns by how much it moved since the last read.
func (c *counter) delta(m *host.Metrics) int64 {
	v, _ := m.Value(c.name)
	d := v - c.last
	c.last = v
	return d
}

type ruleState struct {
	name                                      string
	shadow                                    bool
	admitted, limited, shadowLimited, missing counter
	invalidCost                               counter
	totals                                    RuleTotals
	requests                                  int64
	keys                                      map[string]*keyState
	series                                    []Point
}

type keyState struct {
	KeyTotals
	// second is the calendar second of the key's last request, inSecond and unitsInSecond the
	// requests and units of that second so far.
	second, inSecond, unitsInSecond int64
	// requests are the key's requests, when Options.RecordRequests.
	requests []keyRequest
}

// keyRequest is one request of a key: its time (Unix nanoseconds) and its cost.
type keyRequest struct {
	at, cost int64
}

// New loads the module with the configuration and starts its VM at opts.Start. A configuration
// the module refuses is an error naming the module's own reasons.
func New(ctx context.Context, opts Options) (*Simulator, error) {
	cfg, err := config.Parse(opts.Config)
	if err != nil {
		return nil, err
	}
	policy, err := admission.Compile(cfg, pluginName)
	if err != nil {
		return nil, err
	}
	attrib := admission.NewGate(policy)
	s := &Simulator{opts: opts, cfg: cfg, attrib: attrib, statuses: map[int]int64{}}
	s.upstreamFunc = s.upstream
	s.clock = host.NewManualClock(time.Unix(0, opts.Start), monotonicStart+int64(opts.Phase))
	s.host, err = host.New(ctx, opts.Wasm, host.Options{
		PluginName: pluginName, RootID: pluginName, VMID: pluginName,
		PluginConfig: opts.Config, Clock: s.clock, LogLevel: 2, CompilationCache: opts.Cache,
		Random: seeded(opts.Seed),
		Log: func(e host.LogEntry) {
			if e.Level >= 3 { // warn and up: kept to explain a failure
				s.logMu.Lock()
				if len(s.logs) < 20 {
					s.logs = append(s.logs, e.Message)
				}
				s.logMu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("load the module: %w", err)
	}
	s.vm, err = s.host.NewVM(ctx)
	if err != nil {
		s.host.Close(ctx)
		return nil, fmt.Errorf("start the module: %w%s", err, s.logText())
	}
	s.series = newSeriesClock(opts.Start, opts.Span)
	s.exempt.name, s.internal.name = "tollgate.exempt", "tollgate.internal_errors"
	for _, r := range cfg.Rules {
		prefix := "tollgate.rule." + r.Name + "."
		s.rules = append(s.rules, ruleState{
			name: r.Name, shadow: r.Shadow || cfg.Shadow,
			admitted: counter{name: prefix + "admitted"}, limited: counter{name: prefix + "limited"},
			shadowLimited: counter{name: prefix + "shadow_limited"}, missing: counter{name: prefix + "missing_key"},
			invalidCost: counter{name: prefix + "invalid_cost"},
			keys:        map[string]*keyState{},
		})
	}
	return s, nil
}

func (s *Simulator) logText() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if len(s.logs) == 0 {
		return ""
	}
	return "\nthe module logged:\n  " + strings.Join(s.logs, "\n  ")
}

// Close releases the host.
func (s *Simulator) Close(ctx context.Context) error { return s.host.Close(ctx) }

// HasGlobal reports the rules with a global limit: the simulation calls no rate limit service,
// so their global check fails at once and the rule's global failure_mode decides.
func (s *Simulator) HasGlobal() []string {
	var names []string
	for _, r := range s.cfg.Rules {
		if r.Global != nil {
			names = append(names, r.Name)
		}
	}
	return names
}

// upstream answers an admitted request as the service behind Envoy did: with the status the log
// recorded for it (200 when it recorded none, a 1xx or a 429), which rules with count or refund
// settle by, and the usage it recorded, which rules with usage settle by (usage.go).
func (s *Simulator) upstream([][2]string) (*host.Response, error) {
	status := 200
	if e := s.req.entry; e != nil && e.Status >= 200 && e.Status != 429 {
		// A 429 in the log came from a limiter in front of the upstream, whose answer is
		// unknown: 200.
		status = e.Status
	}
	s.answer = host.Response{Status: status}
	if e := s.req.entry; e != nil && e.HasUsage {
		s.answerUsage(e.Usage)
	}
	return &s.answer, nil
}

// Do replays one request at its time. Requests must come in time order.
func (s *Simulator) Do(e *Entry) error {
	if d := e.Time - s.clock.Wall(); d > 0 {
		s.clock.Advance(time.Duration(d))
	} else if d < 0 {
		return fmt.Errorf("request at %s is before the previous one: requests must be replayed in time order", time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano))
	}
	s.req.set(e)
	resp, err := s.vm.Do(s.req.host, s.upstreamFunc)
	if err != nil {
		return fmt.Errorf("the module failed: %w%s", err, s.logText())
	}
	s.requests++
	if resp.LocalReply {
		s.statuses[resp.Status]++
	} else {
		s.statuses[200]++ // let through, whatever the upstream answered (Result.Statuses)
	}
	// The module hands its counters over on its ticks: one after each request attributes the
	// request's counts to it.
	if err := s.vm.Tick(); err != nil {
		return fmt.Errorf("the module failed: %w%s", err, s.logText())
	}
	m := s.host.Metrics()
	exempt := s.exempt.delta(m) > 0
	s.internal.delta(m)
	var limitedBy uint64
	for i := range s.rules {
		if s.countRule(i, m, e.Time, exempt) {
			limitedBy |= 1 << i
		}
	}
	if s.opts.RecordVerdicts {
		s.limitedBy = append(s.limitedBy, limitedBy)
	}
	return nil
}

// countRule adds the request's counts to rule i (its counters' deltas since the last request)
// and to the key it charged, and reports whether the rule limited it.
func (s *Simulator) countRule(i int, m *host.Metrics, at int64, exempt bool) bool {
	r := &s.rules[i]
	admitted, limited := r.admitted.delta(m), r.limited.delta(m)
	shadowLimited, missing := r.shadowLimited.delta(m), r.missing.delta(m)
	r.totals.Admitted += admitted
	r.totals.Limited += limited
	r.totals.ShadowLimited += shadowLimited
	r.totals.MissingKey += missing
	r.totals.InvalidCost += r.invalidCost.delta(m)
	if admitted+limited+shadowLimited+missing > 0 {
		bucket := s.series.bucket(at)
		for len(r.series) <= bucket {
			r.series = append(r.series, Point{})
		}
		p := &r.series[bucket]
		p.Admitted += admitted
		p.Limited += limited
		p.ShadowLimited += shadowLimited
		p.MissingKey += missing
	}
	key, matched := s.attrib.PartitionKey(&s.req, i)
	if !matched {
		return limited > 0
	}
	if exempt {
		r.totals.Exempt++
		return limited > 0
	}
	r.requests++
	if key != nil {
		cost, _ := s.attrib.Cost(&s.req, i) // a bad cost header charges nothing: 0
		k := r.countKey(key, at/int64(time.Second), cost, admitted, limited, shadowLimited)
		if s.opts.RecordRequests {
			k.requests = append(k.requests, keyRequest{at: at, cost: cost})
		}
	}
	return limited > 0
}

// countKey adds a request of the given second and cost to a key's figures.
func (r *ruleState) countKey(key []byte, second, cost, admitted, limited, shadowLimited int64) *keyState {
	k := r.keys[string(key)]
	if k == nil {
		k = &keyState{second: second}
		r.keys[string(key)] = k
	}
	k.Requests++
	k.Admitted += admitted
	k.Limited += limited
	k.ShadowLimited += shadowLimited
	if second != k.second {
		k.second, k.inSecond, k.unitsInSecond = second, 0, 0
	}
	k.inSecond++
	k.unitsInSecond += cost
	k.PeakPerSecond = max(k.PeakPerSecond, k.inSecond)
	k.PeakUnitsPerSecond = max(k.PeakUnitsPerSecond, k.unitsInSecond)
	return k
}

// request is an Entry as the host's Request and as admission's Request, for PartitionKey.
type request struct {
	host    host.Request
	entry   *Entry
	headers [][2]string
}

func (r *request) set(e *Entry) {
	r.entry = e
	h := append(r.headers[:0], [2]string{":method", e.Method}, [2]string{":path", e.Path}, [2]string{":scheme", "http"})
	if e.Authority != "" {
		h = append(h, [2]string{":authority", e.Authority})
	}
	h = append(h, e.Headers...)
	r.headers = h
	r.host = host.Request{Headers: h, SourceAddress: e.RemoteAddress, DestinationAddress: "127.0.0.1:10000", EndOfStream: true}
}

// Header implements admission.Request.
func (r *request) Header(name string) (string, bool) {
	for _, h := range r.headers {
		if h[0] == name {
			return h[1], true
		}
	}
	return "", false
}

// HeaderValues implements admission.Request: the values joined with ",", as Envoy's
// request.headers attribute does.
func (r *request) HeaderValues(name string) (string, bool) {
	var values []string
	for _, h := range r.headers {
		if h[0] == name {
			values = append(values, h[1])
		}
	}
	return strings.Join(values, ","), values != nil
}

// SourceAddress implements admission.Request.
func (r *request) SourceAddress() (string, bool) {
	return r.entry.RemoteAddress, r.entry.RemoteAddress != ""
}

// Property implements admission.Request: a log carries no other attribute.
func (r *request) Property([]string) (string, bool) { return "", false }

// KeyNamer names partition keys in results: by a keyed hash (HMAC-SHA256 under a secret of the
// run, so that reports can be shared without the keys, which may be API keys), or as they are.
type KeyNamer struct {
	Show   bool
	Secret []byte
}

// Name names a rule's partition key.
func (n *KeyNamer) Name(rule string, key []byte) string {
	if n.Show {
		return admission.DescribeKey(key)
	}
	mac := hmac.New(sha256.New, n.Secret)
	mac.Write([]byte(rule))
	mac.Write([]byte{0})
	mac.Write(key)
	return "key-" + hex.EncodeToString(mac.Sum(nil)[:6])
}

// seriesClock maps request times to the buckets of the time series: one second each, or wider
// for long logs so that a series has at most maxBuckets.
type seriesClock struct {
	start, width int64
}

const maxBuckets = 20_000

func newSeriesClock(start int64, span time.Duration) seriesClock {
	width := int64(time.Second)
	if buckets := int64(span)/width + 1; buckets > maxBuckets {
		width *= (buckets + maxBuckets - 1) / maxBuckets
	}
	return seriesClock{start: start - start%int64(time.Second), width: width}
}

func (c seriesClock) bucket(t int64) int { return int((t - c.start) / c.width) }

// Result is what one configuration did to the log.
func (s *Simulator) Result(top int) *Result {
	res := &Result{
		Config: s.opts.ConfigName, Requests: s.requests, Exempt: s.exempt.last,
		InternalErrors: s.internal.last, Statuses: map[string]int64{}, Rules: map[string]*RuleResult{},
		SeriesStart: time.Unix(0, s.series.start).UTC(), SeriesStep: time.Duration(s.series.width),
	}
	for status, n := range s.statuses {
		res.Statuses[strconv.Itoa(status)] = n
	}
	for i := range s.rules {
		r := &s.rules[i]
		rule := &s.cfg.Rules[i]
		rr := &RuleResult{RuleTotals: r.totals, Shadow: r.shadow, Series: r.series, order: i, Cost: describeCost(rule.Cost)}
		unit := unitWord(rule.Cost)
		rr.unit = unit
		eachLimit(rule, func(tier string, j int, l config.Limit) {
			rr.Limits = append(rr.Limits, describeLimit(l, tier, j, unit))
		})
		rr.TopLimitedKeys, rr.BusiestKeys = topKeys(r.name, r.keys, s.opts.Keys, top)
		rr.Keys, rr.KeysLimited, rr.Requests = len(r.keys), r.keysLimited(), r.requests
		res.Rules[r.name] = rr
	}
	res.Warnings = s.warnings(res)
	return res
}

// keysLimited counts the keys the rule limited or shadow-limited at least once.
func (r *ruleState) keysLimited() int {
	n := 0
	for _, k := range r.keys {
		if k.Limited+k.ShadowLimited > 0 {
			n++
		}
	}
	return n
}

// describeLimit gives a limit's burst and sustained rate.
func describeLimit(l config.Limit, tier string, position int, unit string) LimitInfo {
	info := LimitInfo{Algorithm: l.Algorithm.String(), Capacity: l.Capacity, Tier: tier, position: position,
		Text: describeLimitWords(l, unit), phased: windowOf(l) > 0 && l.Calendar == config.NoCalendar}
	switch {
	case l.RefillInterval > 0:
		info.PerSecond = float64(l.RefillTokens) / l.RefillInterval.Seconds()
	case l.Window > 0:
		info.PerSecond = float64(l.Capacity) / l.Window.Seconds()
	case l.Calendar != config.NoCalendar:
		// A month averages 365.2425/12 days in the Gregorian calendar.
		days := map[config.Calendar]float64{config.CalendarDay: 1, config.CalendarWeek: 7, config.CalendarMonth: 365.2425 / 12}
		info.PerSecond = float64(l.Capacity) / (days[l.Calendar] * 86400)
	}
	return info
}

// seeded is a deterministic source of random bytes.
func seeded(seed uint64) *rand.ChaCha8 {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	copy(key[8:], "tollgate simulate")
	return rand.NewChaCha8(key)
}

// errStop ends a replay early without being reported.
var errStop = errors.New("stop")
