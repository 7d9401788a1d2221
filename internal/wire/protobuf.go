package wire

// The protobuf wire format (protobuf encoding spec), read by hand where the module meets it: the
// rate limit service's answers (package rls) and the test that a cluster name handed to
// proxy_grpc_call is not also a serialized GrpcService (package config). One walk serves both, so
// they cannot disagree about what a well-formed message is.

// Protobuf wire types.
const (
	ProtoVarint     = 0
	ProtoI64        = 1
	ProtoBytes      = 2
	ProtoStartGroup = 3
	ProtoEndGroup   = 4
	ProtoI32        = 5
)

// maxProtoGroupDepth bounds the nesting of groups, as protobuf-go bounds recursion (its default
// limit).
const maxProtoGroupDepth = 10000

// ReadProtoField reads one field from b: its number and wire type, its value for a varint, its
// bytes for a length-delimited field, and what follows it. A group (a deprecated encoding) is read
// to its end and returned with ProtoStartGroup; its end tag alone comes back as ProtoEndGroup. ok
// is false when b does not start with a well-formed field.
func ReadProtoField(b []byte) (num uint64, wireType int, v uint64, data, rest []byte, ok bool) {
	return readProtoField(b, 0)
}

func readProtoField(b []byte, depth int) (num uint64, wireType int, v uint64, data, rest []byte, ok bool) {
	tag, n := ReadVarint(b)
	if n == 0 {
		return 0, 0, 0, nil, nil, false
	}
	b = b[n:]
	num, wireType = tag>>3, int(tag&7)
	if num == 0 || num > 1<<29-1 {
		return 0, 0, 0, nil, nil, false
	}
	switch wireType {
	case ProtoVarint:
		if v, n = ReadVarint(b); n == 0 {
			return 0, 0, 0, nil, nil, false
		}
		return num, wireType, v, nil, b[n:], true
	case ProtoI64:
		if len(b) < 8 {
			return 0, 0, 0, nil, nil, false
		}
		return num, wireType, 0, nil, b[8:], true
	case ProtoI32:
		if len(b) < 4 {
			return 0, 0, 0, nil, nil, false
		}
		return num, wireType, 0, nil, b[4:], true
	case ProtoBytes:
		size, n := ReadVarint(b)
		if n == 0 || size > uint64(len(b)-n) {
			return 0, 0, 0, nil, nil, false
		}
		return num, wireType, 0, b[n : n+int(size)], b[n+int(size):], true
	case ProtoEndGroup:
		return num, wireType, 0, nil, b, true
	case ProtoStartGroup:
		if depth >= maxProtoGroupDepth {
			return 0, 0, 0, nil, nil, false
		}
		for {
			inner, innerType, _, _, after, ok := readProtoField(b, depth+1)
			if !ok {
				return 0, 0, 0, nil, nil, false
			}
			b = after
			if innerType == ProtoEndGroup {
				if inner != num {
					return 0, 0, 0, nil, nil, false
				}
				return num, wireType, 0, nil, b, true
			}
		}
	}
	return 0, 0, 0, nil, nil, false
}

// ReadVarint reads a base-128 varint; n is 0 if b holds no complete varint of at most 10 bytes.
func ReadVarint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		if i == 9 && c > 1 {
			return 0, 0 // more than 64 bits
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}
