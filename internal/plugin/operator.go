package plugin

import (
	"strings"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/digest"
	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/internal/netaddr"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// The operator endpoint (configuration's "operator"): requests under its path prefix are
// answered here, before any rule is matched, so they are never forwarded and never charged.
// A request is served only if, in this order, its peer address (source.address: x-forwarded-for
// is the client's to write) is in client_cidrs, the endpoint's own rate limit admits it (a bucket
// per VM, after the address check so that nobody outside the range can use it up, before the
// token's so that guessing tokens costs time), and its bearer token's SHA-256 is one of
// token_sha256, compared in constant time. The operations (operator_ops.go) read and write the
// key table as the decisions do.

// detailsOperator are the response code details of every reply of the operator endpoint.
const detailsOperator = "tollgate_operator"

// The endpoint's rate limit, per VM: a burst of operatorBurst, refilled at operatorRate per
// second. An operator's commands send one request each.
const (
	operatorBurst = 10
	operatorRate  = 10
)

// operatorEndpoint is the compiled operator block, with its counters and rate limit.
type operatorEndpoint struct {
	prefix  string
	cidrs   []netaddr.Prefix
	digests [][32]byte

	bucket limiter.Bucket
	level  limiter.BucketState

	answered, resets, rateLimited, forbidden, unauthorized, notFound counter
	// top is the rules' top offenders (operator_top.go).
	top *topOffenders
}

// compileOperator compiles the operator block (nil when it is off) and defines its counters.
func compileOperator(cfg *config.Config, namespace string, define defineFunc, now int64) (*operatorEndpoint, bool) {
	op := cfg.Operator
	if op == nil {
		return nil, true
	}
	bucket, err := limiter.NewBucket(limiter.BucketLimit{Capacity: operatorBurst, RefillTokens: operatorRate, RefillInterval: duration.Second})
	if err != nil {
		abi.Log(abi.LogLevelCritical, "tollgate: operator endpoint: "+err.Error())
		return nil, false
	}
	e := &operatorEndpoint{prefix: op.PathPrefix, cidrs: op.ClientCIDRs, digests: op.TokenSHA256,
		bucket: bucket, level: bucket.Initial(now)}
	const prefix = "tollgate.operator."
	if !define(prefix+"answered", &e.answered) || !define(prefix+"resets", &e.resets) ||
		!define(prefix+"rate_limited", &e.rateLimited) || !define(prefix+"forbidden", &e.forbidden) ||
		!define(prefix+"unauthorized", &e.unauthorized) || !define(prefix+"not_found", &e.notFound) {
		return nil, false
	}
	e.top = newTopOffenders(cfg, namespace, op.TopKeys, op.RawKeys)
	return e, true
}

// startOperator compiles the operator block when the plugin starts; false when it fails (logged).
func (p *pluginContext) startOperator(cfg *config.Config, namespace string, define defineFunc) bool {
	if cfg.Operator == nil {
		return true
	}
	now, err := abi.MonotonicNanos()
	if err != nil {
		abi.Log(abi.LogLevelCritical, "tollgate: cannot read the monotonic clock for the operator endpoint: "+err.Error())
		return false
	}
	var ok bool
	p.operator, ok = compileOperator(cfg, namespace, define, now)
	return ok
}

// flushTop merges this VM's top offenders into shared data (from the tick).
func (op *operatorEndpoint) flushTop() {
	now, err := abi.MonotonicNanos()
	if err != nil {
		return // the next tick tries again; nothing counted is lost
	}
	op.top.flush(now)
}

// operatorRequest answers a request under the endpoint's prefix; false for any other, which
// goes on to the rules. Its one cost to other requests is reading :path.
func (h *httpContext) operatorRequest() (types.Action, bool) {
	p, op := h.plugin, h.plugin.operator
	path, err := abi.GetHttpRequestHeader(":path")
	if err != nil || !strings.HasPrefix(path, op.prefix) {
		return 0, false
	}
	peer, inRange := op.peer()
	if !inRange {
		op.forbidden.add(1)
		h.operatorReply(403, nil, errorBody("the peer address is not in operator.client_cidrs"))
		return types.ActionPause, true
	}
	now, err := abi.MonotonicNanos()
	if err != nil {
		p.failed("cannot read the monotonic clock: " + err.Error())
		h.operatorReply(503, nil, errorBody("the monotonic clock cannot be read"))
		return types.ActionPause, true
	}
	next, d := op.bucket.Take(op.level, now, 1)
	op.level = next
	if !d.Allowed {
		op.rateLimited.add(1)
		h.operatorReply(429, [][2]string{{"retry-after", "1"}}, errorBody("the operator endpoint is rate limited: retry in a second"))
		return types.ActionPause, true
	}
	if status, msg := op.authorize(); status != 0 {
		op.unauthorized.add(1)
		h.operatorReply(status, [][2]string{{"www-authenticate", `Bearer realm="tollgate operator"`}}, errorBody(msg))
		return types.ActionPause, true
	}
	rest, query, _ := strings.Cut(path[len(op.prefix):], "?")
	method, _ := abi.GetHttpRequestHeader(":method")
	h.operate(method, rest, query, peer, now)
	return types.ActionPause, true
}

// peer is the request's peer address (source.address), and whether it is in client_cidrs.
func (op *operatorEndpoint) peer() (string, bool) {
	source, err := abi.GetProperty("source", "address")
	if err != nil {
		return "", false
	}
	text := admission.HostOf(string(source))
	addr, _, ok := netaddr.ParseAddr(text)
	if !ok {
		return text, false
	}
	addr = addr.Unmap()
	for _, prefix := range op.cidrs {
		if prefix.Contains(addr) {
			return text, true
		}
	}
	return text, false
}

// authorize checks the bearer token: 0 when its SHA-256 is listed, else the status (401) and why.
// Every listed digest is compared, in constant time, whichever matches.
func (op *operatorEndpoint) authorize() (uint32, string) {
	header, err := abi.GetHttpRequestHeader("authorization")
	if err != nil || header == "" {
		return 401, "the request has no authorization header: send Authorization: Bearer <token>"
	}
	scheme, token, _ := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "bearer") || token == "" {
		return 401, "the authorization header is not Bearer <token>"
	}
	sum := digest.Sum256([]byte(token))
	match := false
	for i := range op.digests {
		match = digest.Equal(&sum, &op.digests[i]) || match // every digest compared
	}
	if !match {
		return 401, "the token's SHA-256 is not in operator.token_sha256"
	}
	return 0, ""
}

// OperatorHeader marks every reply of the operator endpoint, so that a client tells it from an
// upstream's answer to the same path (the endpoint off, or another listener).
const OperatorHeader = "x-tollgate-operator"

// operatorReply sends one of the endpoint's JSON replies; never cached.
func (h *httpContext) operatorReply(status uint32, extra [][2]string, body []byte) {
	headers := append([][2]string{{"content-type", "application/json"}, {"cache-control", "no-store"}, {OperatorHeader, "1"}}, extra...)
	if err := abi.SendLocalReply(status, detailsOperator, headers, body, grpcNone); err != nil {
		h.plugin.failed("cannot send a local reply: " + err.Error())
	}
}

// errorBody is {"error": msg}.
func errorBody(msg string) []byte {
	var j jsonOut
	j.open('{')
	j.key("error")
	j.str(msg)
	j.close('}')
	return append(j.b, '\n')
}
