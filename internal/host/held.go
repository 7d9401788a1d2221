package host

import (
	"context"
	"errors"
)

// Held streams. A module may stop a request in proxy_on_request_headers and let it go on later
// from another callback: a gRPC answer (grpc.go), or a tick of its root context, which is how a
// module paces requests. Envoy keeps such a request waiting in the filter chain (the decoder
// filter returned StopAllIterationAndWatermark, source/extensions/common/wasm/context.cc
// convertFilterHeadersStatus) until the module continues it (proxy_set_effective_context with
// the stream's id, then proxy_continue_stream(HTTP_REQUEST), which Envoy runs once the callback
// has returned: context.cc Context::continueStream posts continueDecoding) or answers it
// (proxy_send_local_response), or until the client goes away. A stopped request under a root
// context without a timer, and without a call of its own in flight, could never be resumed: that
// stays ErrStreamPaused.
//
// The client going away while the request is held is a downstream reset: Envoy's connection
// manager destroys the stream (source/common/http/conn_manager_impl.cc onResetStream, then
// doDeferredStreamDestroy: the access log, then destroyFilters), which reaches the module as
// proxy_on_log, proxy_on_done and proxy_on_delete (context.cc Context::log and onDestroy; the
// filter's onDestroy). Reset does exactly that. A continue the module asks for after that is
// refused: proxy_set_effective_context answers BadArgument for a context that is gone.

// ErrStreamHeld is returned by Settled while the module still holds the request.
var ErrStreamHeld = errors.New("the module still holds the request")

// OpenStream is StartStream without waiting: a request the module holds comes back with held
// true and an empty Decision; Settled tells later what became of it (after Tick, or a gRPC
// answer), Reset ends it as a client that went away. Tests use it with a manual clock.
func (vm *VM) OpenStream(req Request) (s *Stream, d Decision, held bool, err error) {
	s, d, resume, err := vm.startStream(req)
	if resume == nil {
		return s, d, false, err
	}
	s.resume = resume
	return s, Decision{}, true, nil
}

// Settled is the Decision of a stream opened with OpenStream: ErrStreamHeld while the module
// still holds it, ErrStreamReset once it was reset while held.
func (s *Stream) Settled() (Decision, error) {
	if s.settled != nil {
		return s.settled.decision, s.settled.err
	}
	if s.resume == nil {
		return Decision{}, errors.New("the stream was not held (see OpenStream's result)")
	}
	select {
	case r := <-s.resume:
		s.settled = &r
		return r.decision, r.err
	default:
		return Decision{}, ErrStreamHeld
	}
}

// Wait waits until a stream opened with OpenStream is settled (a tick or a gRPC answer resumed
// or answered it) or ctx ends; then the stream is reset, as when the client goes away.
func (s *Stream) Wait(ctx context.Context) (Decision, error) {
	if s.settled != nil || s.resume == nil {
		return s.Settled()
	}
	select {
	case r := <-s.resume:
		s.settled = &r
		return r.decision, r.err
	case <-ctx.Done():
		if err := s.Reset(); err != nil {
			return Decision{}, err
		}
		return s.Settled()
	}
}

// Held reports whether the module holds the stream's request: it stopped it and has neither
// continued nor answered it yet.
func (s *Stream) Held() bool {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	_, held := s.vm.grpc.paused[s.id]
	return held
}

// Reset ends the stream as Envoy does when the client goes away (a downstream reset): a held
// request is dropped (its wait ends with ErrStreamReset), then proxy_on_log, proxy_on_done and
// proxy_on_delete run as for any stream end. Safe to call more than once, and after Finish.
func (s *Stream) Reset() error { return s.Finish() }

// canResume reports whether something could ever resume a request the module stopped: a gRPC
// call of the VM still in flight (its callback may select any stream with
// proxy_set_effective_context), or a timer of the stream's root context.
func (vm *VM) canResume(s *Stream) bool {
	return len(vm.grpc.calls) > 0 || vm.tickPeriods[s.root] > 0
}
