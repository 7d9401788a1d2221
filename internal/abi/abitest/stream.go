package abitest

import (
	"strconv"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/hostcore"
)

// Request is what Envoy hands the filter chain for one HTTP request.
type Request struct {
	// Headers include the pseudo-headers the test wants the plugin to see (:method, :path…).
	Headers [][2]string
	// SourceAddress and DestinationAddress have ports: the source.address and
	// destination.address attributes.
	SourceAddress, DestinationAddress string
	// Attributes are further attributes by dotted path, such as "xds.route_name".
	Attributes map[string]string
	// EndOfStream is true for a request without a body.
	EndOfStream bool
	// UnreadableHeaders makes every read of the request's headers as a whole
	// (proxy_get_header_map_pairs) fail with InternalFailure: the plugin's way for headers it
	// cannot read, which Envoy's host gives no test a way to reach.
	UnreadableHeaders bool
}

// Reply is a local reply as Envoy sent it.
type Reply struct {
	// Status and Headers (without :status) are as Envoy shaped them (hostcore.LocalReply): a
	// gRPC request gets a trailers-only 200.
	Status  int
	Headers [][2]string
	Body    []byte
	// Details are the response code details, whitespace replaced by '_'.
	Details string
	// AskedStatus and GrpcStatus are what the plugin passed to proxy_send_local_response.
	AskedStatus uint32
	GrpcStatus  int32
}

// Header returns the first value of a reply header (name lower-case), or "".
func (r *Reply) Header(name string) string {
	v, _ := hostcore.HeaderValue(r.Headers, name)
	return v
}

// Stream is one HTTP stream's context.
type Stream struct {
	h               *Host
	id              uint32
	req             Request
	requestHeaders  [][2]string
	responseHeaders [][2]string
	// responseTrailers are the upstream's trailers (ResponseTrailers); body is the response
	// body between the upstream and the client, bodySent what of it went on.
	responseTrailers [][2]string
	body             hostcore.ResponseBody
	bodySent         []byte
	filterState      hostcore.FilterState
	access           hostcore.MapAccess
	action           types.Action // of proxy_on_request_headers
	// paused: proxy_on_request_headers stopped the request without answering it.
	paused           bool
	inRequestHeaders bool
	continued        bool
	continuedAt      int64
	// continuedFirst: the request was continued before a local reply in the same callback.
	continuedFirst  bool
	forwarded       [][2]string
	pending         *hostcore.LocalReply // asked for, sent when the callback returns
	reply           *Reply
	responseStarted bool
	ended           bool
}

// NewStream creates a stream context (proxy_on_context_create under the plugin's root).
func (h *Host) NewStream() *Stream {
	h.lastID++
	s := &Stream{h: h, id: h.lastID}
	h.streams[s.id] = s
	h.vm.ContextCreate(s.id, rootID)
	return s
}

// Request creates a stream and delivers its request headers.
func (h *Host) Request(req Request) (*Stream, types.Action) {
	s := h.NewStream()
	return s, s.RequestHeaders(req)
}

// Stream returns a live stream by its context id.
func (h *Host) Stream(id uint32) (*Stream, bool) {
	s, ok := h.streams[id]
	return s, ok
}

// ID is the stream's context id.
func (s *Stream) ID() uint32 { return s.id }

// RequestHeaders delivers the request headers (proxy_on_request_headers) and returns the
// plugin's action. A local reply it asked for is sent when it returns (through
// proxy_on_response_headers, as Envoy's encoder chain passes it); Continue forwards the request.
func (s *Stream) RequestHeaders(req Request) types.Action {
	s.req, s.requestHeaders = req, hostcore.LowerKeys(req.Headers)
	s.inRequestHeaders = true
	s.action = s.call(hostcore.RequestHeadersAccess, func() types.Action {
		return s.h.vm.RequestHeaders(s.id, len(s.requestHeaders), req.EndOfStream)
	})
	s.inRequestHeaders = false
	switch {
	case s.pending != nil:
		// Envoy overrides the callback's result to Stop once a local reply was sent.
		s.sendReply()
	case s.action == types.ActionContinue:
		s.continued, s.continuedAt = true, s.h.mono
		s.forwarded = append([][2]string(nil), s.requestHeaders...)
	default:
		s.paused = true
	}
	return s.action
}

// ResponseHeaders delivers the upstream's response headers (proxy_on_response_headers), with
// status as :status, and returns the plugin's action. A local reply asked for now replaces the
// response (Envoy sends it straight to the codec, shaped the same way).
func (s *Stream) ResponseHeaders(status int, headers [][2]string) types.Action {
	s.responseHeaders = append([][2]string{{":status", strconv.Itoa(status)}}, hostcore.LowerKeys(headers)...)
	action := s.responsePhase()
	if r := s.pending; r != nil {
		s.pending = nil
		shaped, body := r.Shape(s.requestHeaders)
		s.reply = newReply(r, shaped, body)
	}
	return action
}

func (s *Stream) responsePhase() types.Action {
	action := s.call(hostcore.ResponseHeadersAccess, func() types.Action {
		return s.h.vm.ResponseHeaders(s.id, len(s.responseHeaders), false)
	})
	s.responseStarted = true
	return action
}

// ResponseBody delivers a chunk of the upstream's response body (proxy_on_response_body) and
// returns the plugin's action. During the callback the body buffer is the chunk, or everything
// the plugin held with StopIterationAndBuffer (hostcore.ResponseBody); no header map is
// available. endOfStream is true on the last chunk of a response without trailers. Stopping the
// last chunk is a misuse: Envoy would wait for a proxy_continue_stream this host does not serve.
func (s *Stream) ResponseBody(chunk []byte, endOfStream bool) types.Action {
	s.requireLive("ResponseBody")
	size := s.body.Deliver(chunk)
	action := s.call(hostcore.MapAccess{}, func() types.Action {
		return s.h.vm.ResponseBody(s.id, size, endOfStream)
	})
	forward, err := s.body.Settle(uint32(action), endOfStream)
	if err != nil {
		s.h.misuse(err.Error())
	}
	s.bodySent = append(s.bodySent, forward...)
	return action
}

// ResponseTrailers delivers the upstream's trailers (proxy_on_response_trailers), after a last
// body chunk whose endOfStream was false, and returns the plugin's action; the map is readable
// from this callback on. Held body data goes on when it continues.
func (s *Stream) ResponseTrailers(trailers [][2]string) types.Action {
	s.requireLive("ResponseTrailers")
	s.responseTrailers = hostcore.LowerKeys(trailers)
	action := s.call(hostcore.ResponseTrailersAccess, func() types.Action {
		return s.h.vm.ResponseTrailers(s.id, len(s.responseTrailers))
	})
	if action != types.ActionContinue {
		s.h.misuse(hostcore.ErrResponseStoppedAtEnd.Error())
		return action
	}
	s.bodySent = append(s.bodySent, s.body.Release()...)
	return action
}

// requireLive fails the test when a stream that ended is given more of its response: Envoy
// calls nothing more for a stream once it is deleted (a reset mid-body ends it this way).
func (s *Stream) requireLive(what string) {
	if s.ended {
		s.h.t.Helper()
		s.h.t.Fatalf("abitest: %s on stream %d after End: Envoy calls nothing more for a deleted stream", what, s.id)
	}
}

// ResponseBodySent is the response body that went on to the client so far.
func (s *Stream) ResponseBodySent() []byte { return s.bodySent }

// FilterState is the value the plugin set for a property of the stream (proxy_set_property),
// which Envoy keeps as the filter state "wasm."+name.
func (s *Stream) FilterState(name string) (string, bool) { return s.filterState.Property(name) }

// End ends the stream: proxy_on_delete, which Envoy calls however the stream ends (a complete
// response, a local reply, a reset by either side; envoy context.cc Context::onDestroy). Safe
// to call more than once.
func (s *Stream) End() {
	if s.ended {
		return
	}
	s.ended, s.responseStarted = true, true
	s.call(hostcore.MapAccess{}, func() types.Action { s.h.vm.Delete(s.id); return types.ActionContinue })
	delete(s.h.streams, s.id)
}

// call runs a callback of the stream with it as the effective context.
func (s *Stream) call(access hostcore.MapAccess, callback func() types.Action) types.Action {
	s.h.current, s.access = s, access
	defer func() { s.h.current, s.access = nil, hostcore.MapAccess{} }()
	return callback()
}

// settle carries out, after a root-context callback, what it asked for the stream: a local
// reply (through the response phase), continuing, or both in the order asked.
func (s *Stream) settle() {
	s.access = hostcore.MapAccess{}
	if s.pending != nil {
		s.sendReply()
	}
}

// sendReply sends the pending local reply as Envoy does: shaped, then through
// proxy_on_response_headers and proxy_on_response_body.
func (s *Stream) sendReply() {
	r := s.pending
	s.pending = nil
	shaped, body := r.Shape(s.requestHeaders)
	s.responseHeaders = shaped
	s.responsePhase()
	final := s.responseHeaders
	if len(body) > 0 {
		// The reply's body passes through the encoder chain too, as its one and last chunk.
		s.ResponseBody(body, true)
		body = s.bodySent
	}
	s.reply = newReply(r, final, body)
	if s.pending != nil {
		// A second reply while the first passed through the response phase.
		s.pending = nil
		s.h.misuse("a local reply while the stream's own local reply was being sent")
	}
}

func newReply(r *hostcore.LocalReply, shaped [][2]string, body []byte) *Reply {
	status, _ := strconv.Atoi(shaped[0][1])
	return &Reply{Status: status, Headers: append([][2]string(nil), shaped[1:]...), Body: body, Details: r.Details,
		AskedStatus: r.Status, GrpcStatus: int32(r.GrpcStatus)}
}

// Action is what proxy_on_request_headers returned.
func (s *Stream) Action() types.Action { return s.action }

// Paused reports whether proxy_on_request_headers stopped the request without answering it.
func (s *Stream) Paused() bool { return s.paused }

// Continued reports whether the request went on upstream: its request headers returned
// Continue, or a later callback continued it (proxy_continue_stream).
func (s *Stream) Continued() bool { return s.continued }

// ContinuedAt is the monotonic clock when the request went on.
func (s *Stream) ContinuedAt() int64 { return s.continuedAt }

// Forwarded are the request headers as the request went upstream; nil if it did not.
func (s *Stream) Forwarded() [][2]string { return s.forwarded }

// Reply is the local reply Envoy sent for the stream, or nil. When the request also went on
// (Continued), the reply replaced the upstream's response.
func (s *Stream) Reply() *Reply { return s.reply }

// ResponseHeadersSent are the response headers as the plugin left them (with :status): the
// upstream's after ResponseHeaders, or the local reply's.
func (s *Stream) ResponseHeadersSent() [][2]string { return s.responseHeaders }

// ResponseHeader is the first value of a response header as the plugin left it, or "".
func (s *Stream) ResponseHeader(name string) string {
	v, _ := hostcore.HeaderValue(s.responseHeaders, name)
	return v
}

// Ended reports whether End ran.
func (s *Stream) Ended() bool { return s.ended }
