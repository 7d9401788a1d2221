package config

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// isProtobufMessage agrees with protobuf-go: a message with no known fields parses exactly when
// its bytes are well-formed fields, which is the test Envoy's proxy_grpc_call applies before it
// would read a cluster name as a serialized GrpcService.
func FuzzIsProtobufMessage(f *testing.F) {
	for _, seed := range []string{
		"", "hx", "ratelimit", "rls", "outbound|8081||ratelimit.default.svc.cluster.local",
		"\x08\x01",                // field 1, varint 1
		"\x08",                    // varint value missing
		"\x00\x01",                // field number 0
		"\x0a\x02ab",              // field 1, 2 bytes
		"\x0a\x03ab",              // length beyond the end
		"\x09abcdefgh", "\x09abc", // fixed64, whole and cut short
		"\x0dabcd", "\x0dab", // fixed32, whole and cut short
		"\x0b\x08\x01\x0c", // group 1 holding field 1, ended
		"\x0b\x08\x01\x14", // group 1 ended by group 2's end tag
		"\x0b\x08\x01",     // group never ended
		"\x0c",             // an end tag alone
		"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", // the longest varint
		"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", // more than 64 bits
		"\xf8\xff\xff\xff\x0f\x01",                     // field number 2^29-1... and beyond
		"\x80\x80\x80\x80\x10\x01",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := proto.Unmarshal(b, &emptypb.Empty{}) == nil
		if got := isProtobufMessage(b); got != want {
			t.Errorf("isProtobufMessage(%q) = %v, protobuf-go parses it: %v", b, got, want)
		}
	})
}
