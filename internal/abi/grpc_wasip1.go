//go:build wasip1

package abi

import (
	"unsafe"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// gRPC callouts (spec "gRPC calls"; Envoy: source/extensions/common/wasm/context.cc grpcCall,
// onGrpcReceiveWrapper, onGrpcCloseWrapper; proxy-wasm-cpp-host src/exports.cc grpc_call).
//
// Envoy gives a call to the plugin's root context whichever context made it, and calls back the
// root context: proxy_on_grpc_receive(root, token, size) with the response in the
// GRPC_CALL_MESSAGE buffer when the call succeeded, or proxy_on_grpc_close(root, token, status)
// with the message in proxy_get_status when it failed (a unary call gets one or the other). The
// call outlives the stream that made it. So this layer keeps, per token, the stream and the Go
// callback: it makes the stream the effective context before calling back, so that the callback
// can continue the request or answer it, and when a stream is deleted it cancels the stream's
// calls, so that nothing is left waiting for a stream that is gone.

// Spec "gRPC calls": proxy_grpc_call.
//
//go:wasmimport env proxy_grpc_call
func proxyGrpcCall(service unsafe.Pointer, serviceSize uint32, serviceName unsafe.Pointer, serviceNameSize uint32,
	method unsafe.Pointer, methodSize uint32, metadata unsafe.Pointer, metadataSize uint32,
	message unsafe.Pointer, messageSize uint32, timeoutMilliseconds uint32, tokenPtr unsafe.Pointer) wire.Status

// Spec "gRPC calls": proxy_grpc_cancel.
//
//go:wasmimport env proxy_grpc_cancel
func proxyGrpcCancel(token uint32) wire.Status

// Spec "Context": proxy_set_effective_context.
//
//go:wasmimport env proxy_set_effective_context
func proxySetEffectiveContext(contextID uint32) wire.Status

// Spec "HTTP streams": proxy_continue_stream (ABI 0.2.x).
//
//go:wasmimport env proxy_continue_stream
func proxyContinueStream(streamType uint32) wire.Status

// Spec "Callouts": proxy_get_status, the status of the call being answered.
//
//go:wasmimport env proxy_get_status
func proxyGetStatus(codePtr, messagePtr, messageSizePtr unsafe.Pointer) wire.Status

// calls are this VM's pending gRPC calls by token; like the contexts, only touched from
// callbacks, which Envoy never runs concurrently on one VM.
var calls = map[uint32]pendingCall{}

// DispatchGrpcCall starts a unary gRPC call to cluster (the name Envoy knows it by) on behalf of
// the HTTP stream stream, and returns its token. callback runs once, later, with the stream as
// the effective context: with status 0 and the response message, or with the gRPC status and
// message of a failure (Envoy reports its own timeout as 14, UNAVAILABLE). If the stream ends
// first, the call is cancelled and callback runs with GrpcStatusStreamEnded during the stream's
// deletion. Stream 0 makes the call the plugin's own: it outlives every stream, and callback
// runs with the root context effective (SetEffectiveContext then selects a stream to continue or
// answer). An error means no call was started and callback will not run: Envoy answers
// ParseFailure for an unknown cluster.
func DispatchGrpcCall(stream uint32, cluster, service, method string, metadata [][2]string, message []byte,
	timeoutMilliseconds uint32, callback GrpcCallback) (uint32, error) {
	var encoded []byte
	if len(metadata) > 0 {
		encoded = wire.EncodePairs(metadata)
	}
	var token uint32
	st := proxyGrpcCall(stringData(cluster), uint32(len(cluster)), stringData(service), uint32(len(service)),
		stringData(method), uint32(len(method)), bytesData(encoded), uint32(len(encoded)),
		bytesData(message), uint32(len(message)), timeoutMilliseconds, unsafe.Pointer(&token))
	if st != wire.StatusOK {
		return 0, StatusError(st)
	}
	calls[token] = pendingCall{stream: stream, callback: callback}
	return token, nil
}

// ResumeHttpRequest lets a paused request go on upstream; Envoy does it once the current
// callback returns.
func ResumeHttpRequest() error { return StatusError(proxyContinueStream(0)) }

// Spec "gRPC calls": proxy_on_grpc_receive, the response of a successful call.
//
//go:wasmexport proxy_on_grpc_receive
func proxyOnGrpcReceive(rootID, token, responseSize uint32) {
	answerGrpcCall(callbackGrpcReceive, token, GrpcStatusOK, responseSize)
}

// Spec "gRPC calls": proxy_on_grpc_close, the end of a failed call.
//
//go:wasmexport proxy_on_grpc_close
func proxyOnGrpcClose(rootID, token, status uint32) {
	if status == GrpcStatusOK {
		// A unary call that closes with OK but no message: nothing was received. Each build
		// writes this out: as a shared function, inlined or not, it makes the module larger.
		status = GrpcStatusInternal
	}
	answerGrpcCall(callbackGrpcClose, token, status, 0)
}

// answerGrpcCall runs the callback of the call token names, if it still waits for its answer:
// for status OK with the response of responseSize bytes, else with status and the message of
// proxy_get_status.
func answerGrpcCall(which callbackID, token, status, responseSize uint32) {
	resetArena()
	running = which
	defer recovered()
	call, ok := takeCall(token)
	if !ok {
		return
	}
	var message string
	var response []byte
	if status != GrpcStatusOK {
		beginResult()
		if proxyGetStatus(ptrU32, ptrAddr, ptrSize) == wire.StatusOK {
			if b, st := hostResult(); st == wire.StatusOK {
				message = string(b)
			}
		}
	} else if responseSize > 0 {
		beginResult()
		st := proxyGetBufferBytes(BufferGrpcReceive, 0, responseSize, ptrAddr, ptrSize)
		if st == wire.StatusOK {
			response, st = hostResult()
		}
		if st != wire.StatusOK {
			status, message, response = GrpcStatusInternal, "cannot read the response: "+StatusError(st).Error(), nil
		}
	}
	call.callback(status, message, response)
}
