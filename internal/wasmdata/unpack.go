package wasmdata

import "github.com/tollgate-proxy/tollgate/internal/wasmbin"

// The unpacker's instructions (the specification's section 5.4) and its locals.
const (
	opBlock      = 0x02
	opLoop       = 0x03
	opIf         = 0x04
	opEnd        = 0x0b
	opBr         = 0x0c
	opBrIf       = 0x0d
	opLocalGet   = 0x20
	opLocalSet   = 0x21
	opLocalTee   = 0x22
	opLoad8U     = 0x2d // i32.load8_u
	opMemorySize = 0x3f
	opI32Const   = 0x41
	opGeU        = 0x4f // i32.ge_u
	opAdd        = 0x6a
	opSub        = 0x6b
	opAnd        = 0x71
	opOr         = 0x72
	opShl        = 0x74
	opPrefix     = 0xfc // then 8 memory.init, 9 data.drop, 10 memory.copy, 11 memory.fill
	blockEmpty   = 0x40
	typeI32      = 0x7f

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
	b := []byte{1, locals, typeI32}
	i32 := func(v uint32) { b = wasmbin.AppendS32(append(b, opI32Const), int32(v)) }
	get := func(l byte) { b = append(b, opLocalGet, l) }
	set := func(l byte) { b = append(b, opLocalSet, l) }
	add := func(to, n byte) { get(to); get(n); b = append(b, opAdd); set(to) }
	// readNumber reads an unsigned LEB128 number into local l.
	readNumber := func(l byte) {
		i32(0)
		set(l)
		i32(0)
		set(localShift)
		b = append(b, opLoop, blockEmpty)
		get(localAt)
		b = append(b, opLoad8U, 0, 0)
		set(localByte)
		get(localAt)
		i32(1)
		b = append(b, opAdd)
		set(localAt)
		get(l)
		get(localByte)
		i32(0x7f)
		b = append(b, opAnd)
		get(localShift)
		b = append(b, opShl, opOr)
		set(l)
		get(localShift)
		i32(7)
		b = append(b, opAdd)
		set(localShift)
		get(localByte)
		i32(0x80)
		b = append(b, opAnd, opBrIf, 0, opEnd)
	}
	// The stream's copy: the last streamLen bytes of memory.
	b = append(b, opMemorySize, 0)
	i32(16)
	b = append(b, opShl)
	i32(streamLen)
	b = append(b, opSub, opLocalTee, localAt)
	i32(0)
	i32(streamLen)
	b = append(b, opPrefix, 8, 0, 0) // memory.init of segment 0
	get(localAt)
	i32(streamLen)
	b = append(b, opAdd)
	set(localEnd)
	i32(base)
	set(localCursor)

	b = append(b, opBlock, blockEmpty, opLoop, blockEmpty)
	// Literals.
	readNumber(localLength)
	get(localCursor)
	get(localAt)
	get(localLength)
	b = append(b, opPrefix, 10, 0, 0) // memory.copy
	add(localCursor, localLength)
	add(localAt, localLength)
	get(localAt)
	get(localEnd)
	b = append(b, opGeU, opBrIf, 1) // the stream ends after literals
	// A copy, or zeros skipped (distance 0).
	readNumber(localLength)
	readNumber(localDistance)
	get(localDistance)
	b = append(b, opIf, blockEmpty)
	get(localCursor)
	get(localCursor)
	get(localDistance)
	b = append(b, opSub)
	get(localLength)
	b = append(b, opPrefix, 10, 0, 0) // memory.copy
	b = append(b, opEnd)
	add(localCursor, localLength)
	b = append(b, opBr, 0, opEnd, opEnd)

	// The stream's copy zeroed again, and the segment dropped.
	get(localEnd)
	i32(streamLen)
	b = append(b, opSub)
	i32(0)
	i32(streamLen)
	b = append(b, opPrefix, 11, 0) // memory.fill
	b = append(b, opPrefix, 9, 0)  // data.drop of segment 0
	return append(b, opEnd)
}
