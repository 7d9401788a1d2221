package abitest

import (
	"slices"
	"sort"

	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// Call is a gRPC call the plugin made and the host has not answered.
type Call struct {
	Token                    uint32
	Cluster, Service, Method string
	Metadata                 [][2]string
	Message                  []byte
	TimeoutMilliseconds      uint32
	// Context is the effective context when the call was made: a stream's id, or the root's.
	Context uint32
}

type grpcCalls struct {
	ids     hostcore.GrpcCallIDs
	pending map[uint32]*Call
}

// Calls are the pending gRPC calls, oldest first.
func (h *Host) Calls() []*Call {
	out := make([]*Call, 0, len(h.grpc.pending))
	for _, c := range h.grpc.pending {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Token < out[j].Token })
	return out
}

// Answer answers a pending call with a response message (proxy_on_grpc_receive on the root
// context), then carries out what the callback asked for the streams.
func (h *Host) Answer(token uint32, response []byte) {
	h.t.Helper()
	h.take(token)
	h.CallAsRoot(func() { h.vm.GrpcReceive(rootID, token, response) })
}

// Fail ends a pending call with a gRPC status other than OK and its message
// (proxy_on_grpc_close on the root context), then carries out what the callback asked for the
// streams.
func (h *Host) Fail(token, status uint32, message string) {
	h.t.Helper()
	h.take(token)
	h.CallAsRoot(func() { h.vm.GrpcClose(rootID, token, status, message) })
}

// TimeOut ends a pending call as Envoy's own timeout does: UNAVAILABLE, "upstream request
// timeout".
func (h *Host) TimeOut(token uint32) {
	h.t.Helper()
	h.Fail(token, hostcore.GrpcUnavailable, hostcore.GrpcTimeoutMessage)
}

func (h *Host) take(token uint32) {
	h.t.Helper()
	if _, ok := h.grpc.pending[token]; !ok {
		h.t.Fatalf("abitest: no pending gRPC call %d", token)
	}
	delete(h.grpc.pending, token)
}

// GrpcCall is proxy_grpc_call: a cluster the host does not know fails to start (ParseFailure).
func (c hostcalls) GrpcCall(cluster, service, method string, metadata [][2]string, message []byte, timeoutMilliseconds uint32) (uint32, wire.Status) {
	if !slices.Contains(c.opts.GrpcClusters, cluster) {
		return 0, hostcore.UnknownClusterStatus
	}
	if c.grpc.pending == nil {
		c.grpc.pending = map[uint32]*Call{}
	}
	call := &Call{Token: c.grpc.ids.Next(), Cluster: cluster, Service: service, Method: method,
		Metadata: append([][2]string(nil), metadata...), Message: append([]byte(nil), message...),
		TimeoutMilliseconds: timeoutMilliseconds, Context: rootID}
	if c.current != nil {
		call.Context = c.current.id
	}
	c.grpc.pending[call.Token] = call
	return call.Token, wire.StatusOK
}

// GrpcCancel is proxy_grpc_cancel: the call is forgotten and gets no callback.
func (c hostcalls) GrpcCancel(token uint32) wire.Status {
	if st, isCall := hostcore.CancelStatus(token); !isCall {
		return st
	}
	if _, ok := c.grpc.pending[token]; !ok {
		return wire.StatusNotFound
	}
	delete(c.grpc.pending, token)
	return wire.StatusOK
}
