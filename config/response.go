package config

import (
	"strconv"
	"strings"
)

// Explanations of the response fields, appended to problems.
const (
	responseShape = `response is an object with any of "status", "body", "content_type", "headers" and "grpc_status", ` +
		`e.g. {"status": 503, "body": "busy, retry in {retry_after} s"}`
	responseStatusRule = "status is the HTTP status of a rejected request, a whole number from 400 to 599 (default 429)"
	bodyRule           = "body is the text sent to a rejected request, at most 4096 bytes, " +
		"in which {retry_after} is replaced with the seconds to wait"
	contentTypeRule = `content_type is 1 to 256 characters of visible ASCII and spaces, ` +
		`e.g. "application/json" (default "text/plain; charset=utf-8")`
	responseHeadersShape = `headers is an object of up to 16 header names and values, e.g. {"x-served-by": "tollgate"}`
	responseHeaderRule   = `a response header name is 1 to 256 characters of letters, digits and !#$%&'*+-.^_` + "`" +
		`|~ (an RFC 9110 token), e.g. "x-served-by"`
	responseHeaderValueRule = `a response header value is a string of at most 1024 bytes without CR, LF or NUL, ` +
		`e.g. "tollgate"`
	grpcStatusRule = "grpc_status is the gRPC status a rejected gRPC request gets, a whole number from 1 to 16 " +
		"(default 8, RESOURCE_EXHAUSTED; 14, UNAVAILABLE, makes many gRPC clients retry at once)"
	rateLimitHeadersRule = `rate_limit_headers is "off" (the default), "draft" (RateLimit and RateLimit-Policy) ` +
		`or "x-ratelimit" (X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset)`
)

// hopByHopHeaders are the connection-level headers of RFC 9110 §7.6.1 and their old companions.
var hopByHopHeaders = []string{"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}

// filterResponseHeaders are the response headers the filter sets itself,
// each with the fix for a configuration that sets it too.
var filterResponseHeaders = []struct{ name, fix string }{
	{"retry-after", "remove it (the filter sets it to the seconds until a retry can succeed)"},
	{"content-type", `remove it and set "content_type" instead`},
	{"content-length", "remove it (the filter computes it from body)"},
	{"ratelimit", `remove it and set "rate_limit_headers": "draft" to have the filter send it`},
	{"ratelimit-policy", `remove it and set "rate_limit_headers": "draft" to have the filter send it`},
	{"x-ratelimit-limit", `remove it and set "rate_limit_headers": "x-ratelimit" to have the filter send it`},
	{"x-ratelimit-remaining", `remove it and set "rate_limit_headers": "x-ratelimit" to have the filter send it`},
	{"x-ratelimit-reset", `remove it and set "rate_limit_headers": "x-ratelimit" to have the filter send it`},
}

// response reads the response object into r, which holds the defaults.
func (v *validator) response(path string, value *jsonValue, r *Response) {
	if !v.wantKind(path, value, kindObject, responseShape) {
		return
	}
	v.checkFieldNames(path, value, responseFields)
	if status := value.member("status"); status != nil {
		if code, ok := v.wholeNumber(fieldPath(path, "status"), status, minStatus, maxStatus, responseStatusRule); ok {
			r.Status = int(code)
		}
	}
	if body := value.member("body"); body != nil {
		bodyPath := fieldPath(path, "body")
		switch {
		case !v.wantKind(bodyPath, body, kindString, bodyRule):
		case len(body.text) > maxBodyLength:
			v.add(bodyPath, quoteClipped(body.text)+" is "+strconv.Itoa(len(body.text))+" bytes long: "+bodyRule)
		default:
			r.Body = body.text
		}
	}
	if contentType := value.member("content_type"); contentType != nil {
		if text, ok := v.contentType(fieldPath(path, "content_type"), contentType); ok {
			r.ContentType = text
		}
	}
	if headers := value.member("headers"); headers != nil {
		r.Headers = v.responseHeaders(fieldPath(path, "headers"), headers)
	}
	if grpcStatus := value.member("grpc_status"); grpcStatus != nil {
		if code, ok := v.wholeNumber(fieldPath(path, "grpc_status"), grpcStatus, 1, 16, grpcStatusRule); ok {
			r.GrpcStatus = int(code)
		}
	}
}

// DefaultGrpcStatus is the gRPC status of a rejected gRPC request when response.grpc_status is
// not set: RESOURCE_EXHAUSTED, which gRPC clients do not retry by default.
const DefaultGrpcStatus = 8

// RejectionGrpcStatus is the gRPC status a rejected gRPC request gets.
func (r *Response) RejectionGrpcStatus() int {
	if r.GrpcStatus == 0 {
		return DefaultGrpcStatus
	}
	return r.GrpcStatus
}

func (v *validator) contentType(path string, value *jsonValue) (string, bool) {
	if value.kind == kindString && value.text == "" {
		v.add(path, `"" is not allowed: `+contentTypeRule+`; remove content_type to use the default`)
		return "", false
	}
	text := v.boundedString(path, value, maxContentTypeLength, contentTypeRule)
	if text == "" {
		return "", false
	}
	for _, r := range text {
		if r < ' ' || r > '~' {
			v.addContains(path, text, r, ", which is not allowed: "+contentTypeRule)
			return "", false
		}
	}
	return text, true
}

// responseHeaders reads the extra headers of the response, in document
// order, with lower-cased names.
func (v *validator) responseHeaders(path string, value *jsonValue) [][2]string {
	if !v.wantKind(path, value, kindObject, responseHeadersShape) {
		return nil
	}
	for _, name := range value.repeated {
		v.add(fieldPath(path, clip(name)), "the header is given more than once in the same object: keep exactly one "+
			"(JSON parsers disagree about which copy wins)")
	}
	if len(value.members) > maxResponseHeaders {
		v.add(path, strconv.Itoa(len(value.members))+" headers are too many: at most "+
			strconv.Itoa(maxResponseHeaders)+" are allowed")
	}
	var headers [][2]string
	firstByName := make(map[string]string) // lower-cased name → the name as first written
	for _, member := range value.members {
		memberPath := fieldPath(path, clip(member.name))
		name, nameOK := v.responseHeaderName(memberPath, member.name)
		headerValue, valueOK := v.responseHeaderValue(memberPath, member.value)
		if !nameOK {
			continue
		}
		if first, given := firstByName[name]; given {
			v.add(memberPath, strconv.Quote(member.name)+" is the same header as "+strconv.Quote(first)+
				" (header names are case-insensitive): keep exactly one")
			continue
		}
		firstByName[name] = member.name
		if valueOK {
			headers = append(headers, [2]string{name, headerValue})
		}
	}
	return headers
}

func (v *validator) responseHeaderName(path, name string) (string, bool) {
	switch {
	case name == "":
		v.add(path, `the header name "" is not allowed: `+responseHeaderRule)
		return "", false
	case len(name) > maxHeaderLength:
		v.add(path, "the header name "+quoteClipped(name)+" is "+strconv.Itoa(len(name))+" bytes long: "+responseHeaderRule)
		return "", false
	case name[0] == ':':
		v.add(path, quoteClipped(name)+` is a pseudo-header, which the response headers cannot set: `+
			`use "status" for the status code, or a regular header name`)
		return "", false
	}
	if r, ok := firstNonToken(name); !ok {
		v.add(path, "the header name "+quoteClipped(name)+" contains "+strconv.QuoteRune(r)+
			", which is not allowed: "+responseHeaderRule)
		return "", false
	}
	lower := strings.ToLower(name)
	for _, hop := range hopByHopHeaders {
		if lower == hop {
			v.add(path, strconv.Quote(name)+" is a hop-by-hop header, which describes the connection rather than the "+
				"response and which Envoy manages itself: remove it")
			return "", false
		}
	}
	for _, reserved := range filterResponseHeaders {
		if lower == reserved.name {
			v.add(path, strconv.Quote(name)+" is a header the filter sets itself: "+reserved.fix)
			return "", false
		}
	}
	return lower, true
}

func (v *validator) responseHeaderValue(path string, value *jsonValue) (string, bool) {
	if !v.wantKind(path, value, kindString, responseHeaderValueRule) {
		return "", false
	}
	text := value.text
	if len(text) > maxResponseHeaderValue {
		v.add(path, quoteClipped(text)+" is "+strconv.Itoa(len(text))+" bytes long: "+responseHeaderValueRule)
		return "", false
	}
	for _, r := range text {
		if r == '\r' || r == '\n' || r == 0 {
			v.addContains(path, text, r, ", which would end the header early "+
				"and let the rest of the value inject other headers or a body (response header injection): "+
				responseHeaderValueRule)
			return "", false
		}
		if (r < 0x20 && r != '\t') || r >= 0x7f {
			v.addContains(path, text, r, ": header values are visible ASCII, "+
				"spaces and tabs (RFC 9110 §5.5), and proxies reject or mangle anything else: "+responseHeaderValueRule)
			return "", false
		}
	}
	return text, true
}
