//go:build !wasip1

package abi

import "github.com/tollgate-proxy/tollgate/internal/wire"

// gRPC callouts natively, as grpc_wasip1.go makes them: the host starts the call and later
// answers it on the root context (GrpcReceive or GrpcClose); this layer remembers each call's
// stream and callback, makes the stream the effective context before calling back, and cancels
// a stream's calls when the stream is deleted.

// calls are the running VM's pending gRPC calls by token (nil without one): StartNativeVM
// starts them empty, as a new VM's.
var calls map[uint32]pendingCall

// DispatchGrpcCall starts a unary gRPC call on behalf of stream (0: the plugin's own); see the
// wasip1 build for the callback's contract.
func DispatchGrpcCall(stream uint32, cluster, service, method string, metadata [][2]string, message []byte,
	timeoutMilliseconds uint32, callback GrpcCallback) (uint32, error) {
	token, st := nativeHost().GrpcCall(cluster, service, method, metadata, message, timeoutMilliseconds)
	if st != wire.StatusOK {
		return 0, StatusError(st)
	}
	calls[token] = pendingCall{stream: stream, callback: callback}
	return token, nil
}

// ResumeHttpRequest lets a paused request go on upstream.
func ResumeHttpRequest() error { return StatusError(nativeHost().ContinueRequest()) }

// GrpcReceive is proxy_on_grpc_receive: the response of a successful call.
func (v *NativeVM) GrpcReceive(rootID, token uint32, response []byte) {
	defer func() { recoverIn("proxy_on_grpc_receive", recover()) }()
	if call, ok := takeCall(token); ok {
		call.callback(GrpcStatusOK, "", response)
	}
}

// GrpcClose is proxy_on_grpc_close: the end of a failed call, with its status message.
func (v *NativeVM) GrpcClose(rootID, token, status uint32, message string) {
	defer func() { recoverIn("proxy_on_grpc_close", recover()) }()
	call, ok := takeCall(token)
	if !ok {
		return
	}
	if status == GrpcStatusOK {
		// A unary call that closes with OK but no message: nothing was received. Each build
		// writes this out: as a shared function, inlined or not, it makes the module larger.
		status = GrpcStatusInternal
	}
	call.callback(status, message, nil)
}

// proxyGrpcCancel and proxySetEffectiveContext are the host functions of the same names, for the
// bookkeeping both builds share (dispatch.go).
func proxyGrpcCancel(token uint32) wire.Status { return nativeHost().GrpcCancel(token) }

func proxySetEffectiveContext(contextID uint32) wire.Status {
	return nativeHost().SetEffectiveContext(contextID)
}
