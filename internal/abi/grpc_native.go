//go:build !wasip1

package abi

import "github.com/tollgate-proxy/tollgate/internal/wire"

// gRPC callouts natively, as grpc_wasip1.go makes them: the host starts the call and later
// answers it on the root context (GrpcReceive or GrpcClose); this layer remembers each call's
// stream and callback, makes the stream the effective context before calling back, and cancels
// a stream's calls when the stream is deleted.

// pendingCall is a gRPC call waiting for its answer.
type pendingCall struct {
	stream   uint32
	callback GrpcCallback
}

// DispatchGrpcCall starts a unary gRPC call on behalf of stream (0: the plugin's own); see the
// wasip1 build for the callback's contract.
func DispatchGrpcCall(stream uint32, cluster, service, method string, metadata [][2]string, message []byte,
	timeoutMilliseconds uint32, callback GrpcCallback) (uint32, error) {
	token, st := nativeHost().GrpcCall(cluster, service, method, metadata, message, timeoutMilliseconds)
	if st != wire.StatusOK {
		return 0, statusErr(st)
	}
	native.calls[token] = pendingCall{stream: stream, callback: callback}
	return token, nil
}

// CancelGrpcCall cancels a pending call; its callback will not run.
func CancelGrpcCall(token uint32) error {
	host := nativeHost()
	if _, ok := native.calls[token]; !ok {
		return statusErr(wire.StatusNotFound)
	}
	delete(native.calls, token)
	return statusErr(host.GrpcCancel(token))
}

// PendingGrpcCalls is the number of calls waiting for their answer.
func PendingGrpcCalls() int {
	if native == nil {
		return 0
	}
	return len(native.calls)
}

// ResumeHttpRequest lets a paused request go on upstream.
func ResumeHttpRequest() error { return statusErr(nativeHost().ContinueRequest()) }

// SetEffectiveContext makes a stream the context of the host calls that follow, for the rest of
// the current callback.
func SetEffectiveContext(contextID uint32) error {
	return statusErr(nativeHost().SetEffectiveContext(contextID))
}

// GrpcReceive is proxy_on_grpc_receive: the response of a successful call.
func (v *NativeVM) GrpcReceive(rootID, token uint32, response []byte) {
	defer func() { recoverIn("proxy_on_grpc_receive", recover()) }()
	if call, ok := v.takeCall(token); ok {
		call.callback(GrpcStatusOK, "", response)
	}
}

// GrpcClose is proxy_on_grpc_close: the end of a failed call, with its status message.
func (v *NativeVM) GrpcClose(rootID, token, status uint32, message string) {
	defer func() { recoverIn("proxy_on_grpc_close", recover()) }()
	call, ok := v.takeCall(token)
	if !ok {
		return
	}
	if status == GrpcStatusOK {
		// A unary call that closes with OK but no message: nothing was received.
		status = GrpcStatusInternal
	}
	call.callback(status, message, nil)
}

// takeCall forgets a call and makes its stream the effective context; false if the call is
// unknown (cancelled) or its stream is gone.
func (v *NativeVM) takeCall(token uint32) (pendingCall, bool) {
	call, ok := v.calls[token]
	if !ok {
		return call, false
	}
	delete(v.calls, token)
	if call.stream == 0 {
		return call, true
	}
	if _, alive := v.streams[call.stream]; !alive || v.host.SetEffectiveContext(call.stream) != wire.StatusOK {
		return call, false
	}
	return call, true
}

// endStreamCalls cancels the calls of a stream being deleted and tells their callbacks.
func (v *NativeVM) endStreamCalls(stream uint32) {
	for token, call := range v.calls {
		if call.stream != stream {
			continue
		}
		delete(v.calls, token)
		_ = v.host.GrpcCancel(token)
		call.callback(GrpcStatusStreamEnded, "the request ended before the call was answered", nil)
	}
}
