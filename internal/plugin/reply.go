package plugin

import (
	"strconv"
	"unsafe"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// Response code details of Tollgate's local replies: Envoy's access logs show the one a request
// got as %RESPONSE_CODE_DETAILS%, and its stream info as response_code_details.
const (
	detailsRateLimited         = "tollgate_rate_limited"          // a local limit rejected the request
	detailsGlobalRateLimited   = "tollgate_global_rate_limited"   // the rate limit service said OVER_LIMIT
	detailsMissingKey          = "tollgate_missing_key"           // the request lacks its rule's key
	detailsInvalidCost         = "tollgate_invalid_cost"          // the cost header is not a whole number
	detailsEscapedSlash        = "tollgate_escaped_slash"         // %2F or %5C in the path, escaped_slashes reject
	detailsFailureDenied       = "tollgate_failure_denied"        // an internal error, failure_mode deny
	detailsGlobalFailureDenied = "tollgate_global_failure_denied" // the rate limit service failed, deny
)

// gRPC statuses of local replies to gRPC requests. Envoy turns a local reply to a gRPC request
// into a trailers-only 200 with grpc-status and grpc-message; without a status of ours it maps
// the HTTP status, and 429 would become UNAVAILABLE, which many gRPC clients retry at once.
const (
	grpcInvalidArgument = 3
	grpcUnauthenticated = 16
	grpcNone            = -1 // let Envoy map the HTTP status (503 becomes UNAVAILABLE)
)

// isGrpcRequest is Envoy's test for a gRPC request: content-type application/grpc, alone or
// with a "+" suffix (application/grpc-web is not gRPC to Envoy). Only then does Envoy use the
// grpc_status of a local reply.
func isGrpcRequest() bool {
	headers, _ := abi.GetHttpRequestHeaders() // none when they cannot be read
	ct, _ := wire.PairsValue(headers, "content-type")
	return isGrpcContentType(ct)
}

// isGrpcContentType is isGrpcRequest's test of the content-type's value. The rejection's sender
// reads the value itself and inlines this, where isGrpcRequest is one call more.
func isGrpcContentType(ct []byte) bool {
	return string(ct) == "application/grpc" || len(ct) > 16 && string(ct[:17]) == "application/grpc+"
}

// replyGrpcStatus is the grpc_status argument of a local reply: code for a gRPC request, none
// for any other, whose client sees only the HTTP status.
func replyGrpcStatus(grpc bool, code int32) int32 {
	if grpc {
		return code
	}
	return grpcNone
}

// grpcBody drops the trailing newline of a body that Envoy will send as grpc-message, where it
// would only show as %0A.
func grpcBody(grpc bool, body []byte) []byte {
	if grpc {
		if n := len(body); n > 0 && body[n-1] == '\n' {
			return body[:n-1]
		}
	}
	return body
}

// reply sends a plain-text local reply (plainReply).
func (h *httpContext) reply(status uint32, details string, grpcStatus int32, detail string, extra ...[2]string) {
	grpc := isGrpcRequest()
	body, headers := plainReply(status, detail, extra)
	if err := abi.SendLocalReply(status, details, headers, grpcBody(grpc, []byte(body)), replyGrpcStatus(grpc, grpcStatus)); err != nil {
		h.plugin.failed("cannot send a local reply: " + err.Error())
	}
}

// plainReply is the body and headers of a plain-text local reply: the status text leads the
// body.
func plainReply(status uint32, detail string, extra [][2]string) (body string, headers [][2]string) {
	return statusText(status) + ": " + detail, append([][2]string{{"content-type", "text/plain; charset=utf-8"}}, extra...)
}

// refusal is the reply to the last request refused before any limit was read (without its
// key, with a bad cost header, or with an escaped slash), kept with what it answered to be sent
// again as it is: under a flood of requests without their key, every one gets the same reply.
type refusal struct {
	// What it answers: the outcome's verdict, rule and missing part (a verdict and a rule decide
	// the status). The zero value answers nothing (Allow is never refused).
	verdict    admission.Verdict
	rule       int
	part       string
	status     uint32
	details    string
	grpcStatus int32
	pairs      []byte // the headers, serialized
	body       []byte
}

// answers compares the missing part by identity: admission hands out the same string while the
// same part is missing (Gate.describe), comparing bytes would cost two calls on every refusal,
// and another string only means building the reply again.
func (r *refusal) answers(out *admission.Outcome) bool {
	return r.verdict == out.Verdict && r.rule == out.Rule && len(r.part) == len(out.MissingPart) &&
		(len(r.part) == 0 || unsafe.StringData(r.part) == unsafe.StringData(out.MissingPart))
}

// build makes r the reply to out.
func (r *refusal) build(p *pluginContext, out *admission.Outcome) {
	r.verdict, r.rule, r.part = out.Verdict, out.Rule, out.MissingPart
	var detail string
	var extra [][2]string
	switch out.Verdict {
	case admission.MissingKey:
		r.status, r.details, r.grpcStatus = uint32(out.Status), detailsMissingKey, grpcUnauthenticated
		if out.Status == 401 {
			// RFC 9110 §15.5.2: a 401 carries a challenge. The scheme names what is missing.
			extra = [][2]string{{"www-authenticate", `Tollgate realm="` + p.ruleName(out.Rule) + `"`}}
		}
		detail = "the request has no " + out.MissingPart + " (rate limit rule " + p.ruleName(out.Rule) + ")\n"
	case admission.EscapedSlash:
		r.status, r.details, r.grpcStatus = 400, detailsEscapedSlash, grpcInvalidArgument
		detail = "the path spells a slash as %2F or %5C, which this gateway refuses (escaped_slashes \"reject\")\n"
	case admission.BadCost:
		r.status, r.details, r.grpcStatus = 400, detailsInvalidCost, grpcInvalidArgument
		detail = "header " + p.rules[out.Rule].costHeader + " must be a whole number (rate limit rule " + p.ruleName(out.Rule) + ")\n"
	}
	body, headers := plainReply(r.status, detail, extra)
	r.body = append(r.body[:0], body...)
	r.pairs = wire.AppendPairs(r.pairs[:0], headers)
}

func statusText(status uint32) string {
	switch status {
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 429:
		return "Too Many Requests"
	case 503:
		return "Service Unavailable"
	}
	return strconv.Itoa(int(status))
}

// answerLimited counts a request a limit rejects and sends the rejection.
func (h *httpContext) answerLimited(out *admission.Outcome) {
	p := h.plugin
	p.rules[out.Rule].limited.add(1)
	if p.operator != nil {
		p.operator.top.limited(p.gate, out.Rule)
	}
	if out.InFlightLimited {
		p.rules[out.Rule].inFlightLimited.add(1)
	}
	// rejectLimited's one statement, written out: it is a call of its own (the inliner's budget
	// takes limitHeaders and the call to sendRejection, not both), one more on every rejection.
	h.sendRejection(detailsRateLimited, out.RetryAfterSeconds(), h.limitHeaders(out))
}

// retryAfterPlaceholder is replaced in a rejection's body with the Retry-After seconds.
const retryAfterPlaceholder = "{retry_after}"

// rejectLimited sends the configured rejection with an exact Retry-After and the rate-limit
// headers if configured.
func (h *httpContext) rejectLimited(out *admission.Outcome) {
	h.sendRejection(detailsRateLimited, out.RetryAfterSeconds(), h.limitHeaders(out))
}

// limitHeaders are the rate-limit headers of out, none when they are not configured. Small
// enough to inline: a rejection without them pays no call for it.
func (h *httpContext) limitHeaders(out *admission.Outcome) [][2]string {
	if len(out.Limits) == 0 {
		return nil
	}
	return h.rateLimit.render(h.plugin.cfg.RateLimitHeaders, h.plugin.rules, out)
}

// sendRejection sends the configured rejection: status, body, Retry-After (retryAfter seconds),
// content type and headers, then more. The headers but Retry-After's value were serialized at
// plugin start (replyBuffers.pairs), and the reply is built in the plugin's reused buffers:
// Envoy copies it during the call, so a rejection allocates nothing beyond what more needs. A
// rejection with the Retry-After of the one before and no more headers, as most are when a
// client keeps coming back at its limit, is sent from the buffers as they are.
func (h *httpContext) sendRejection(details string, retryAfter int64, more [][2]string) {
	p := h.plugin
	buf := &p.reply
	if retryAfter != buf.builtFor || len(more) > 0 {
		buf.number = strconv.AppendInt(buf.number[:0], retryAfter, 10)
		// Only read while the buffers are filled.
		seconds := unsafe.String(unsafe.SliceData(buf.number), len(buf.number))
		buf.encoded = buf.pairs.Append(buf.encoded[:0], seconds, more)
		buf.body = buf.appendBody(buf.body[:0], seconds)
		buf.builtFor = retryAfter
		if len(more) > 0 {
			buf.builtFor = notBuilt // the next rejection has headers of its own
		}
	}
	headers, _ := abi.GetHttpRequestHeaders()
	ct, _ := wire.PairsValue(headers, "content-type")
	grpc := isGrpcContentType(ct)
	if st := abi.SendEncodedLocalReply(uint32(p.cfg.Response.Status), details, buf.encoded, grpcBody(grpc, buf.body),
		replyGrpcStatus(grpc, buf.grpcStatus)); st != wire.StatusOK {
		p.failed("cannot send a local reply: " + abi.StatusError(st).Error())
	}
}

// appendBody appends the configured rejection body to dst, retryAfter in place of each
// {retry_after}.
func (buf *replyBuffers) appendBody(dst []byte, retryAfter string) []byte {
	for i, part := range buf.bodyParts {
		if i > 0 {
			dst = append(dst, retryAfter...)
		}
		dst = append(dst, part...)
	}
	return dst
}
