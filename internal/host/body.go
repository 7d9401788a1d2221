package host

import (
	"fmt"

	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// The response's body and trailers through the module, as Envoy passes them (envoy
// source/extensions/common/wasm/context.cc encodeData, encodeTrailers, getBuffer; the buffer
// rules are hostcore.ResponseBody's). Envoy calls proxy_on_response_body once per chunk it
// encodes, end_of_stream true on the last one unless trailers follow, and then
// proxy_on_response_trailers. A stream reset mid-body (the client went away) gets no further body
// call: Finish ends it, and the module sees proxy_on_delete.

// ResponseBody runs proxy_on_response_body on a chunk of the upstream's response body, after
// ResponseHeaders; endOfStream is true on the last chunk of a response without trailers.
// ForwardResponseBody also says what goes on to the client, which differs from the chunk when
// the module holds data.
func (s *Stream) ResponseBody(chunk []byte, endOfStream bool) error {
	_, err := s.ForwardResponseBody(chunk, endOfStream)
	return err
}

// ForwardResponseBody is ResponseBody returning what goes on to the client now: the chunk when
// the module continues; nothing while it holds the body (StopIterationAndBuffer), and all it
// held when it continues. Holding more than Envoy's buffer limit, or stopping the last chunk,
// is an error (hostcore.ErrResponseHeldTooMuch, hostcore.ErrResponseStoppedAtEnd): the stream
// cannot be completed. The result may share memory with chunk.
func (s *Stream) ForwardResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	if s.bypass {
		return chunk, nil
	}
	if err := s.checkResponsePhase(); err != nil {
		return nil, err
	}
	forward, err := s.bodyCallback(chunk, endOfStream)
	if err != nil {
		return nil, err
	}
	return forward, s.vm.takeMisuse()
}

// bodyCallback runs proxy_on_response_body on a chunk and returns what goes on to the client.
func (s *Stream) bodyCallback(chunk []byte, endOfStream bool) ([]byte, error) {
	size := s.body.Deliver(chunk)
	action, err := s.vm.streamCall(s, hostcore.MapAccess{}, "proxy_on_response_body", 0,
		uint64(s.id), uint64(size), boolArg(endOfStream))
	if err != nil {
		return nil, err
	}
	return s.body.Settle(uint32(action), endOfStream)
}

// ResponseTrailers runs proxy_on_response_trailers on the upstream's trailers, after the last
// body chunk (whose endOfStream was false), and returns them as the module left them.
func (s *Stream) ResponseTrailers(trailers [][2]string) ([][2]string, error) {
	_, final, err := s.ForwardResponseTrailers(trailers)
	return final, err
}

// ForwardResponseTrailers is ResponseTrailers also returning the body data the module held,
// which goes on to the client before the trailers once the callback continues.
func (s *Stream) ForwardResponseTrailers(trailers [][2]string) (held []byte, final [][2]string, err error) {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	if s.bypass {
		return nil, trailers, nil
	}
	if err := s.checkResponsePhase(); err != nil {
		return nil, nil, err
	}
	s.responseTrailers = hostcore.LowerKeys(trailers)
	action, err := s.vm.streamCall(s, hostcore.ResponseTrailersAccess, "proxy_on_response_trailers", 0,
		uint64(s.id), uint64(len(s.responseTrailers)))
	if err != nil {
		return nil, nil, err
	}
	if action != 0 {
		return nil, nil, hostcore.ErrResponseStoppedAtEnd
	}
	return s.body.Release(), s.responseTrailers, s.vm.takeMisuse()
}

// checkResponsePhase refuses a body or trailers callback for a stream that cannot have one: its
// VM was replaced, it ended, or a local reply replaced its response.
func (s *Stream) checkResponsePhase() error {
	switch {
	case s.generation != s.vm.generation:
		return fmt.Errorf("%w: the stream's VM was replaced", ErrVMFailed)
	case s.finished:
		return fmt.Errorf("the stream %d has ended: Envoy calls nothing more for it", s.id)
	case s.sent != nil:
		return fmt.Errorf("a local reply replaced the response of stream %d: the upstream's body does not pass", s.id)
	}
	return nil
}

// FilterState is what the module set for a property of the stream (proxy_set_property): the
// filter state Envoy keeps as "wasm."+name, which an access log prints as
// %FILTER_STATE(wasm.<name>:PLAIN)%. It stays readable after Finish, as Envoy logs after the
// filters are done.
func (s *Stream) FilterState(name string) (string, bool) {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.filterState.Property(name)
}

// proxy_set_property(path, path_size, value, value_size): the stream's filter state
// (hostcore.FilterState); NotFound without a stream context, whose stream info Envoy keeps it in.
func proxySetProperty(vm *VM, stack []uint64) {
	path, value, ok := vm.readNameValue(stack)
	if !ok {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	s := vm.current
	if s == nil {
		ret(stack, wire.StatusNotFound)
		return
	}
	s.filterState.SetProperty(path, value)
	ret(stack, wire.StatusOK)
}
