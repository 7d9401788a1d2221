package plugin

import (
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// The operations of the operator endpoint, under its prefix:
//
//	GET  top                               each rule's top offenders
//	GET  keys?key=K[&key=K2…][&rule=R]     one key's buckets in every rule (or rule R)
//	GET  keys/K                            the same for a one-part key
//	POST reset?key=K[&rule=R][&level=N]    the key's buckets whole again, or with N units left
//
// A key of several parts is given once per part, in the order of the rule's key; a rule whose
// key has another number of parts is listed as skipped. Anything else under the prefix is 404.

// operate answers an authorized request for the operation rest (the path after the prefix,
// without the query string).
func (h *httpContext) operate(method, rest, query, peer string, now int64) {
	op := h.plugin.operator
	switch {
	case rest == "top" && method == "GET":
		op.answered.add(1)
		h.operatorReply(200, nil, op.top.view(now))
	case rest == "keys" && method == "GET":
		h.visitKeys(admission.QueryValues(query, "key"), query, peer, now, false)
	case strings.HasPrefix(rest, "keys/") && len(rest) > len("keys/") && method == "GET":
		// A path segment: '+' is itself there, not a space as in a query string.
		segment := strings.ReplaceAll(rest[len("keys/"):], "+", "%2B")
		h.visitKeys([]string{admission.Unescape(segment)}, query, peer, now, false)
	case rest == "reset" && method == "POST":
		h.visitKeys(admission.QueryValues(query, "key"), query, peer, now, true)
	default:
		op.notFound.add(1)
		h.operatorReply(404, nil, errorBody("no operation "+method+" "+op.prefix+rest+
			": the operations are GET top, GET keys?key=K, GET keys/K and POST reset?key=K"))
	}
}

// visitKeys inspects, or resets, the key given in every rule it fits (or the rule named).
func (h *httpContext) visitKeys(values []string, query, peer string, now int64, reset bool) {
	p, op := h.plugin, h.plugin.operator
	if len(values) == 0 {
		h.operatorReply(400, nil, errorBody("give the key as ?key=K (once per part of a key of several parts)"))
		return
	}
	rules, ok := h.operatorRules(query)
	if !ok {
		return
	}
	whole, level := true, int64(0)
	if levels := admission.QueryValues(query, "level"); reset && len(levels) > 0 {
		n, err := strconv.ParseInt(levels[0], 10, 64)
		if err != nil || n < 0 || len(levels) > 1 {
			h.operatorReply(400, nil, errorBody("level is the units to leave the key, one whole number of 0 or more"))
			return
		}
		whole, level = false, n
	}
	var j jsonOut
	j.open('{')
	j.key("rules")
	j.open('[')
	var skipped []int
	for _, i := range rules {
		key, fits := p.gate.KeyOf(i, values)
		if !fits {
			skipped = append(skipped, i)
			continue
		}
		var state admission.RuleState
		var err error
		if reset {
			state, err = p.gate.Reset(sharedData, i, key, whole, level, now)
		} else {
			state, err = p.gate.Inspect(sharedData, i, key, now)
		}
		if err != nil {
			p.failed("operator endpoint: " + err.Error())
			h.operatorReply(503, nil, errorBody("shared data failed: "+err.Error()))
			return
		}
		if reset {
			op.logReset(&state, whole, level, peer)
		}
		writeRuleState(&j, &state)
	}
	j.close(']')
	p.writeSkipped(&j, skipped, len(values))
	j.close('}')
	op.answered.add(1)
	h.operatorReply(200, nil, append(j.b, '\n'))
}

// operatorRules are the rules a key operation visits: the one ?rule= names, or all; false when
// the name is unknown (answered 404).
func (h *httpContext) operatorRules(query string) ([]int, bool) {
	p := h.plugin
	if names := admission.QueryValues(query, "rule"); len(names) > 0 {
		i := p.gate.RuleIndex(names[0])
		if i < 0 || len(names) > 1 {
			p.operator.notFound.add(1)
			h.operatorReply(404, nil, errorBody("no rule named "+strconv.Quote(names[0])))
			return nil, false
		}
		return []int{i}, true
	}
	all := make([]int, p.gate.RuleCount())
	for i := range all {
		all[i] = i
	}
	return all, true
}

// logReset logs a reset at info, naming the key by its hash, and counts each bucket written.
func (op *operatorEndpoint) logReset(state *admission.RuleState, whole bool, level int64, peer string) {
	written := 0
	for _, l := range state.Limits {
		if l.Written {
			written++
		}
	}
	to := "whole"
	if !whole {
		to = "level " + strconv.FormatInt(level, 10)
	}
	op.resets.add(uint64(written))
	abi.Log(abi.LogLevelInfo, "tollgate: operator reset rule "+state.Rule+" key#"+strconv.FormatUint(state.KeyHash, 16)+" to "+to+
		": "+strconv.Itoa(written)+" bucket(s) written, asked by "+peer)
}

// writeSkipped lists the rules whose key does not take the values given.
func (p *pluginContext) writeSkipped(j *jsonOut, skipped []int, given int) {
	j.key("skipped")
	j.open('[')
	for _, i := range skipped {
		j.open('{')
		j.key("rule")
		j.str(p.gate.RuleName(i))
		j.key("reason")
		parts := p.gate.RuleKeyParts(i)
		if parts != given {
			j.str("its key has " + strconv.Itoa(parts) + " part(s) and " + strconv.Itoa(given) + " value(s) were given")
		} else {
			j.str("a value given is not one the rule's key part takes (a client_ip part takes an IP address)")
		}
		j.close('}')
	}
	j.close(']')
}

// writeRuleState writes one rule's buckets of the key.
func writeRuleState(j *jsonOut, s *admission.RuleState) {
	j.open('{')
	j.key("rule")
	j.str(s.Rule)
	j.key("key_hash")
	j.str(strconv.FormatUint(s.KeyHash, 16))
	if s.Tier != "" {
		j.key("tier")
		j.str(s.Tier)
	}
	j.key("limits")
	j.open('[')
	for i := range s.Limits {
		writeLimitState(j, &s.Limits[i])
	}
	j.close(']')
	j.close('}')
}

func writeLimitState(j *jsonOut, l *admission.LimitState) {
	j.open('{')
	j.field("limit", int64(l.Limit))
	j.key("algorithm")
	j.str(l.Algorithm.String())
	j.key("bucket")
	j.boolean(l.Bucket)
	j.field("capacity", l.Capacity)
	j.field("remaining", l.Remaining)
	switch l.Algorithm.String() {
	case "token_bucket":
		j.field("tokens", l.Tokens)
		j.field("debt", l.Debt)
	case "concurrency":
		j.field("in_flight", l.InFlight)
	case "sliding_window":
		j.field("count", l.Count)
		j.field("previous", l.Previous)
	default: // a fixed window counts its current window only
		j.field("count", l.Count)
	}
	j.field("next_refill_ms", millis(l.NextRefill))
	j.field("whole_ms", millis(l.Whole))
	if l.Written {
		j.key("written")
		j.boolean(true)
	}
	if l.Skipped != "" {
		j.key("skipped")
		j.str(l.Skipped)
	}
	j.close('}')
}

// millis is d in milliseconds, rounded up.
func millis(d duration.Duration) int64 {
	return int64((d + duration.Millisecond - 1) / duration.Millisecond)
}

// jsonOut writes JSON by hand: encoding/json would add hundreds of kilobytes to the module. Its
// methods are not inlined: every call site would carry a copy (10 kB of the module).
type jsonOut struct {
	b     []byte
	comma bool // a value was written at this level: the next one needs a comma
}

func (j *jsonOut) sep() {
	if j.comma {
		j.b = append(j.b, ',')
	}
}

//go:noinline
func (j *jsonOut) open(c byte) { j.sep(); j.b, j.comma = append(j.b, c), false }

//go:noinline
func (j *jsonOut) close(c byte) { j.b, j.comma = append(j.b, c), true }

//go:noinline
func (j *jsonOut) key(k string) {
	j.sep()
	j.b = append(appendJSONString(j.b, k), ':')
	j.comma = false
}

//go:noinline
func (j *jsonOut) str(s string) { j.sep(); j.b, j.comma = appendJSONString(j.b, s), true }

//go:noinline
func (j *jsonOut) num(n int64) { j.sep(); j.b, j.comma = strconv.AppendInt(j.b, n, 10), true }

//go:noinline
func (j *jsonOut) boolean(b bool) {
	j.sep()
	j.b, j.comma = strconv.AppendBool(j.b, b), true
}

//go:noinline
func (j *jsonOut) field(k string, n int64) { j.key(k); j.num(n) }

// appendJSONString appends s as a JSON string; bytes that are not valid UTF-8 become U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&15])
		default:
			dst = append(dst, string(r)...)
		}
	}
	return append(dst, '"')
}
