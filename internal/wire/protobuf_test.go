package wire

import (
	"bytes"
	"testing"
)

func TestReadVarint(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		v    uint64
		n    int
	}{
		{"one byte", "\x2a", 42, 1},
		{"two bytes, rest left", "\xac\x02\xff", 300, 2},
		{"largest", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 1<<64 - 1, 10},
		{"more than 64 bits", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 0, 0},
		{"longer than 10 bytes", "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 0, 0},
		{"truncated", "\x80", 0, 0},
		{"empty", "", 0, 0},
	} {
		if v, n := ReadVarint([]byte(tc.in)); v != tc.v || n != tc.n {
			t.Errorf("%s: ReadVarint(%q) = %d, %d; want %d, %d", tc.name, tc.in, v, n, tc.v, tc.n)
		}
	}
}

func TestReadProtoField(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		num      uint64
		wireType int
		v        uint64
		data     string
		rest     string
		ok       bool
	}{
		{"varint", "\x08\x96\x01\x10", 1, ProtoVarint, 150, "", "\x10", true},
		{"bytes", "\x12\x02hi\x18", 2, ProtoBytes, 0, "hi", "\x18", true},
		{"fixed 64", "\x19" + "12345678" + "x", 3, ProtoI64, 0, "", "x", true},
		{"fixed 32", "\x25" + "1234", 4, ProtoI32, 0, "", "", true},
		{"group to its end", "\x0b\x10\x01\x0c\x08", 1, ProtoStartGroup, 0, "", "\x08", true},
		{"end tag alone", "\x0c", 1, ProtoEndGroup, 0, "", "", true},
		{"group ended by another number", "\x0b\x14", 0, 0, 0, "", "", false},
		{"unterminated group", "\x0b\x08\x01", 0, 0, 0, "", "", false},
		{"bytes longer than the buffer", "\x12\x03hi", 0, 0, 0, "", "", false},
		{"truncated fixed 32", "\x25\x01", 0, 0, 0, "", "", false},
		{"field number 0", "\x00\x01", 0, 0, 0, "", "", false},
		{"wire type 6", "\x0e", 0, 0, 0, "", "", false},
		{"empty", "", 0, 0, 0, "", "", false},
	} {
		num, wireType, v, data, rest, ok := ReadProtoField([]byte(tc.in))
		if num != tc.num || wireType != tc.wireType || v != tc.v || !bytes.Equal(data, []byte(tc.data)) ||
			!bytes.Equal(rest, []byte(tc.rest)) || ok != tc.ok {
			t.Errorf("%s: ReadProtoField(%q) = %d, %d, %d, %q, %q, %v; want %d, %d, %d, %q, %q, %v", tc.name, tc.in,
				num, wireType, v, data, rest, ok, tc.num, tc.wireType, tc.v, tc.data, tc.rest, tc.ok)
		}
	}
}

func TestReadProtoFieldBoundsGroupNesting(t *testing.T) {
	deep := bytes.Repeat([]byte{0x0b}, maxProtoGroupDepth+1)
	deep = append(deep, bytes.Repeat([]byte{0x0c}, maxProtoGroupDepth+1)...)
	if _, _, _, _, _, ok := ReadProtoField(deep); ok {
		t.Errorf("groups nested %d deep were read; want them refused", maxProtoGroupDepth+1)
	}
	shallow := append(bytes.Repeat([]byte{0x0b}, 3), bytes.Repeat([]byte{0x0c}, 3)...)
	if _, _, _, _, rest, ok := ReadProtoField(shallow); !ok || len(rest) != 0 {
		t.Errorf("groups nested 3 deep: rest %q, ok %v; want all read", rest, ok)
	}
}
