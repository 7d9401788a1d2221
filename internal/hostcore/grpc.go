package hostcore

import "github.com/tollgate-proxy/tollgate/internal/wire"

// gRPC callouts as Envoy numbers and ends them (envoy source/extensions/common/wasm/context.cc
// grpcCall, grpcCancel; proxy-wasm-cpp-host include/proxy-wasm/wasm.h nextGrpcCallId,
// src/exports.cc grpc_call, grpc_cancel).

// GrpcCallIDs hands out a VM's gRPC call ids: 5, 9, 13, …; the low two bits 01 mark a call (10
// a stream), and they stay 01 when the counter wraps.
type GrpcCallIDs struct{ last uint32 }

// Next is the next call id.
func (g *GrpcCallIDs) Next() uint32 {
	g.last += 4
	if g.last&3 != 1 {
		g.last = 5
	}
	return g.last
}

// CancelStatus is what proxy_grpc_cancel answers for a token before looking it up: a stream id
// (low bits 10) is never a pending call, NotFound; anything but a call id is BadArgument. ok is
// true for a call id, which is then NotFound unless pending.
func CancelStatus(token uint32) (st wire.Status, ok bool) {
	switch token & 3 {
	case 1:
		return wire.StatusOK, true
	case 2:
		return wire.StatusNotFound, false
	}
	return wire.StatusBadArgument, false
}

// What a module is told of a call that did not succeed, by proxy_on_grpc_close and
// proxy_get_status.
const (
	// GrpcUnavailable is the status of a call Envoy could not send or timed out.
	GrpcUnavailable uint32 = 14
	// GrpcTimeoutMessage is Envoy's own timeout: the async client's router answers a timed-out
	// request with a local 504, which gRPC maps to UNAVAILABLE.
	GrpcTimeoutMessage = "upstream request timeout"
	// GrpcNoHealthyUpstream is the router's answer for a cluster without a healthy host.
	GrpcNoHealthyUpstream = "no healthy upstream"
	// GrpcClusterNotAvailable is the async client's answer for an unknown cluster named in a
	// GrpcService (source/common/grpc/async_client_impl.cc initialize).
	GrpcClusterNotAvailable = "Cluster not available"
)

// UnknownClusterStatus is what proxy_grpc_call answers for a service argument that names an
// unknown cluster by its name alone (not a serialized GrpcService): ParseFailure, no call.
const UnknownClusterStatus = wire.StatusParseFailure
