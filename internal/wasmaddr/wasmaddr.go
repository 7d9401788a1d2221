// Package wasmaddr narrows the address arithmetic of a module built by upstream Go, so that
// binaryen's wasm-opt can fold it into the offsets of the loads and stores it feeds.
//
// Go's Wasm backend computes addresses in 64 bits and wraps them to the 32 bits memory takes:
// an argument stored 8 bytes into the stack frame is
//
//	local.get $sp; i64.extend_i32_u; i64.const 8; i64.add; i32.wrap_i64; ...; i64.store
//
// and the module has about thirty-five thousand of these. wasm-opt (binaryen 108) keeps them as
// they are. Narrow rewrites every `i64.const C; i64.add; i32.wrap_i64` as
// `i32.wrap_i64; i32.const C; i32.add`, which computes the same 32 bits for every value: wrapping
// to 32 bits commutes with addition. wasm-opt then drops the wrap of the extension and, told that
// the module never touches the first kilobyte of memory (--low-memory-unused: Go keeps its
// first 4096 bytes as a zero page, nil checks being explicit calls), moves the constant into the
// load's or store's offset: about 150 KB of the module's code.
//
// Go also loads 64 bits where it keeps 32 (`i64.load; i32.wrap_i64`, about nine thousand times):
// Narrow loads the 32 bits the wrap keeps instead (`i32.load`, and likewise for the 8-, 16- and
// 32-bit loads), a byte less each; and it compares a 32-bit value with zero as it is
// (`i32.eqz`) where Go extends it to 64 bits first (`i64.extend_i32_u; i64.eqz`).
//
// The parser reads bytes it cannot trust: every length is checked, an instruction it does not
// know is an error (the module keeps what Go emits: the MVP, sign extension, saturating
// conversions and bulk memory), and a module it cannot parse is an error, never a panic (it does
// not validate what it copies).
package wasmaddr

import (
	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
)

// Narrow returns the module with its address computations and wrapped loads narrowed, and how
// many it rewrote. Only the code section changes (wasmbin.RewriteCode): function indices stay, so
// the name section and a name map made from it still hold.
func Narrow(module []byte) ([]byte, int, error) {
	return wasmbin.RewriteCode(module, narrowBody)
}

// NarrowFile narrows the module in the file at path, in place (wasmbin.RewriteCodeFile), and
// returns how many rewrites it made. A module it cannot read is left as it is.
func NarrowFile(path string) (int, error) {
	return wasmbin.RewriteCodeFile(path, narrowBody)
}

// narrowBody rewrites one function body: its locals, then its instructions.
func narrowBody(body []byte) ([]byte, int, error) {
	r := wasmbin.NewReader(body)
	r.SkipLocals()
	out := append([]byte(nil), body[:r.Offset()]...)
	narrowed := 0
	for r.More() {
		start := r.Offset()
		op := r.Byte()
		narrowLoad, isLoad := narrowLoads[op]
		switch {
		case op == wasmbin.OpI64Const:
			constant := r.S64()
			if r.FollowedBy(wasmbin.OpI64Add, wasmbin.OpI32WrapI64) {
				out = append(wasmbin.AppendS32(append(out, wasmbin.OpI32WrapI64, wasmbin.OpI32Const), int32(constant)), wasmbin.OpI32Add)
				narrowed++
				continue
			}
		case isLoad:
			align := r.Alignment()
			offsetStart := r.Offset()
			r.U32()
			if r.FollowedBy(wasmbin.OpI32WrapI64) {
				// A 32-bit load reads the 4 bytes the wrap keeps, aligned at most to them.
				out = wasmbin.AppendU32(append(out, narrowLoad), min(align, 2))
				out = append(out, body[offsetStart:r.Offset()-1]...)
				narrowed++
				continue
			}
		case op == wasmbin.OpI64ExtendI32U || op == wasmbin.OpI64ExtendI32S:
			if r.FollowedBy(wasmbin.OpI64Eqz) {
				// A 32-bit value extended to be compared with zero: compare it as it is.
				out = append(out, wasmbin.OpI32Eqz)
				narrowed++
				continue
			}
		default:
			r.SkipImmediates(op)
		}
		out = append(out, body[start:r.Offset()]...)
	}
	return out, narrowed, r.Err()
}

// narrowLoads are the 64-bit loads a wrap to 32 bits can follow, and the 32-bit loads of the
// same bytes, extended alike, that give what the wrap does. Narrower, they trap only where the
// 64-bit load would have too.
var narrowLoads = map[byte]byte{
	0x29: 0x28, // i64.load: i32.load of its low half
	0x30: 0x2c, // i64.load8_s: i32.load8_s
	0x31: 0x2d, // i64.load8_u: i32.load8_u
	0x32: 0x2e, // i64.load16_s: i32.load16_s
	0x33: 0x2f, // i64.load16_u: i32.load16_u
	0x34: 0x28, // i64.load32_s: i32.load
	0x35: 0x28, // i64.load32_u: i32.load
}
