package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
	// LocalReply is true when the module answered (proxy_send_local_response).
	LocalReply bool
	// Details is the local reply's response code details (whitespace replaced by '_').
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

// LocalReply is the local reply the module sent on this stream, or nil.
func (s *Stream) LocalReply() *Response {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.reply
}

// mapAccess says which header maps the current callback may use.
type mapAccess struct{ request, response, readOnly bool }

// Stream is one HTTP stream's context in a VM.
type Stream struct {
	vm              *VM
	id              uint32
	root            uint32 // the root context the stream was created under
	req             Request
	requestHeaders  [][2]string
	responseHeaders [][2]string
	access          mapAccess
	reply           *Response
	continued       bool
	finished        bool
}

// Decision is the outcome of the request-headers phase.
type Decision struct {
	// Continue: forward the request upstream with RequestHeaders.
	Continue       bool
	RequestHeaders [][2]string
	// Reply is the module's local reply when it answered instead.
	Reply *Response
}

// StartStream creates a stream context and runs proxy_on_request_headers. When the module sends
// a local reply, the reply is also passed through proxy_on_response_headers, as Envoy's encoder
// chain does, and the returned Decision carries the final reply. A request the module holds for
// a gRPC call is waited for (see StartStreamContext).
func (vm *VM) StartStream(req Request) (*Stream, Decision, error) {
	return vm.StartStreamContext(context.Background(), req)
}

// startStream runs the request phase; resume is set when the module holds the request for a
// call of its own.
func (vm *VM) startStream(req Request) (_ *Stream, _ Decision, resume chan streamResult, _ error) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	s := &Stream{vm: vm, req: req, requestHeaders: lowerKeys(req.Headers)}
	s.id, s.root = vm.newContextID(), vm.rootID
	if _, err := vm.call("proxy_on_context_create", 0, uint64(s.id), uint64(s.root)); err != nil {
		return nil, Decision{}, nil, err
	}
	vm.streams[s.id] = s
	action, err := vm.streamCall(s, mapAccess{request: true}, "proxy_on_request_headers", 0,
		uint64(s.id), uint64(len(s.requestHeaders)), boolArg(req.EndOfStream))
	if err != nil {
		return s, Decision{}, nil, err
	}
	if s.reply != nil {
		// Envoy overrides the callback's result to Stop once a local reply was sent.
		reply := s.reply
		headers := append([][2]string{{":status", strconv.Itoa(reply.Status)}}, reply.Headers...)
		final, err := s.responsePhase(headers, len(reply.Body) == 0)
		if err != nil {
			return s, Decision{}, nil, err
		}
		reply.Headers = final
		return s, Decision{Reply: reply}, nil, nil
	}
	if action != 0 && !s.continued {
		if resume, ok := vm.pause(s); ok {
			return s, Decision{}, resume, nil
		}
		return s, Decision{}, nil, ErrStreamPaused
	}
	return s, Decision{Continue: true, RequestHeaders: s.requestHeaders}, nil, nil
}

// ResponseHeaders runs proxy_on_response_headers on the upstream's response headers and returns
// them as the module left them. status becomes the :status pseudo-header the module sees.
func (s *Stream) ResponseHeaders(status int, headers [][2]string, endOfStream bool) ([][2]string, error) {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.responsePhase(append([][2]string{{":status", strconv.Itoa(status)}}, lowerKeys(headers)...), endOfStream)
}

func (s *Stream) responsePhase(headers [][2]string, endOfStream bool) ([][2]string, error) {
	s.responseHeaders = headers
	before := s.reply
	if _, err := s.vm.streamCall(s, mapAccess{response: true}, "proxy_on_response_headers", 0,
		uint64(s.id), uint64(len(headers)), boolArg(endOfStream)); err != nil {
		return nil, err
	}
	if s.reply != before {
		// A local reply sent while encoding replaces the response, as Envoy's sendLocalReply
		// does before the response headers have gone out.
		return nil, ErrReplacedResponse
	}
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
func (s *Stream) Finish() error {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	if s.finished {
		return nil
	}
	s.finished = true
	s.vm.unpause(s)
	defer func() {
		delete(s.vm.streams, s.id)
		s.vm.streamEnded(s.root)
	}()
	if _, err := s.vm.streamCall(s, mapAccess{request: true, response: true, readOnly: true}, "proxy_on_log", 0, uint64(s.id)); err != nil {
		return err
	}
	if _, err := s.vm.streamCall(s, mapAccess{}, "proxy_on_done", 1, uint64(s.id)); err != nil {
		return err
	}
	_, err := s.vm.streamCall(s, mapAccess{}, "proxy_on_delete", 0, uint64(s.id))
	return err
}

func (vm *VM) streamCall(s *Stream, access mapAccess, name string, def uint64, args ...uint64) (uint64, error) {
	vm.current, s.access = s, access
	defer func() { vm.current, s.access = nil, mapAccess{} }()
	return vm.call(name, def, args...)
}

// Upstream answers a forwarded request.
type Upstream func(requestHeaders [][2]string) (*Response, error)

// Do runs one whole request through the VM: request headers, the upstream if the module lets
// the request continue, response headers, and the end of the stream.
func (vm *VM) Do(req Request, upstream Upstream) (*Response, error) {
	s, d, err := vm.StartStream(req)
	if s != nil {
		defer s.Finish()
	}
	if err != nil {
		return nil, err
	}
	if d.Reply != nil {
		return d.Reply, nil
	}
	resp, err := upstream(d.RequestHeaders)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	headers, err := s.ResponseHeaders(resp.Status, resp.Headers, len(resp.Body) == 0)
	if errors.Is(err, ErrReplacedResponse) {
		return s.LocalReply(), nil
	}
	if err != nil {
		return nil, err
	}
	resp.Headers = headers
	return resp, nil
}

func boolArg(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func lowerKeys(headers [][2]string) [][2]string {
	out := make([][2]string, len(headers))
	for i, h := range headers {
		out[i] = [2]string{lower(h[0]), h[1]}
	}
	return out
}
