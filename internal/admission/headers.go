package admission

import (
	"encoding/base64"
	"encoding/binary"
	"strconv"

	"github.com/tollgate-proxy/tollgate/config"
)

// RateLimitHeaders renders the rate-limit headers of a style for an outcome's limits
// (Gate.CollectStatus must be on). Policies are named after their rule, with ".<limit index>"
// when the rule has several limits.
//
// HeadersDraft follows draft-ietf-httpapi-ratelimit-headers: RateLimit-Policy lists each limit
// with its quota q and window w (seconds to restore the whole quota); RateLimit gives each one's
// remaining units r, seconds t until it is whole again (for the limit that rejected, until the
// request would be admitted), and pk, a hash of the partition key (never the key itself).
//
// HeadersXRateLimit reports the most restrictive limit (fewest units left) as
// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (seconds).
func (g *Gate) RateLimitHeaders(style config.HeaderStyle, out *Outcome) [][2]string {
	if len(out.Limits) == 0 {
		return nil
	}
	switch style {
	case config.HeadersDraft:
		var policy, state []byte
		for i, l := range out.Limits {
			if i > 0 {
				policy = append(policy, ", "...)
				state = append(state, ", "...)
			}
			name := g.policyName(l)
			policy = append(policy, '"')
			policy = append(policy, name...)
			policy = append(policy, `";q=`...)
			policy = strconv.AppendInt(policy, l.Quota, 10)
			policy = append(policy, ";w="...)
			policy = strconv.AppendInt(policy, l.WindowSeconds, 10)

			state = append(state, '"')
			state = append(state, name...)
			state = append(state, `";r=`...)
			state = strconv.AppendInt(state, l.Remaining, 10)
			state = append(state, ";t="...)
			state = strconv.AppendInt(state, ceilSeconds(l.Reset), 10)
			state = append(state, ";pk=:"...)
			var hash [8]byte
			binary.BigEndian.PutUint64(hash[:], l.PartitionHash)
			state = base64.StdEncoding.AppendEncode(state, hash[:])
			state = append(state, ':')
		}
		return [][2]string{{"ratelimit-policy", string(policy)}, {"ratelimit", string(state)}}
	case config.HeadersXRateLimit:
		tightest := out.Limits[0]
		for _, l := range out.Limits[1:] {
			if l.Remaining < tightest.Remaining || (l.Remaining == tightest.Remaining && l.Reset > tightest.Reset) {
				tightest = l
			}
		}
		return [][2]string{
			{"x-ratelimit-limit", strconv.FormatInt(tightest.Quota, 10)},
			{"x-ratelimit-remaining", strconv.FormatInt(tightest.Remaining, 10)},
			{"x-ratelimit-reset", strconv.FormatInt(ceilSeconds(tightest.Reset), 10)},
		}
	}
	return nil
}

func (g *Gate) policyName(l LimitStatus) string {
	r := &g.rules[l.Rule]
	if len(r.limits) == 1 {
		return r.config.Name
	}
	return r.config.Name + "." + strconv.Itoa(l.Limit)
}

// RuleName returns the name of the rule with the given index.
func (g *Gate) RuleName(index int) string { return g.rules[index].config.Name }

// Rules is the number of rules.
func (g *Gate) Rules() int { return len(g.rules) }
