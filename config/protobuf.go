package config

// Envoy's proxy_grpc_call reads its service argument as a serialized GrpcService when it parses
// as protobuf, and as a cluster name only otherwise, so a global limit's cluster name must not be
// a well-formed protobuf message. This is the wire-format walk that decides it, kept here so that
// config needs nothing beyond the standard library.

// Protobuf wire types (protobuf encoding spec).
const (
	protoVarint = 0
	protoI64    = 1
	protoBytes  = 2
	protoStart  = 3
	protoEnd    = 4
	protoI32    = 5
)

// maxProtoGroupDepth bounds the nesting of groups, as protobuf-go bounds recursion (its default
// limit).
const maxProtoGroupDepth = 10000

// isProtobufMessage reports whether b is a well-formed protobuf message: a sequence of fields,
// where empty is the empty message.
func isProtobufMessage(b []byte) bool {
	for len(b) > 0 {
		_, wire, rest, ok := protoField(b, 0)
		if !ok || wire == protoEnd {
			return false
		}
		b = rest
	}
	return true
}

// protoField reads one field from b and returns its number, its wire type and what follows it. A group is
// read to its end and returned with protoStart; its end tag alone comes back as protoEnd.
func protoField(b []byte, depth int) (num uint64, wire int, rest []byte, ok bool) {
	tag, n := protoVarintAt(b)
	if n == 0 {
		return 0, 0, nil, false
	}
	b = b[n:]
	num, wire = tag>>3, int(tag&7)
	if num == 0 || num > 1<<29-1 {
		return 0, 0, nil, false
	}
	switch wire {
	case protoVarint:
		if _, n = protoVarintAt(b); n == 0 {
			return 0, 0, nil, false
		}
		return num, wire, b[n:], true
	case protoI64:
		if len(b) < 8 {
			return 0, 0, nil, false
		}
		return num, wire, b[8:], true
	case protoI32:
		if len(b) < 4 {
			return 0, 0, nil, false
		}
		return num, wire, b[4:], true
	case protoBytes:
		size, n := protoVarintAt(b)
		if n == 0 || size > uint64(len(b)-n) {
			return 0, 0, nil, false
		}
		return num, wire, b[n+int(size):], true
	case protoEnd:
		return num, wire, b, true
	case protoStart:
		if depth >= maxProtoGroupDepth {
			return 0, 0, nil, false
		}
		for {
			inner, innerWire, after, ok := protoField(b, depth+1)
			if !ok {
				return 0, 0, nil, false
			}
			b = after
			if innerWire == protoEnd {
				if inner != num {
					return 0, 0, nil, false
				}
				return num, wire, b, true
			}
		}
	}
	return 0, 0, nil, false
}

// protoVarintAt reads a base-128 varint; n is 0 if b holds no complete varint of at most 10 bytes.
func protoVarintAt(b []byte) (v uint64, n int) {
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
