package config

import "github.com/tollgate-proxy/tollgate/internal/wire"

// Envoy's proxy_grpc_call reads its service argument as a serialized GrpcService when it parses
// as protobuf, and as a cluster name only otherwise, so a global limit's cluster name must not be
// a well-formed protobuf message. The wire-format walk is package wire's, the one the module also
// reads the rate limit service's answers with.

// isProtobufMessage reports whether b is a well-formed protobuf message: a sequence of fields,
// where empty is the empty message.
func isProtobufMessage(b []byte) bool {
	for len(b) > 0 {
		_, wireType, _, _, rest, ok := wire.ReadProtoField(b)
		if !ok || wireType == wire.ProtoEndGroup {
			return false
		}
		b = rest
	}
	return true
}
