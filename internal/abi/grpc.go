package abi

// GrpcCallback receives the outcome of a gRPC call started with DispatchGrpcCall: status
// GrpcStatusOK and the response message, or another gRPC status and its message.
type GrpcCallback func(status uint32, message string, response []byte)

// gRPC status codes (grpc/grpc doc/statuscodes.md) the filter tells apart.
const (
	GrpcStatusOK               uint32 = 0
	GrpcStatusCancelled        uint32 = 1
	GrpcStatusDeadlineExceeded uint32 = 4
	GrpcStatusInternal         uint32 = 13
	GrpcStatusUnavailable      uint32 = 14
	// GrpcStatusStreamEnded is not a gRPC status: this layer reports it for a call whose stream
	// ended before the answer came (the call is cancelled).
	GrpcStatusStreamEnded uint32 = 0xffff_ffff
)

// BufferGrpcReceive is proxy_buffer_type_t GRPC_CALL_MESSAGE: a gRPC call's response, readable
// during proxy_on_grpc_receive.
const BufferGrpcReceive BufferType = 5
