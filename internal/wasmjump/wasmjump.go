package wasmjump

import (
	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
)

// Thread returns the module with its forward jumps threaded, and how many it threaded. Only the
// code section changes (wasmbin.RewriteCode): function indices stay, so the name section and a
// name map made from it still hold.
func Thread(module []byte) ([]byte, int, error) {
	return wasmbin.RewriteCode(module, threadBody)
}

// ThreadFile threads the module in the file at path, in place (wasmbin.RewriteCodeFile), and
// returns how many jumps it threaded. A module it cannot read is left as it is.
func ThreadFile(path string) (int, error) {
	return wasmbin.RewriteCodeFile(path, threadBody)
}

// Frames of the control stack, as threadBody tracks it. A dispatch block is its number, counted
// from the innermost: the br_table's label that branches to its end.
const (
	otherFrame = -1 // a block, loop or if of the function's own code, or the unwinding block
	loopFrame  = -2 // the dispatch loop
)

// threadBody rewrites one function body: its locals, then its instructions. In a function whose
// head is not Go's dispatch, no branch names a dispatch loop, and every instruction is copied.
func threadBody(body []byte) ([]byte, int, error) {
	r := wasmbin.NewReader(body)
	r.SkipLocals()
	var stack []int // the control stack after the head: the unwinding block, the loop, its blocks
	d, ok := readDispatch(wasmbin.NewReader(body[r.Offset():]))
	if ok {
		r.Bytes(uint32(d.size)) // the head, copied as it is
		if d.unwinding {
			stack = append(stack, otherFrame)
		}
		stack = append(stack, loopFrame)
		for b := d.nested - 1; b >= 0; b-- {
			stack = append(stack, b)
		}
	}
	out := append([]byte(nil), body[:r.Offset()]...)
	threaded := 0
	for r.More() {
		start := r.Offset()
		op := r.Byte()
		switch op {
		case wasmbin.OpBlock, wasmbin.OpLoop, wasmbin.OpIf:
			r.SkipImmediates(op)
			stack = append(stack, otherFrame)
		case wasmbin.OpEnd:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case wasmbin.OpI32Const:
			k := uint32(r.S32())
			if !r.FollowedBy(wasmbin.OpLocalSet, 0, wasmbin.OpBr) {
				break
			}
			depthAt := r.Offset()
			if depth, ok := d.forward(stack, r.U32(), k); ok {
				out = wasmbin.AppendU32(append(out, body[start:depthAt]...), depth)
				threaded++
				continue
			}
		default:
			r.SkipImmediates(op)
		}
		out = append(out, body[start:r.Offset()]...)
	}
	if r.Err() != nil {
		return nil, 0, r.Err()
	}
	return out, threaded, nil
}

// dispatch is the head of a function that readDispatch found.
type dispatch struct {
	unwinding bool     // the loop is in a block (Go's exit for unwinding the stack)
	nested    int      // the blocks in the loop, around the br_table
	labels    []uint32 // the br_table's labels, the default last
	size      int      // the head's bytes
}

// readDispatch reads the head of a function's instructions: Go's copy of its stack pointer into a
// local (`global.get 0; local.set 1`), if it makes one, then `block`? `loop` `block`+ `local.get 0`
// `br_table`, every block of the empty type, and every label of the table one of the loop's
// blocks. ok is false for any other head.
func readDispatch(r *wasmbin.Reader) (d dispatch, ok bool) {
	r.FollowedBy(wasmbin.OpGlobalGet, 0, wasmbin.OpLocalSet, 1)
	d.unwinding = r.FollowedBy(wasmbin.OpBlock, wasmbin.BlockEmpty)
	if !r.FollowedBy(wasmbin.OpLoop, wasmbin.BlockEmpty) {
		return dispatch{}, false
	}
	for r.FollowedBy(wasmbin.OpBlock, wasmbin.BlockEmpty) {
		d.nested++
	}
	if d.nested == 0 || !r.FollowedBy(wasmbin.OpLocalGet, 0, wasmbin.OpBrTable) {
		return dispatch{}, false
	}
	n := r.U32()
	for i := uint32(0); i <= n && r.Err() == nil; i++ {
		label := r.U32()
		if label >= uint32(d.nested) {
			return dispatch{}, false // a label past the loop's blocks: not Go's table
		}
		d.labels = append(d.labels, label)
	}
	d.size = r.Offset()
	return d, r.Err() == nil
}

// forward returns the depth of a direct branch for the jump `i32.const k; local.set 0; br
// depth` on the control stack: the depth of the block that ends where the br_table would send
// it, when depth names the dispatch loop and that block is still open. ok is false for any other
// branch, and for a jump back.
func (d *dispatch) forward(stack []int, depth, k uint32) (direct uint32, ok bool) {
	if depth >= uint32(len(stack)) || stack[len(stack)-1-int(depth)] != loopFrame {
		return 0, false
	}
	label := d.labels[len(d.labels)-1] // the default, for k past the table
	if k < uint32(len(d.labels)-1) {
		label = d.labels[k]
	}
	at := d.loopAt() + d.nested - int(label) // where the block ending at label sits on the stack
	if at >= len(stack) || stack[at] != int(label) {
		return 0, false // that block has ended: its code is behind
	}
	return uint32(len(stack) - 1 - at), true
}

// loopAt is the loop's place on the control stack.
func (d *dispatch) loopAt() int {
	if d.unwinding {
		return 1
	}
	return 0
}
