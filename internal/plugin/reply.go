package plugin

import (
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/abi"
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
