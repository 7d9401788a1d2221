package wasmaddr

import "fmt"

// reader reads a function body or a section; the first error sticks, and every read after it
// returns zero, so that callers check once.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("byte %d: %s", r.off, what)
	}
	r.off = len(r.b)
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.fail("ends early")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

// leb reads a LEB128 number of at most bits bits, returning its bits as read and the shift
// past its last byte (for sign extension); the format caps its length at ceil(bits/7) bytes.
func (r *reader) leb(bits int) (v uint64, shift int, last byte) {
	for shift < bits {
		c := r.byte()
		if r.err != nil {
			return 0, 0, 0
		}
		v |= uint64(c&0x7f) << shift
		shift += 7
		if c < 0x80 {
			return v, shift, c
		}
	}
	r.fail(fmt.Sprintf("a number longer than %d bits", bits))
	return 0, 0, 0
}

func (r *reader) u32() uint32 {
	v, _, _ := r.leb(32)
	if v > 1<<32-1 {
		r.fail("a number beyond 32 bits")
		return 0
	}
	return uint32(v)
}

// s64 reads a signed LEB128 number of at most 64 bits (an i64.const's).
func (r *reader) s64() int64 {
	v, shift, last := r.leb(64)
	if shift < 64 && last&0x40 != 0 {
		v |= ^uint64(0) << shift
	}
	return int64(v)
}

// alignment reads a load's or store's alignment, which comes before its offset. One that
// announces a memory index (bit 6, multiple memories) is refused: Go uses one memory.
func (r *reader) alignment() uint32 {
	align := r.u32()
	if align >= 64 {
		r.off--
		r.fail("a load or store of another memory than the first")
	}
	return align
}

// followedBy reports whether the next instructions are the given opcodes, immediates-free ones,
// and if so reads past them.
func (r *reader) followedBy(ops ...byte) bool {
	if len(r.b)-r.off < len(ops) || string(r.b[r.off:r.off+len(ops)]) != string(ops) {
		return false
	}
	r.off += len(ops)
	return true
}

func (r *reader) bytes(n uint32) []byte {
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.fail(fmt.Sprintf("%d bytes announced, %d left", n, len(r.b)-r.off))
		return nil
	}
	r.off += int(n)
	return r.b[r.off-int(n) : r.off]
}

// appendS32 appends v as a signed LEB128 number (an i32.const's immediate).
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// skipImmediates reads the immediates of the instruction op starts, which the rewrite copies as
// they are: https://webassembly.github.io/spec/core/binary/instructions.html.
func (r *reader) skipImmediates(op byte) {
	switch {
	case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op >= 0x45 && op <= 0xc4:
		// No immediates: unreachable, nop, else, end, return, drop, select, numeric instructions.
	case op >= 0x02 && op <= 0x04: // block, loop, if: a block type
		if t := r.byte(); t != 0x40 && (t < 0x6f || t > 0x7f) {
			r.off--
			r.leb(33)
		}
	case op == 0x0c, op == 0x0d, op == 0x10, op >= 0x20 && op <= 0x26, op == 0xd2:
		// br, br_if, call, local and global get/set/tee, table.get/set, ref.func: an index
		r.u32()
	case op == 0x0e: // br_table: the labels, then the default
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case op == 0x11: // call_indirect: type and table
		r.u32()
		r.u32()
	case op == 0x1c: // select with types
		r.bytes(r.u32())
	case op >= 0x28 && op <= 0x3e: // loads and stores: alignment and offset
		r.alignment()
		r.u32()
	case op == 0x3f, op == 0x40, op == 0xd0: // memory.size, memory.grow, ref.null
		r.byte()
	case op == opI32Const:
		r.leb(32)
	case op == opI64Const:
		r.leb(64)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd1: // ref.is_null
	case op == 0xfc:
		r.skipPrefixed()
	default:
		r.off--
		r.fail(fmt.Sprintf("opcode 0x%02x is not one the rewrite knows", op))
	}
}

// skipPrefixed reads a 0xfc instruction: the saturating conversions, bulk memory and the table
// instructions.
func (r *reader) skipPrefixed() {
	switch sub := r.u32(); {
	case sub <= 7: // saturating conversions
	case sub == 8: // memory.init: a data segment, then memory 0
		r.u32()
		r.byte()
	case sub == 9, sub == 13, sub >= 15 && sub <= 17: // data.drop, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10: // memory.copy: two memories
		r.byte()
		r.byte()
	case sub == 11: // memory.fill
		r.byte()
	case sub == 12, sub == 14: // table.init, table.copy
		r.u32()
		r.u32()
	default:
		r.fail(fmt.Sprintf("prefixed opcode 0xfc %d is not one the rewrite knows", sub))
	}
}
