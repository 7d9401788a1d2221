//go:build !wasip1

package abi

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// The SDK's emulator has no gRPC callouts: natively a call fails to start, as in an Envoy that
// does not know the cluster, and the filter's failure mode applies. The module's gRPC path is
// tested in the Envoy-faithful host (e2e).

// DispatchGrpcCall reports that no call can be started.
func DispatchGrpcCall(stream uint32, cluster, service, method string, metadata [][2]string, message []byte,
	timeoutMilliseconds uint32, callback GrpcCallback) (uint32, error) {
	return 0, types.ErrorStatusNotFound
}

// CancelGrpcCall has no call to cancel.
func CancelGrpcCall(token uint32) error { return types.ErrorStatusNotFound }

// PendingGrpcCalls is always 0.
func PendingGrpcCalls() int { return 0 }

// ResumeHttpRequest continues the paused request in the emulator.
func ResumeHttpRequest() error { return proxywasm.ResumeHttpRequest() }

// SetEffectiveContext makes a stream the emulator's current context.
func SetEffectiveContext(contextID uint32) error { return proxywasm.SetEffectiveContext(contextID) }
