package plugin

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
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
	ct, err := abi.GetHttpRequestHeader("content-type")
	if err != nil {
		return false
	}
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+')
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

// reply sends a plain-text local reply; the status text leads the body.
func (h *httpContext) reply(status uint32, details string, grpcStatus int32, detail string, extra ...[2]string) {
	grpc := isGrpcRequest()
	body := statusText(status) + ": " + detail
	headers := append([][2]string{{"content-type", "text/plain; charset=utf-8"}}, extra...)
	if err := abi.SendLocalReply(status, details, headers, grpcBody(grpc, []byte(body)), replyGrpcStatus(grpc, grpcStatus)); err != nil {
		h.plugin.failed("cannot send a local reply: " + err.Error())
	}
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
	h.rejectLimited(out)
}

// retryAfterPlaceholder is replaced in a rejection's body with the Retry-After seconds.
const retryAfterPlaceholder = "{retry_after}"

// rejectLimited sends the configured rejection with an exact Retry-After and the rate-limit
// headers if configured.
func (h *httpContext) rejectLimited(out *admission.Outcome) {
	var more [][2]string
	if len(out.Limits) > 0 { // rate-limit headers are configured
		more = rateLimitHeaders(h.plugin.cfg.RateLimitHeaders, h.plugin.rules, out)
	}
	h.sendRejection(detailsRateLimited, out.RetryAfterSeconds(), more)
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
	grpc := isGrpcRequest()
	if err := abi.SendEncodedLocalReply(uint32(p.cfg.Response.Status), details, buf.encoded, grpcBody(grpc, buf.body),
		replyGrpcStatus(grpc, buf.grpcStatus)); err != nil {
		p.failed("cannot send a local reply: " + err.Error())
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
