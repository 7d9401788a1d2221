package plugin

import (
	"strconv"
	"unsafe"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// rateLimitText holds the rate-limit headers of one answer: the pairs and the bytes their values
// are views of. A stream renders its own (httpContext.rateLimit) and reuses them for its context's
// next request, so that once they have grown an answer with the headers allocates nothing, under
// a flood of rejections as for admitted requests.
type rateLimitText struct {
	pairs [][2]string
	text  []byte
}

// render renders the rate-limit headers of the configured style for an outcome's limits (which
// admission collects when a style is configured) into t: they are valid until t renders again.
// Policies are named after their rule, with "/<limit index>" when the rule has several limits
// ('/' cannot occur in a rule name, so names never collide).
//
// HeadersDraft follows draft-ietf-httpapi-ratelimit-headers: RateLimit-Policy lists each limit
// with its quota q and window w (seconds to restore the whole quota; a token bucket admits a
// burst of q and then q per w); RateLimit gives each one's remaining units r, seconds t until
// more quota is available, and pk, a keyed hash of the partition key (never the key itself). On
// a rejection RateLimit carries only the limit that rejected, with r=0 and t equal to
// Retry-After. A calendar window's w is the length of the day, week or month it is in (a month
// of 28 to 31 days: the window the quota is for), and its t the time to the next calendar
// boundary; a token bucket's w is exact however long (100,000 tokens at one a day is 100,000
// days).
//
// HeadersXRateLimit reports the most restrictive limit (the one that rejected, else the one with
// the fewest units left) as X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset
// (seconds until it is whole again, on a rejection as on an admitted response; Retry-After says
// when a rejected request would be admitted).
func (t *rateLimitText) render(style config.HeaderStyle, rules []rule, out *admission.Outcome) [][2]string {
	if len(out.Limits) == 0 {
		return nil
	}
	switch style {
	case config.HeadersDraft:
		rejected := out.Verdict == admission.Limited
		policy := t.text[:0]
		for i, l := range out.Limits {
			if i > 0 {
				policy = append(policy, ", "...)
			}
			policy = append(policy, '"')
			policy = append(policy, rules[l.Rule].policyNames[l.Limit]...)
			policy = append(policy, `";q=`...)
			policy = strconv.AppendInt(policy, l.Quota, 10)
			policy = append(policy, ";w="...)
			policy = strconv.AppendInt(policy, l.WindowSeconds, 10)
		}
		state := policy
		for _, l := range out.Limits {
			if rejected && !l.Rejecting {
				continue
			}
			if len(state) > len(policy) {
				state = append(state, ", "...)
			}
			state = append(state, '"')
			state = append(state, rules[l.Rule].policyNames[l.Limit]...)
			state = append(state, `";r=`...)
			state = strconv.AppendInt(state, l.Remaining, 10)
			state = append(state, ";t="...)
			state = strconv.AppendInt(state, secondsUp(l.Next), 10)
			state = append(state, ";pk=:"...)
			state = appendBase64(state, l.PartitionHash)
			state = append(state, ':')
		}
		t.text = state
		t.pairs = append(t.pairs[:0], [2]string{"ratelimit-policy", t.view(0, len(policy))},
			[2]string{"ratelimit", t.view(len(policy), len(state))})
		return t.pairs
	case config.HeadersXRateLimit:
		tightest := out.Limits[0]
		for _, l := range out.Limits[1:] {
			switch {
			case tightest.Rejecting:
			case l.Rejecting, l.Remaining < tightest.Remaining, l.Remaining == tightest.Remaining && l.Reset > tightest.Reset:
				tightest = l
			}
		}
		limit := strconv.AppendInt(t.text[:0], tightest.Quota, 10)
		remaining := strconv.AppendInt(limit, tightest.Remaining, 10)
		t.text = strconv.AppendInt(remaining, secondsUp(tightest.Reset), 10)
		t.pairs = append(t.pairs[:0], [2]string{"x-ratelimit-limit", t.view(0, len(limit))},
			[2]string{"x-ratelimit-remaining", t.view(len(limit), len(remaining))},
			[2]string{"x-ratelimit-reset", t.view(len(remaining), len(t.text))})
		return t.pairs
	}
	return nil
}

// view is t.text[from:to] as a string, without a copy.
func (t *rateLimitText) view(from, to int) string {
	if from == to {
		return ""
	}
	return unsafe.String(&t.text[from], to-from)
}

// policyNames are the names of a rule's limits in the draft headers: the rule's name, or
// "<rule>/<position>" when some tier of the rule has more than one limit ('/' cannot occur in a
// rule name).
func policyNames(r *config.Rule) []string {
	names := make([]string, r.LimitPositions())
	for i := range names {
		names[i] = r.Name
		if len(names) > 1 {
			names[i] += "/" + strconv.Itoa(i)
		}
	}
	return names
}

// secondsUp is d in whole seconds, rounded up; it cannot overflow, as d may be close to the
// largest duration.
func secondsUp(d duration.Duration) int64 {
	s := int64(d / duration.Second)
	if d%duration.Second != 0 {
		s++
	}
	return s
}

// appendBase64 appends the standard base64 (RFC 4648, padded) of v's eight bytes, big-endian:
// the byte sequence of the ratelimit header's pk parameter, written here without
// encoding/base64, whose tables the module would carry for these twelve characters.
func appendBase64(dst []byte, v uint64) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	// Eight bytes are 64 bits: ten whole sextets and four bits, which the eleventh sextet
	// carries followed by two zero bits, then one '=' pads the last group to four characters.
	for shift := 58; shift >= 4; shift -= 6 {
		dst = append(dst, alphabet[v>>uint(shift)&63])
	}
	return append(dst, alphabet[v<<2&63], '=')
}
