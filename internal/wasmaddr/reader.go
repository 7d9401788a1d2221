package wasmaddr

import (
	"fmt"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
)

// reader reads a function body or a section, with the instruction-level reads the rewrite needs.
type reader struct{ *wasmbin.Reader }

// alignment reads a load's or store's alignment, which comes before its offset. One that
// announces a memory index (bit 6, multiple memories) is refused: Go uses one memory.
func (r reader) alignment() uint32 {
	align := r.U32()
	if align >= 64 {
		r.Unread()
		r.Fail("a load or store of another memory than the first")
	}
	return align
}

// skipImmediates reads the immediates of the instruction op starts, which the rewrite copies as
// they are: https://webassembly.github.io/spec/core/binary/instructions.html.
func (r reader) skipImmediates(op byte) {
	switch {
	case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op >= 0x45 && op <= 0xc4:
		// No immediates: unreachable, nop, else, end, return, drop, select, numeric instructions.
	case op >= 0x02 && op <= 0x04: // block, loop, if: a block type
		if t := r.Byte(); t != 0x40 && (t < 0x6f || t > 0x7f) {
			r.Unread()
			r.LEB(33)
		}
	case op == 0x0c, op == 0x0d, op == 0x10, op >= 0x20 && op <= 0x26, op == 0xd2:
		// br, br_if, call, local and global get/set/tee, table.get/set, ref.func: an index
		r.U32()
	case op == 0x0e: // br_table: the labels, then the default
		for n := r.U32(); n > 0 && r.Err() == nil; n-- {
			r.U32()
		}
		r.U32()
	case op == 0x11: // call_indirect: type and table
		r.U32()
		r.U32()
	case op == 0x1c: // select with types
		r.Bytes(r.U32())
	case op >= 0x28 && op <= 0x3e: // loads and stores: alignment and offset
		r.alignment()
		r.U32()
	case op == 0x3f, op == 0x40, op == 0xd0: // memory.size, memory.grow, ref.null
		r.Byte()
	case op == opI32Const:
		r.LEB(32)
	case op == opI64Const:
		r.LEB(64)
	case op == 0x43:
		r.Bytes(4)
	case op == 0x44:
		r.Bytes(8)
	case op == 0xd1: // ref.is_null
	case op == 0xfc:
		r.skipPrefixed()
	default:
		r.Unread()
		r.Fail(fmt.Sprintf("opcode 0x%02x is not one the rewrite knows", op))
	}
}

// skipPrefixed reads a 0xfc instruction: the saturating conversions, bulk memory and the table
// instructions.
func (r reader) skipPrefixed() {
	switch sub := r.U32(); {
	case sub <= 7: // saturating conversions
	case sub == 8: // memory.init: a data segment, then memory 0
		r.U32()
		r.Byte()
	case sub == 9, sub == 13, sub >= 15 && sub <= 17: // data.drop, elem.drop, table.grow/size/fill
		r.U32()
	case sub == 10: // memory.copy: two memories
		r.Byte()
		r.Byte()
	case sub == 11: // memory.fill
		r.Byte()
	case sub == 12, sub == 14: // table.init, table.copy
		r.U32()
		r.U32()
	default:
		r.Fail(fmt.Sprintf("prefixed opcode 0xfc %d is not one the rewrite knows", sub))
	}
}
