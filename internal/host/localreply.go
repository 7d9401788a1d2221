package host

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

// localReply is what proxy_send_local_response asked for, before Envoy shapes it.
type localReply struct {
	status     uint32
	headers    [][2]string
	body       []byte
	grpcStatus uint32 // as passed; only 0..16 is a status (SDKs pass -1 for none)
	details    string
}

// envoyDetails replaces whitespace as StringUtil::replaceAllEmptySpace does, one for one.
func envoyDetails(details string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\f', '\v', '\n', '\r':
			return '_'
		}
		return r
	}, details)
}

// isGrpcRequest is Envoy's test on the request's content-type.
func isGrpcRequest(requestHeaders [][2]string) bool {
	ct, _ := headerValue(requestHeaders, "content-type")
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+')
}

// httpToGrpcStatus is Envoy's mapping of an HTTP status to a gRPC status.
func httpToGrpcStatus(status uint32) uint32 {
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

// shape builds the response Envoy sends for a local reply to a request with the given headers.
// The returned headers start with :status.
func (r *localReply) shape(requestHeaders [][2]string) (headers [][2]string, body []byte) {
	headers = append([][2]string{{":status", strconv.Itoa(int(r.status))}}, r.headers...)
	method, _ := headerValue(requestHeaders, ":method")
	head := method == "HEAD"
	if isGrpcRequest(requestHeaders) {
		headers = setHeader(headers, ":status", "200")
		headers = setHeader(headers, "content-type", "application/grpc")
		if _, ok := headerValue(headers, "grpc-status"); !ok {
			code := httpToGrpcStatus(r.status)
			if r.grpcStatus <= 16 {
				code = r.grpcStatus
			}
			headers = setHeader(headers, "grpc-status", strconv.Itoa(int(code)))
		}
		if len(r.body) > 0 && !head {
			headers = setHeader(headers, "grpc-message", percentEncode(string(r.body)))
		}
		return removeHeader(headers, "content-length"), nil
	}
	if len(r.body) == 0 {
		return removeHeader(removeHeader(headers, "content-length"), "content-type"), nil
	}
	headers = setHeader(headers, "content-length", strconv.Itoa(len(r.body)))
	if _, ok := headerValue(headers, "content-type"); !ok {
		headers = append(headers, [2]string{"content-type", "text/plain"})
	}
	if head {
		return headers, nil
	}
	return headers, r.body
}

// setHeader replaces every value of name with one value, in place of the first.
func setHeader(headers [][2]string, name, value string) [][2]string {
	for i, h := range headers {
		if h[0] == name {
			out := append(headers[:i:i], [2]string{name, value})
			for _, rest := range headers[i+1:] {
				if rest[0] != name {
					out = append(out, rest)
				}
			}
			return out
		}
	}
	return append(headers, [2]string{name, value})
}
