package plugin

import (
	"strconv"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// rateLimitHeaders renders the rate-limit headers of the configured style for an outcome's limits
// (which admission collects when a style is configured). Policies are named after their rule,
// with "/<limit index>" when the rule has several limits ('/' cannot occur in a rule name, so
// names never collide).
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
func rateLimitHeaders(style config.HeaderStyle, rules []rule, out *admission.Outcome) [][2]string {
	if len(out.Limits) == 0 {
		return nil
	}
	switch style {
	case config.HeadersDraft:
		rejected := out.Verdict == admission.Limited
		var policy, state []byte
		for i, l := range out.Limits {
			if i > 0 {
				policy = append(policy, ", "...)
			}
			name := rules[l.Rule].policyNames[l.Limit]
			policy = append(policy, '"')
			policy = append(policy, name...)
			policy = append(policy, `";q=`...)
			policy = strconv.AppendInt(policy, l.Quota, 10)
			policy = append(policy, ";w="...)
			policy = strconv.AppendInt(policy, l.WindowSeconds, 10)

			if rejected && !l.Rejecting {
				continue
			}
			if len(state) > 0 {
				state = append(state, ", "...)
			}
			state = append(state, '"')
			state = append(state, name...)
			state = append(state, `";r=`...)
			state = strconv.AppendInt(state, l.Remaining, 10)
			state = append(state, ";t="...)
			state = strconv.AppendInt(state, secondsUp(l.Next), 10)
			state = append(state, ";pk=:"...)
			state = appendBase64(state, l.PartitionHash)
			state = append(state, ':')
		}
		return [][2]string{{"ratelimit-policy", string(policy)}, {"ratelimit", string(state)}}
	case config.HeadersXRateLimit:
		tightest := out.Limits[0]
		for _, l := range out.Limits[1:] {
			switch {
			case tightest.Rejecting:
			case l.Rejecting, l.Remaining < tightest.Remaining, l.Remaining == tightest.Remaining && l.Reset > tightest.Reset:
				tightest = l
			}
		}
		return [][2]string{
			{"x-ratelimit-limit", strconv.FormatInt(tightest.Quota, 10)},
			{"x-ratelimit-remaining", strconv.FormatInt(tightest.Remaining, 10)},
			{"x-ratelimit-reset", strconv.FormatInt(secondsUp(tightest.Reset), 10)},
		}
	}
	return nil
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
