// Package wasmjump threads the jumps of a module built by upstream Go: a jump forward goes
// straight to its target, not through its function's dispatch loop.
//
// Wasm has no goto, and Go must be able to enter a function again in its middle (to resume a
// goroutine), so its Wasm backend lays each function out as a loop around a nest of blocks, one
// for each place the function can be entered at (the start of a basic block, the return of a
// call), and a br_table on the parameter that says where (PC_B, local 0), after a copy of its
// stack pointer into local 1 if it keeps one:
//
//	(global.get 0; local.set 1)? (block)? loop; block; block; ...; local.get 0; br_table ...;
//	end; <code>; end; <code> ...
//
// Every jump, forward or back, is `i32.const K; local.set 0; br <the loop>`: back to the loop's
// head, whose br_table takes it to the end of the block after which K's code starts. Tollgate's
// module had 16,721 of them (BENCHMARKS.md, section 1), binaryen's wasm-opt keeps nearly all, and
// a runtime's compiler sees an indirect jump: every branch of an if, every early return, costs
// one, and every value the function holds meets at the loop's head.
//
// A jump forward lands at the end of a block that is still open where the jump is: a plain `br`
// to that block does the same. Thread rewrites the `br` of each such jump; it keeps the
// `local.set 0`, which wasm-opt then drops where nothing reads it. A jump back still goes through
// the loop. The rewrite depends on nothing but the function's shape: a function whose head is
// not that loop and its table is copied as it is.
//
// The parser reads bytes it cannot trust, as internal/wasmaddr's: every length is checked, an
// instruction it does not know is an error, and a module it cannot parse is an error, never a
// panic. It does not validate what it copies: a module that parses but is not valid stays so.
package wasmjump
