package plugin

import (
	"strconv"
	"strings"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/usage"
)

// Rules with usage are charged what the response reports it used. Admission charges the reserve
// and the charge is held with the stream (httpContext.pending) like a count rule's; the response
// is then read as it passes, without holding any of it back: its headers (a usage header), each
// body chunk (an OpenAI or Anthropic body, JSON or server-sent events, scanned in a fixed amount
// of memory; or its size) and its trailers. When the response ends, the charge is settled to the
// amount (admission.Gate.SettleUsage). What cannot be read is charged the rule's unknown:
//
//   - a body whose usage is missing, malformed or truncated, or compressed (the request's
//     accept-encoding is removed for these rules, so an upstream that compresses anyway is one
//     that ignores it);
//   - a stream that ends before the response does (the client went away, the upstream reset
//     it): the tokens may have been spent all the same. A response_bytes rule is charged the
//     bytes seen, or unknown if that is more.
//
// A response with an error status (400 and above) whose usage cannot be read keeps the reserve:
// nothing was generated for it, and the reserve is still charged, so an error is never free.
// The amount of the first rule is also written for the access log as filter state
// wasm.tollgate_usage, which `tollgate simulate` replays.

// usageRule is a rule's usage, compiled.
type usageRule struct {
	source           config.UsageSource
	count            usage.Count
	header           string
	reserve, unknown int64
	// charged counts the units settled (tollgate.rule.<rule>.usage); unreadable the responses
	// charged unknown (usage_unread).
	charged, unreadable counter
	_                   [0]func() // never compared (see rule)
}

func compileUsage(u *config.Usage, prefix string, define defineFunc) (*usageRule, bool) {
	if u == nil {
		return nil, true
	}
	c := &usageRule{source: u.Source, count: usageCount(u.Count), header: u.Header, reserve: u.Reserve, unknown: u.Unknown}
	return c, define(prefix+"usage", &c.charged) && define(prefix+"usage_unread", &c.unreadable)
}

// usageCount is the scanner's name for a configured count.
func usageCount(c config.UsageCount) usage.Count {
	switch c {
	case config.UsageInput:
		return usage.Input
	case config.UsageOutput:
		return usage.Output
	}
	return usage.Total
}

// usageMeter reads one response's usage, for the rules with usage whose charge its stream holds.
// A context keeps its meter from one stream to the next: its scanners are reused.
type usageMeter struct {
	reads    []usageRead
	scanners []meterScanner
	amounts  []int64 // by rule index, for SettleUsage
	rules    []int
	// globals are the global checks of the rules with usage that the request passed
	// (usageglobal.go).
	globals []admission.GlobalCheck
	status  int
	bytes   int64
	// plain: the body is neither compressed nor unreadable; events: it is a text/event-stream.
	plain, events bool
}

// usageRead is one rule's reading: the scanner it reads the body with (-1: none), and the
// amount a header or trailer gave.
type usageRead struct {
	rule    int
	scanner int
	amount  int64
	found   bool
}

type meterScanner struct {
	source config.UsageSource
	count  usage.Count
	usage.Scanner
}

// usageMeter returns the context's meter, made on first use.
func (h *httpContext) usageMeter() *usageMeter {
	if h.meter == nil {
		h.meter = &usageMeter{}
	}
	return h.meter
}

// holdUsage keeps the global checks of an admitted request's rules with usage, and removes its
// accept-encoding when a rule with usage that reads the body charged it: the upstream then
// answers uncompressed, which the body can be read from.
func (h *httpContext) holdUsage(out *admission.Outcome) {
	p := h.plugin
	if !p.hasUsage {
		return
	}
	if p.hasGlobal {
		h.holdGlobalUsage(out.Global)
	}
	if !p.usageReadsBody {
		return
	}
	p.usageScratch = h.pending.AppendUsageRules(p.usageScratch[:0])
	for _, i := range p.usageScratch {
		if p.rules[i].usage.source.ReadsBody() {
			if err := abi.RemoveHttpRequestHeader("accept-encoding"); err != nil {
				p.failed("cannot remove accept-encoding: " + err.Error())
			}
			return
		}
	}
}

// startMetering starts reading the response's usage for the rules with usage the stream holds a
// charge of, at its headers; endOfStream: the response has no body; gone: the stream ended
// without response headers, and its usage is unknown.
func (h *httpContext) startMetering(status int, endOfStream, gone bool) {
	p, m := h.plugin, h.usageMeter()
	m.rules = h.pending.AppendUsageRules(m.rules[:0])
	if len(m.rules) == 0 {
		return
	}
	m.reads, m.status, m.bytes, m.plain, m.events = m.reads[:0], status, 0, true, false
	shaped := false
	for _, i := range m.rules {
		u := p.rules[i].usage
		r := usageRead{rule: i, scanner: -1}
		switch {
		case gone:
		case u.source == config.UsageHeader:
			r.amount, r.found = h.readUsageHeader(abi.MapResponseHeaders, u.header)
		case u.source.ReadsBody():
			if !shaped {
				m.plain, m.events = h.bodyShape()
				shaped = true
			}
			r.scanner = m.scanner(u.source, usage.Count(u.count), m.events)
		}
		m.reads = append(m.reads, r)
	}
	h.metering = true
	if endOfStream || gone {
		h.finishMetering(!gone)
	}
}

// meterUnanswered settles the charge of the rules with usage for a request that was forwarded
// and got no response: its usage is unknown, count and refund rules keep their charge.
func (h *httpContext) meterUnanswered() {
	h.startMetering(0, false, true)
	h.pending.Clear()
}

// bodyShape reads whether the response body can be read (not compressed) and whether it is a
// stream of server-sent events.
func (h *httpContext) bodyShape() (plain, events bool) {
	encoding, err := abi.GetHttpResponseHeader("content-encoding")
	plain = err == types.ErrorStatusNotFound || err == nil && (encoding == "" || strings.EqualFold(encoding, "identity"))
	contentType, _ := abi.GetHttpResponseHeader("content-type")
	const eventStream = "text/event-stream"
	return plain, len(contentType) >= len(eventStream) && strings.EqualFold(contentType[:len(eventStream)], eventStream)
}

// scanner returns the index of a scanner reset for source and count, adding it if needed.
func (m *usageMeter) scanner(source config.UsageSource, count usage.Count, events bool) int {
	src := usage.OpenAI
	if source == config.UsageAnthropic {
		src = usage.Anthropic
	}
	for i := range m.scanners {
		if s := &m.scanners[i]; s.source == 0 {
			s.source, s.count = source, count
			s.Reset(src, count, events)
			return i
		} else if s.source == source && s.count == count {
			return i
		}
	}
	m.scanners = append(m.scanners, meterScanner{source: source, count: count})
	s := &m.scanners[len(m.scanners)-1]
	s.Reset(src, count, events)
	return len(m.scanners) - 1
}

// readUsageHeader reads a whole number from a response header or trailer.
func (h *httpContext) readUsageHeader(m abi.MapType, name string) (int64, bool) {
	var value string
	var err error
	if m == abi.MapResponseTrailers {
		value, err = abi.GetHttpResponseTrailer(name)
	} else {
		value, err = abi.GetHttpResponseHeader(name)
	}
	if err != nil || value == "" {
		return 0, false
	}
	return usage.WholeNumber(value)
}

// OnHttpResponseBody reads a chunk of the response's body for its usage, and lets it pass at once.
func (h *httpContext) OnHttpResponseBody(bodySize int, endOfStream bool) types.Action {
	if !h.metering {
		return types.ActionContinue
	}
	m := h.meter
	m.bytes += int64(bodySize)
	if m.plain && len(m.scanners) > 0 && bodySize > 0 {
		err := abi.ReadHttpResponseBody(bodySize, func(window []byte) {
			for i := range m.scanners {
				if s := &m.scanners[i]; s.source != 0 {
					s.Write(window)
				}
			}
		})
		if err != nil {
			h.plugin.failed("cannot read the response body for its usage: " + err.Error())
			m.plain = false // what was not read cannot be counted: unknown
		}
	}
	if endOfStream {
		h.finishMetering(true)
	}
	return types.ActionContinue
}

// OnHttpResponseTrailers reads a usage trailer; the response ends with its trailers.
func (h *httpContext) OnHttpResponseTrailers(numTrailers int) types.Action {
	if !h.metering {
		return types.ActionContinue
	}
	m := h.meter
	for i := range m.reads {
		r := &m.reads[i]
		if u := h.plugin.rules[r.rule].usage; u.source == config.UsageHeader && !r.found {
			r.amount, r.found = h.readUsageHeader(abi.MapResponseTrailers, u.header)
		}
	}
	h.finishMetering(true)
	return types.ActionContinue
}

// finishMetering settles the charge the stream holds for its rules with usage; complete is false
// for a stream that ended before its response did.
func (h *httpContext) finishMetering(complete bool) {
	p, m := h.plugin, h.meter
	h.metering = false
	if len(m.amounts) < len(p.rules) {
		m.amounts = make([]int64, len(p.rules))
	}
	for i := range m.reads {
		r := &m.reads[i]
		u := p.rules[r.rule].usage
		amount, ok := m.amount(r, u, complete)
		switch {
		case ok:
		case m.status >= 400:
			amount = u.reserve // nothing generated, nothing read: the reserve stands
		default:
			amount = max(amount, u.unknown)
			u.unreadable.add(1)
		}
		m.amounts[r.rule] = amount
		u.charged.add(uint64(amount))
	}
	now, err := abi.MonotonicNanos()
	if err != nil {
		p.failed("cannot read the monotonic clock: " + err.Error())
		h.pending.Clear() // the reserve stands: that errs towards admitting less
		return
	}
	p.gate.SettleUsage(sharedData, &h.pending, m.amounts, now)
	if len(m.globals) > 0 {
		h.settleGlobalUsage(now)
	}
	if len(m.reads) > 0 {
		// For the access log; a host without filter state (outside Envoy) refuses it.
		_ = abi.SetProperty(usageProperty, strconv.AppendInt(nil, m.amounts[m.reads[0].rule], 10))
	}
	for i := range m.scanners {
		m.scanners[i].source = 0
	}
}

// usageProperty is the filter state the settled usage is written to, wasm.tollgate_usage in
// Envoy's access log (%FILTER_STATE(wasm.tollgate_usage:PLAIN)%).
const usageProperty = "tollgate_usage"

// amount is what the response reported for one rule; ok is false when it cannot be read, and
// amount is then what was seen of it (the bytes of a response_bytes rule).
func (m *usageMeter) amount(r *usageRead, u *usageRule, complete bool) (amount int64, ok bool) {
	switch {
	case u.source == config.UsageResponseBytes:
		return m.bytes, complete
	case u.source == config.UsageHeader:
		return r.amount, r.found
	case !complete || !m.plain || r.scanner < 0:
		return 0, false
	}
	return m.scanners[r.scanner].Tokens()
}
