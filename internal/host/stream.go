package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/tollgate-proxy/tollgate/internal/hostcore"
)

// Request is what Envoy hands the filter chain for one HTTP request.
type Request struct {
	// Headers include the pseudo-headers :method, :path, :authority and :scheme.
	Headers [][2]string
	// SourceAddress is the downstream address with port ("10.0.0.1:5000", "[::1]:5000"): the
	// source.address property.
	SourceAddress string
	// DestinationAddress is the local address: the destination.address property.
	DestinationAddress string
	// EndOfStream is true for a request without a body.
	EndOfStream bool
	// Attributes are further Envoy attributes of the request by dotted path, such as
	// "xds.route_name", served by proxy_get_property as strings.
	Attributes map[string]string
}

// Response is what the client gets: from the upstream, or a local reply of the module.
type Response struct {
	Status  int
	Headers [][2]string // without :status
	Body    []byte
	// Trailers are the response's trailers, nil for none.
	Trailers [][2]string
	// LocalReply is true when the module answered (proxy_send_local_response). A local reply is
	// shaped as Envoy shapes it (hostcore.LocalReply): for a gRPC request it is a trailers-only 200
	// with grpc-status and grpc-message, for a HEAD request it has no body.
	LocalReply bool
	// Details is the local reply's response code details, each whitespace character replaced
	// by '_' (Envoy's %RESPONSE_CODE_DETAILS%).
	Details string
}

// Header returns the first value of a header (name lower-case), or "".
func (r *Response) Header(name string) string {
	for _, h := range r.Headers {
		if h[0] == name {
			return h[1]
		}
	}
	return ""
}

// ErrStreamPaused is returned when the module stopped a request without replying or continuing
// it, and without a gRPC call of its own in flight whose callback could resume it: in Envoy such
// a request waits until a timeout.
var ErrStreamPaused = errors.New("the module paused the request without a local reply or a way to resume it")

// ErrReplacedResponse is returned by ResponseHeaders when the module answered with a local reply
// during the response phase; LocalReply has it, and it replaces the upstream's response.
var ErrReplacedResponse = errors.New("the module replaced the response with a local reply")

// LocalReply is the local reply the module sent on this stream as Envoy sends it, or nil.
func (s *Stream) LocalReply() *Response {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.sent
}

// Stream is one HTTP stream's context in a VM.
type Stream struct {
	vm              *VM
	id              uint32
	root            uint32 // the root context the stream was created under
	generation      int    // the VM's load the stream belongs to (see FailReload)
	bypass          bool   // the filter was skipped (FailOpen on a failed VM)
	req             Request
	requestHeaders  [][2]string
	responseHeaders [][2]string
	// responseTrailers are the upstream's trailers, from ResponseTrailers on; body is the
	// response body between the upstream and the client.
	responseTrailers [][2]string
	body             hostcore.ResponseBody
	filterState      hostcore.FilterState
	access           hostcore.MapAccess
	// reply is the local reply asked for and not yet sent; sent is the reply as sent.
	reply *hostcore.LocalReply
	sent  *Response
	// inRequestHeaders is true while the stream's own proxy_on_request_headers runs.
	inRequestHeaders bool
	continued        bool
	// continuedFirst is true when proxy_continue_stream came before proxy_send_local_response in
	// the same callback: Envoy runs the deferred actions in order, so the request reaches the
	// upstream and the reply then replaces its response.
	continuedFirst bool
	// responseStarted is true once response headers have gone to the client: a local reply
	// then can only reset the stream.
	responseStarted bool
	finished        bool
	// resume delivers the outcome of a request the module held (OpenStream); settled keeps it
	// once read.
	resume  chan streamResult
	settled *streamResult
}

// Decision is the outcome of the request-headers phase.
type Decision struct {
	// Continue: forward the request upstream with RequestHeaders.
	Continue       bool
	RequestHeaders [][2]string
	// Reply is the module's local reply when it answered, as Envoy sends it. With Continue too,
	// the request went upstream first and the reply replaces the upstream's response.
	Reply *Response
}

// StartStream creates a stream context and runs proxy_on_request_headers. When the module sends
// a local reply, the reply is also passed through proxy_on_response_headers, as Envoy's encoder
// chain does, and the returned Decision carries the final reply. A request the module holds for
// a gRPC call is waited for (see StartStreamContext).
//
// On a VM that trapped, the failure policy applies (Options.FailurePolicy): ErrVMFailed
// (FailClosed, Envoy's 503), a stream that bypasses the module (FailOpen), or a reloaded VM
// (FailReload).
func (vm *VM) StartStream(req Request) (*Stream, Decision, error) {
	return vm.StartStreamContext(context.Background(), req)
}

// startStream runs the request phase; resume is set when the module holds the request for a
// call of its own.
func (vm *VM) startStream(req Request) (_ *Stream, _ Decision, resume chan streamResult, _ error) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	s := &Stream{vm: vm, req: req, requestHeaders: hostcore.LowerKeys(req.Headers)}
	if vm.failed != nil {
		switch vm.host.opts.FailurePolicy {
		case FailOpen:
			s.bypass = true
			return s, Decision{Continue: true, RequestHeaders: s.requestHeaders}, nil, nil
		case FailReload:
			vm.maybeReload()
		}
	}
	s.id, s.root, s.generation = vm.newContextID(), vm.rootID, vm.generation
	if _, err := vm.call("proxy_on_context_create", 0, uint64(s.id), uint64(s.root)); err != nil {
		return nil, Decision{}, nil, err
	}
	vm.streams[s.id] = s
	s.inRequestHeaders = true
	action, err := vm.streamCall(s, hostcore.RequestHeadersAccess, "proxy_on_request_headers", 0,
		uint64(s.id), uint64(len(s.requestHeaders)), boolArg(req.EndOfStream))
	s.inRequestHeaders = false
	if err != nil {
		return s, Decision{}, nil, err
	}
	if err := vm.takeMisuse(); err != nil {
		return s, Decision{}, nil, err
	}
	if s.reply != nil {
		// Envoy overrides the callback's result to Stop once a local reply was sent.
		d, err := s.sendReply(Decision{})
		return s, d, nil, err
	}
	if action != 0 {
		if resume, ok := vm.pause(s); ok {
			return s, Decision{}, resume, nil
		}
		return s, Decision{}, nil, ErrStreamPaused
	}
	s.continued = true
	return s, Decision{Continue: true, RequestHeaders: s.requestHeaders}, nil, nil
}

// sendReply sends the pending local reply as Envoy does: shaped (hostcore.LocalReply), then through
// proxy_on_response_headers and proxy_on_response_body (one chunk, the end of the stream) as the
// encoder chain passes it. d is the decision so far.
func (s *Stream) sendReply(d Decision) (Decision, error) {
	r := s.reply
	s.reply = nil
	headers, body := r.Shape(s.req.Headers)
	final, err := s.responsePhase(headers, len(body) == 0)
	if err != nil {
		return Decision{}, err
	}
	if len(body) > 0 {
		if body, err = s.bodyCallback(body, true); err != nil {
			return Decision{}, err
		}
	}
	status, _ := strconv.Atoi(headers[0][1])
	s.sent = &Response{Status: status, Headers: final, Body: body, LocalReply: true, Details: r.Details}
	d.Reply = s.sent
	return d, nil
}

// ResponseHeaders runs proxy_on_response_headers on the upstream's response headers and returns
// them as the module left them. status becomes the :status pseudo-header the module sees.
func (s *Stream) ResponseHeaders(status int, headers [][2]string, endOfStream bool) ([][2]string, error) {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	if s.bypass {
		return headers, nil
	}
	if s.generation != s.vm.generation {
		return nil, fmt.Errorf("%w: the stream's VM was replaced", ErrVMFailed)
	}
	final, err := s.responsePhase(append([][2]string{{":status", strconv.Itoa(status)}}, hostcore.LowerKeys(headers)...), endOfStream)
	if err == nil {
		err = s.vm.takeMisuse()
	}
	return final, err
}

func (s *Stream) responsePhase(headers [][2]string, endOfStream bool) ([][2]string, error) {
	s.responseHeaders = headers
	if _, err := s.vm.streamCall(s, hostcore.ResponseHeadersAccess, "proxy_on_response_headers", 0,
		uint64(s.id), uint64(len(headers)), boolArg(endOfStream)); err != nil {
		return nil, err
	}
	if r := s.reply; r != nil {
		// A local reply sent while encoding replaces the response before its headers have gone
		// out: Envoy sends it straight to the codec (sendDirectLocalReply), shaped the same way
		// but without another pass through the filters.
		s.reply = nil
		headers, body := r.Shape(s.req.Headers)
		status, _ := strconv.Atoi(headers[0][1])
		s.sent = &Response{Status: status, Headers: headers[1:], Body: body, LocalReply: true, Details: r.Details}
		s.responseStarted = true
		return nil, ErrReplacedResponse
	}
	s.responseStarted = true
	var out [][2]string
	for _, h := range s.responseHeaders {
		if h[0] != ":status" {
			out = append(out, h)
		}
	}
	return out, nil
}

// Finish ends the stream as Envoy's connection manager does: proxy_on_log (with read-only
// header maps), proxy_on_done, proxy_on_delete. It is safe to call more than once.
//
// Envoy ends every stream this way, whatever ended it: a complete response, a local reply (the
// module's or Envoy's own), or a reset by either side, before or during the response. The
// connection manager destroys the stream in doDeferredStreamDestroy (envoy
// source/common/http/conn_manager_impl.cc: access logs, then each filter's onDestroy), and the
// Wasm filter's onDestroy calls proxy_on_done and proxy_on_delete whenever the stream's VM
// context was created (source/extensions/common/wasm/context.cc, Context::onDestroy). So
// proxy_on_delete is the one callback a module can count on at the end of every stream it saw
// (on a VM that has not failed: Envoy calls nothing in a failed VM).
func (s *Stream) Finish() error {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	if s.finished || s.bypass || s.generation != s.vm.generation {
		s.finished = true
		return nil
	}
	s.finished = true
	s.responseStarted = true // whatever happens now, no reply can replace the response
	s.vm.unpause(s)
	defer func() {
		delete(s.vm.streams, s.id)
		s.vm.streamEnded(s.root)
	}()
	if _, err := s.vm.streamCall(s, hostcore.LogAccess, "proxy_on_log", 0, uint64(s.id)); err != nil {
		return err
	}
	if _, err := s.vm.streamCall(s, hostcore.MapAccess{}, "proxy_on_done", 1, uint64(s.id)); err != nil {
		return err
	}
	if _, err := s.vm.streamCall(s, hostcore.MapAccess{}, "proxy_on_delete", 0, uint64(s.id)); err != nil {
		return err
	}
	return s.vm.takeMisuse()
}

func (vm *VM) streamCall(s *Stream, access hostcore.MapAccess, name string, def uint64, args ...uint64) (uint64, error) {
	vm.current, s.access = s, access
	defer func() { vm.current, s.access = nil, hostcore.MapAccess{} }()
	return vm.call(name, def, args...)
}

// Upstream answers a forwarded request.
type Upstream func(requestHeaders [][2]string) (*Response, error)

// Do runs one whole request through the VM: request headers, the upstream if the module lets
// the request continue, response headers, the response body in one chunk and its trailers if
// it has any, and the end of the stream.
func (vm *VM) Do(req Request, upstream Upstream) (*Response, error) {
	s, d, err := vm.StartStream(req)
	if s != nil {
		defer s.Finish()
	}
	if err != nil {
		return nil, err
	}
	if !d.Continue {
		return d.Reply, nil
	}
	resp, err := upstream(d.RequestHeaders)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	if d.Reply != nil {
		return d.Reply, nil // the local reply replaced the upstream's response
	}
	headers, err := s.ResponseHeaders(resp.Status, resp.Headers, len(resp.Body) == 0 && resp.Trailers == nil)
	if errors.Is(err, ErrReplacedResponse) {
		return s.LocalReply(), nil
	}
	if err != nil {
		return nil, err
	}
	out := &Response{Status: resp.Status, Headers: headers}
	if len(resp.Body) > 0 {
		if out.Body, err = s.ForwardResponseBody(resp.Body, resp.Trailers == nil); err != nil {
			return nil, err
		}
	}
	if resp.Trailers != nil {
		held, trailers, err := s.ForwardResponseTrailers(resp.Trailers)
		if err != nil {
			return nil, err
		}
		out.Body, out.Trailers = append(out.Body, held...), trailers
	}
	return out, nil
}

func boolArg(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// maps are the stream's header maps, for hostcore.MapAccess.
func (s *Stream) maps() hostcore.StreamMaps {
	return hostcore.StreamMaps{Request: &s.requestHeaders, Response: &s.responseHeaders, ResponseTrailers: &s.responseTrailers}
}
