package wasmdata

import "github.com/tollgate-proxy/tollgate/internal/wasmbin"

// The unpacker's locals.
const (
	localAt       = 0 // the next byte of the stream to read
	localEnd      = 1 // the end of the stream
	localCursor   = 2 // where the next bytes are written
	localValue    = 3 // a number being read
	localShift    = 4
	localByte     = 5
	localLength   = 6
	localDistance = 7
	locals        = 8
)

// unpackBody is the code of the start function: it copies the stream (the passive segment,
// streamLen bytes) to the end of memory, writes what it describes from base up, zeroes the
// stream's copy, and drops the segment. It traps only where the stream is not Pack's, which
// Pack checked.
func unpackBody(base, streamLen uint32) []byte {
	b := []byte{1, locals, wasmbin.TypeI32}
	i32 := func(v uint32) { b = wasmbin.AppendS32(append(b, wasmbin.OpI32Const), int32(v)) }
	get := func(l byte) { b = append(b, wasmbin.OpLocalGet, l) }
	set := func(l byte) { b = append(b, wasmbin.OpLocalSet, l) }
	add := func(to, n byte) { get(to); get(n); b = append(b, wasmbin.OpI32Add); set(to) }
	// readNumber reads an unsigned LEB128 number into local l.
	readNumber := func(l byte) {
		i32(0)
		set(l)
		i32(0)
		set(localShift)
		b = append(b, wasmbin.OpLoop, wasmbin.BlockEmpty)
		get(localAt)
		b = append(b, wasmbin.OpI32Load8U, 0, 0)
		set(localByte)
		get(localAt)
		i32(1)
		b = append(b, wasmbin.OpI32Add)
		set(localAt)
		get(l)
		get(localByte)
		i32(0x7f)
		b = append(b, wasmbin.OpI32And)
		get(localShift)
		b = append(b, wasmbin.OpI32Shl, wasmbin.OpI32Or)
		set(l)
		get(localShift)
		i32(7)
		b = append(b, wasmbin.OpI32Add)
		set(localShift)
		get(localByte)
		i32(0x80)
		b = append(b, wasmbin.OpI32And, wasmbin.OpBrIf, 0, wasmbin.OpEnd)
	}
	// The stream's copy: the last streamLen bytes of memory.
	b = append(b, wasmbin.OpMemorySize, 0)
	i32(16)
	b = append(b, wasmbin.OpI32Shl)
	i32(streamLen)
	b = append(b, wasmbin.OpI32Sub, wasmbin.OpLocalTee, localAt)
	i32(0)
	i32(streamLen)
	b = append(b, wasmbin.OpPrefix, 8, 0, 0) // memory.init of segment 0
	get(localAt)
	i32(streamLen)
	b = append(b, wasmbin.OpI32Add)
	set(localEnd)
	i32(base)
	set(localCursor)

	b = append(b, wasmbin.OpBlock, wasmbin.BlockEmpty, wasmbin.OpLoop, wasmbin.BlockEmpty)
	// Literals.
	readNumber(localLength)
	get(localCursor)
	get(localAt)
	get(localLength)
	b = append(b, wasmbin.OpPrefix, 10, 0, 0) // memory.copy
	add(localCursor, localLength)
	add(localAt, localLength)
	get(localAt)
	get(localEnd)
	b = append(b, wasmbin.OpI32GeU, wasmbin.OpBrIf, 1) // the stream ends after literals
	// A copy, or zeros skipped (distance 0).
	readNumber(localLength)
	readNumber(localDistance)
	get(localDistance)
	b = append(b, wasmbin.OpIf, wasmbin.BlockEmpty)
	get(localCursor)
	get(localCursor)
	get(localDistance)
	b = append(b, wasmbin.OpI32Sub)
	get(localLength)
	b = append(b, wasmbin.OpPrefix, 10, 0, 0) // memory.copy
	b = append(b, wasmbin.OpEnd)
	add(localCursor, localLength)
	b = append(b, wasmbin.OpBr, 0, wasmbin.OpEnd, wasmbin.OpEnd)

	// The stream's copy zeroed again, and the segment dropped.
	get(localEnd)
	i32(streamLen)
	b = append(b, wasmbin.OpI32Sub)
	i32(0)
	i32(streamLen)
	b = append(b, wasmbin.OpPrefix, 11, 0) // memory.fill
	b = append(b, wasmbin.OpPrefix, 9, 0)  // data.drop of segment 0
	return append(b, wasmbin.OpEnd)
}
