package plugin

import (
	"strconv"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/internal/rls"
)

// The global quota in an admitted response's rate-limit headers: what the rate limit service
// said is left of a rule's global limit joins the local limits' figures. In the draft style it
// is one more policy, named "<rule>/global" as on a rejection; with X-RateLimit-* it replaces
// the local figures when it is the tighter. A call answers with the service's own count (this
// request included); a request served from a lease has the estimate of admission's
// LeaseTake.Left, which lags what other replicas spent since this one's last grant
// (docs/global-limits.md says by how much).

// globalQuota is what is left of one rule's global limit for an admitted request.
type globalQuota struct {
	quota, windowSeconds int64 // requests per unit, and the unit in seconds
	left                 int64
	untilReset           duration.Duration
}

// quotaFromAnswer is the quota an OK answer names, with granted tokens of a lease still unspent
// here; zero when it names no limit.
func quotaFromAnswer(resp rls.Response, granted int64) globalQuota {
	s := resp.Status
	if resp.Statuses == 0 || s.RequestsPerUnit == 0 || s.Unit.Seconds() == 0 {
		return globalQuota{}
	}
	q := globalQuota{quota: int64(s.RequestsPerUnit), windowSeconds: s.Unit.Seconds(),
		left: min(int64(s.LimitRemaining)+granted, int64(s.RequestsPerUnit)), untilReset: duration.Duration(s.Unit.Seconds()) * duration.Second}
	if s.HasReset && s.DurationUntilReset > 0 {
		q.untilReset = s.DurationUntilReset
	}
	return q
}

// quotaFromLease is the quota a request served from the lease sees; zero when the service
// named no limit.
func quotaFromLease(take admission.LeaseTake) globalQuota {
	window := rls.Unit(take.Unit).Seconds()
	if take.Left < 0 || take.Quota == 0 || window == 0 {
		return globalQuota{}
	}
	return globalQuota{quota: int64(take.Quota), windowSeconds: window, left: take.Left, untilReset: take.UntilReset}
}

// showGlobalQuota adds a rule's global quota (none when zero) to the headers of the request's
// admitted response.
func (h *httpContext) showGlobalQuota(rule int, q globalQuota) {
	style := h.plugin.cfg.RateLimitHeaders
	if q.quota == 0 || style == config.HeadersOff {
		return
	}
	h.responseHeaders = withGlobalQuota(style, h.responseHeaders, h.plugin.ruleName(rule), q)
}

// withGlobalQuota returns headers with the global quota of rule added in style.
func withGlobalQuota(style config.HeaderStyle, headers [][2]string, rule string, q globalQuota) [][2]string {
	left, reset := strconv.FormatInt(q.left, 10), strconv.FormatInt(secondsUp(q.untilReset), 10)
	switch style {
	case config.HeadersDraft:
		name := `"` + rule + `/global"`
		headers = appendListMember(headers, "ratelimit-policy", name+";q="+strconv.FormatInt(q.quota, 10)+
			";w="+strconv.FormatInt(q.windowSeconds, 10))
		return appendListMember(headers, "ratelimit", name+";r="+left+";t="+reset)
	case config.HeadersXRateLimit:
		i := headerIndex(headers, "x-ratelimit-remaining")
		if i >= 0 {
			local, err := strconv.ParseInt(headers[i][1], 10, 64)
			if err == nil && local <= q.left {
				return headers // the local limit is the tighter (or as tight): its figures stay
			}
		}
		headers = setHeader(headers, "x-ratelimit-limit", strconv.FormatInt(q.quota, 10))
		headers = setHeader(headers, "x-ratelimit-remaining", left)
		return setHeader(headers, "x-ratelimit-reset", reset)
	}
	return headers
}

// appendListMember appends member to the structured-field list of header name, or adds the header.
func appendListMember(headers [][2]string, name, member string) [][2]string {
	if i := headerIndex(headers, name); i >= 0 {
		headers[i][1] += ", " + member
		return headers
	}
	return append(headers, [2]string{name, member})
}

// setHeader sets header name to value, adding it if absent.
func setHeader(headers [][2]string, name, value string) [][2]string {
	if i := headerIndex(headers, name); i >= 0 {
		headers[i][1] = value
		return headers
	}
	return append(headers, [2]string{name, value})
}

func headerIndex(headers [][2]string, name string) int {
	for i, h := range headers {
		if h[0] == name {
			return i
		}
	}
	return -1
}
