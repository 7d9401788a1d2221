package hostcore

import (
	"fmt"
	"strconv"
	"strings"
)

// Local replies as Envoy sends them (envoy source/common/http/utility.cc prepareLocalReply and
// encodeLocalReply, called by FilterManager::sendLocalReply in source/common/http/filter_manager.cc
// through Context::sendLocalResponse in source/extensions/common/wasm/context.cc):
//
//   - The module's headers are added to a header map holding only :status.
//   - For a gRPC request (content-type exactly application/grpc or application/grpc+…; envoy
//     source/common/grpc/common.cc hasGrpcContentType — application/grpc-web is not gRPC) the
//     reply is trailers-only: :status 200, content-type application/grpc, grpc-status (unless the
//     module set one) from the module's grpc_status if it is 0..16, else mapped from the HTTP
//     status (source/common/grpc/status.cc httpToGrpcStatus: 429, 502, 503, 504 → 14 UNAVAILABLE,
//     400 → 13, 401 → 16, 403 → 7, 404 → 12, anything else → 2), grpc-message the body
//     percent-encoded (not for HEAD), no content-length and no body.
//   - Otherwise a body sets content-length and, if the module set none, content-type text/plain;
//     without a body both are removed. A HEAD request gets the headers without the body.
//
// The response code details are the module's with each whitespace character replaced by '_'
// (context.cc uses StringUtil::replaceAllEmptySpace, source/common/common/utility.cc).

// LocalReply is what proxy_send_local_response asked for, before Envoy shapes it.
type LocalReply struct {
	Status  uint32
	Headers [][2]string // names lower-case
	Body    []byte
	// GrpcStatus is as passed; only 0..16 is a status (SDKs pass -1, 0xffffffff, for none).
	GrpcStatus uint32
	// Details are already as Envoy logs them (EnvoyDetails).
	Details string
}

// EnvoyDetails replaces whitespace as StringUtil::replaceAllEmptySpace does, one for one.
func EnvoyDetails(details string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\f', '\v', '\n', '\r':
			return '_'
		}
		return r
	}, details)
}

// IsGrpcRequest is Envoy's test on the request's content-type.
func IsGrpcRequest(requestHeaders [][2]string) bool {
	ct, _ := HeaderValue(requestHeaders, "content-type")
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+')
}

// HTTPToGrpcStatus is Envoy's mapping of an HTTP status to a gRPC status.
func HTTPToGrpcStatus(status uint32) uint32 {
	switch status {
	case 400:
		return 13
	case 401:
		return 16
	case 403:
		return 7
	case 404:
		return 12
	case 429, 502, 503, 504:
		return 14
	}
	return 2
}

// percentEncode is Envoy's PercentEncoding::encode with '%' reserved, as applied to
// grpc-message: bytes below ' ', from '~' up, and '%' become %XX.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c >= '~' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Shape builds the response Envoy sends for a local reply to a request with the given headers
// (names lower-case). The returned headers start with :status.
func (r *LocalReply) Shape(requestHeaders [][2]string) (headers [][2]string, body []byte) {
	headers = append([][2]string{{":status", strconv.Itoa(int(r.Status))}}, r.Headers...)
	method, _ := HeaderValue(requestHeaders, ":method")
	head := method == "HEAD"
	if IsGrpcRequest(requestHeaders) {
		headers = SetHeader(headers, ":status", "200")
		headers = SetHeader(headers, "content-type", "application/grpc")
		if _, ok := HeaderValue(headers, "grpc-status"); !ok {
			code := HTTPToGrpcStatus(r.Status)
			if r.GrpcStatus <= 16 {
				code = r.GrpcStatus
			}
			headers = SetHeader(headers, "grpc-status", strconv.Itoa(int(code)))
		}
		if len(r.Body) > 0 && !head {
			headers = SetHeader(headers, "grpc-message", percentEncode(string(r.Body)))
		}
		return RemoveHeader(headers, "content-length"), nil
	}
	if len(r.Body) == 0 {
		return RemoveHeader(RemoveHeader(headers, "content-length"), "content-type"), nil
	}
	headers = SetHeader(headers, "content-length", strconv.Itoa(len(r.Body)))
	if _, ok := HeaderValue(headers, "content-type"); !ok {
		headers = append(headers, [2]string{"content-type", "text/plain"})
	}
	if head {
		return headers, nil
	}
	return headers, r.Body
}
