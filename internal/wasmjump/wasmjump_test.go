package wasmjump_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
	"github.com/tollgate-proxy/tollgate/internal/wasmjump"
)

// Instructions of the hand-made functions.
var (
	loop        = []byte{0x03, 0x40}
	block       = []byte{0x02, 0x40}
	ifThen      = []byte{0x04, 0x40}
	end         = []byte{0x0b}
	unreachable = []byte{0x00}
	ret         = []byte{0x0f}
	add         = []byte{0x6a}
	sub         = []byte{0x6b}
	mul         = []byte{0x6c}
	and         = []byte{0x71}
	greater     = []byte{0x4a} // i32.gt_s
	// spCopy is Go's copy of its stack pointer (global 0) into local 1, before the loop.
	spCopy = []byte{0x23, 0, 0x21, 1}
	// table is the dispatch of four blocks: local.get 0, br_table 0 1 2 3, default 3.
	table = []byte{0x20, 0, 0x0e, 4, 0, 1, 2, 3, 3}
)

func get(i byte) []byte           { return []byte{0x20, i} }
func set(i byte) []byte           { return []byte{0x21, i} }
func br(depth byte) []byte        { return []byte{0x0c, depth} }
func code(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// constant is i32.const v.
func constant(v int32) []byte { return wasmbin.AppendS32([]byte{wasmbin.OpI32Const}, v) }

// goJump is Go's jump to the code after block k, through the loop depth labels out.
func goJump(k int32, depth byte) []byte { return code(constant(k), set(0), br(depth)) }

// goShaped is a function laid out as Go lays one out: a loop around four blocks and their table,
// its code in four pieces, its jumps made by jump (goJump, or the form a test expects). x is
// local 1 (a parameter, or what spCopy read), acc local 2.
//   - The first piece goes to the third if x is odd (forward), else adds 3x and runs on into the
//     second.
//   - The second adds 100, counts x down and goes back to the first while x > 0, else on to the
//     fourth (forward).
//   - The third adds 7 until acc has bit 3 set, going back to its own start from an if (the block
//     it would branch to has ended, and the if sits where it was), then back to the second.
//   - The fourth returns acc.
//
// With unwinding, the loop is in a block too, which the third leaves (returning 1) once acc
// passes 1000; and the first also jumps with a number past the table (its default, the fourth)
// when x is 13, and leaves the loop (returning 1), setting local 0 as a jump does, when x is 20.
func goShaped(unwinding bool, jump func(k int32, depth byte) []byte) []byte {
	locals := []byte{1, 1, 0x7f} // one i32: acc
	extra := 0
	if unwinding {
		extra = 1
	}
	first := code(
		get(1), constant(1), and, ifThen, jump(2, 4), end,
		get(2), get(1), constant(3), mul, add, set(2))
	if unwinding {
		first = code(get(1), constant(13), sub, constant(0), []byte{0x46}, ifThen, jump(99, 4), end, // i32.eq
			get(1), constant(20), sub, constant(0), []byte{0x46}, ifThen, jump(1, 5), end, first)
	}
	second := code(
		get(2), constant(100), add, set(2),
		get(1), constant(1), sub, set(1),
		get(1), constant(0), greater, ifThen, jump(0, 3), end,
		jump(3, 2))
	third := code(get(2), constant(7), add, set(2), get(2), constant(8), and, []byte{0x45}, ifThen, jump(2, 2), end) // i32.eqz
	if unwinding {
		third = code(third, get(2), constant(1000), greater, ifThen, br(byte(2+extra)), end)
	}
	third = code(third, jump(1, 1))
	body := code(loop, block, block, block, block, table, end,
		first, end, second, end, third, end, get(2), ret, end, unreachable)
	if unwinding {
		return code(locals, spCopy, block, body, end, constant(1))
	}
	return code(locals, body)
}

// notGoShaped has the jump's instructions but no dispatch loop at its head: it is left alone.
func notGoShaped() []byte {
	return code([]byte{0}, block, loop, get(1), constant(1), sub, set(1),
		get(1), constant(0), greater, ifThen, constant(5), set(0), br(1), end, end, end, get(1))
}

// moduleOf is a module whose functions, each of type (i32, i32) -> i32 and exported as f0, f1, ...,
// have the given bodies (locals and instructions, without the final end), with one mutable i32
// global, exported as "x".
func moduleOf(bodies ...[]byte) []byte {
	functions, exports, code := wasmbin.AppendU32(nil, uint32(len(bodies))), wasmbin.AppendU32(nil, uint32(len(bodies)+1)),
		wasmbin.AppendU32(nil, uint32(len(bodies)))
	for i, body := range bodies {
		functions = append(functions, 0) // type 0
		exports = append(wasmbin.AppendName(exports, "f"+strconv.Itoa(i)), 0, byte(i))
		code = append(wasmbin.AppendU32(code, uint32(len(body)+1)), append(body, wasmbin.OpEnd)...)
	}
	exports = append(wasmbin.AppendName(exports, "x"), 3, 0) // the global
	m := wasmbin.AppendSection([]byte(wasmbin.Header), 1, []byte{1, 0x60, 2, wasmbin.TypeI32, wasmbin.TypeI32, 1, wasmbin.TypeI32})
	m = wasmbin.AppendSection(m, 3, functions)
	m = wasmbin.AppendSection(m, 6, []byte{1, wasmbin.TypeI32, 1, wasmbin.OpI32Const, 0, wasmbin.OpEnd})
	m = wasmbin.AppendSection(m, wasmbin.ExportSection, exports)
	return wasmbin.AppendSection(m, wasmbin.CodeSection, code)
}

// bounded is a context for calls into a module: a rewrite that loops forever fails the test
// within a minute instead of hanging it.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// runtime is a wazero runtime whose calls end when their context does.
func runtime(t *testing.T) wazero.Runtime {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	t.Cleanup(func() { r.Close(ctx) })
	return r
}

// instance compiles and instantiates a module with wazero; a module it refuses fails t.
func instance(t *testing.T, module []byte) api.Module {
	t.Helper()
	ctx := context.Background()
	r := runtime(t)
	m, err := r.Instantiate(ctx, module)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	return m
}

// run calls f with x as its parameter and in the global (what spCopy reads).
func run(t *testing.T, m api.Module, f string, x int32) int32 {
	t.Helper()
	m.ExportedGlobal("x").(api.MutableGlobal).Set(uint64(uint32(x)))
	out, err := m.ExportedFunction(f).Call(bounded(t), 0, uint64(uint32(x)))
	if err != nil {
		t.Fatalf("%s(%d): %v", f, x, err)
	}
	return int32(out[0])
}

// Each jump forward is threaded, none back; the threaded functions compute what they did, and
// threading again changes nothing.
func TestThreadedFunctionsComputeTheSame(t *testing.T) {
	module := moduleOf(goShaped(false, goJump), goShaped(true, goJump), notGoShaped())
	threaded, count, err := wasmjump.Thread(module)
	// goShaped(false, goJump): the first piece's to the third, the second's to the fourth; goShaped(true, goJump)
	// also the first piece's past the table.
	if err != nil || count != 5 {
		t.Fatalf("Thread: %d threaded, %v; want 5", count, err)
	}
	before, after := instance(t, module), instance(t, threaded)
	results := map[int32]bool{}
	for _, f := range []string{"f0", "f1", "f2"} {
		for x := int32(-3); x <= 40; x++ {
			want, got := run(t, before, f, x), run(t, after, f, x)
			if got != want {
				t.Errorf("%s(%d): threaded %d, original %d", f, x, got, want)
			}
			results[want] = true
		}
	}
	if len(results) < 20 {
		t.Fatalf("only %d distinct results: the functions do not exercise their paths", len(results))
	}
	again, count, err := wasmjump.Thread(threaded)
	if err != nil || count != 0 || !bytes.Equal(again, threaded) {
		t.Fatalf("threading again: %d threaded, %v", count, err)
	}
}

// A jump forward becomes a branch to the block that ends where it goes: in goShaped, the first
// piece's jump (in an if, inside three blocks) to the end of the third block, depth 2, and the
// second piece's to the end of the outermost block, depth 1. The jumps back keep the loop, the
// third piece's from inside an if too: the threaded function is exactly that.
func TestThreadedJumpsBranchToTheirBlock(t *testing.T) {
	threaded, _, err := wasmjump.Thread(moduleOf(goShaped(false, goJump)))
	if err != nil {
		t.Fatal(err)
	}
	direct := func(k int32, depth byte) []byte {
		switch {
		case k == 2 && depth == 4:
			depth = 2
		case k == 3 && depth == 2:
			depth = 1
		}
		return goJump(k, depth)
	}
	if want := moduleOf(goShaped(false, direct)); !bytes.Equal(threaded, want) {
		t.Fatalf("threaded:\n%x\nwant:\n%x", threaded, want)
	}
}

// Only the jump's exact form is threaded: a number past the table (negative too) takes the
// default, and a function whose jumps set another local than the table reads, or whose table
// reads another local than 0, is left alone.
func TestThreadOnlyGoJumps(t *testing.T) {
	pastTable := func(k int32, depth byte) []byte {
		if k == 3 {
			k = -1 // the default: the fourth piece
		}
		return goJump(k, depth)
	}
	viaLocal2 := func(k int32, depth byte) []byte { return code(constant(k), set(2), br(depth)) }
	tableOn1 := bytes.Replace(goShaped(false, goJump), table, append([]byte{0x20, 1}, table[2:]...), 1)
	module := moduleOf(goShaped(false, goJump), goShaped(false, pastTable))
	threaded, count, err := wasmjump.Thread(module)
	if err != nil || count != 4 {
		t.Fatalf("Thread: %d threaded, %v; want 4", count, err)
	}
	before, after := instance(t, module), instance(t, threaded)
	for x := int32(-3); x <= 40; x++ {
		if want, got := run(t, before, "f0", x), run(t, after, "f1", x); got != want {
			t.Errorf("f1(%d), its jump to the fourth piece past the table: threaded %d, original %d", x, got, want)
		}
	}
	if !bytes.Contains(tableOn1, []byte{0x20, 1, 0x0e}) {
		t.Fatal("the table on local 1 was not made")
	}
	for name, body := range map[string][]byte{"jumps through local 2": goShaped(false, viaLocal2), "a table on local 1": tableOn1} {
		m := moduleOf(body)
		if got, count, err := wasmjump.Thread(m); err != nil || count != 0 || !bytes.Equal(got, m) {
			t.Errorf("%s: %d threaded, %v; want the module as it was", name, count, err)
		}
	}
}

// A module built by upstream Go: the threaded one computes what it did, for many inputs.
func TestThreadedGoModuleComputesTheSame(t *testing.T) {
	module := testbuild.Module(t, "./internal/wasmjump/testdata/branchy")
	threaded, count, err := wasmjump.Thread(module)
	if err != nil {
		t.Fatal(err)
	}
	if count < 1000 {
		t.Fatalf("%d jumps threaded in a Go module; Go's layout is not recognised", count)
	}
	ctx := bounded(t)
	work := func(module []byte) api.Function {
		r := runtime(t)
		wasi_snapshot_preview1.MustInstantiate(ctx, r)
		m, err := r.InstantiateWithConfig(ctx, module, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
		if err != nil {
			t.Fatalf("instantiate: %v", err)
		}
		return m.ExportedFunction("work")
	}
	before, after := work(module), work(threaded)
	for n := int32(0); n < 200; n++ {
		want, err1 := before.Call(ctx, uint64(n))
		got, err2 := after.Call(ctx, uint64(n))
		if err1 != nil || err2 != nil || got[0] != want[0] {
			t.Fatalf("work(%d): threaded %v (%v), original %v (%v)", n, got, err2, want, err1)
		}
	}
}

// An instruction the rewrite does not know is an error, in a function of Go's shape or not
// (wasmbin's tests cover the rest of what cannot be read).
func TestThreadRefusesWhatItCannotRead(t *testing.T) {
	for _, body := range [][]byte{
		{0, 0xfd, 0x0c},
		code([]byte{0}, loop, block, table[:3], []byte{0, 0, 0xfd}),
	} {
		if _, _, err := wasmjump.Thread(moduleOf(body)); err == nil || !strings.Contains(err.Error(), "function body 0: byte ") ||
			!strings.Contains(err.Error(), "opcode 0xfd") {
			t.Errorf("%x: %v, want an error naming the body, the byte and the opcode", body, err)
		}
	}
}

// checkThread threads a module and, when that succeeds: a module wazero accepts is still one it
// accepts, and threading the result again changes nothing. A malformed module is an error, never
// a panic.
func checkThread(t *testing.T, module []byte) {
	threaded, _, err := wasmjump.Thread(module)
	if err != nil {
		return
	}
	again, count, err := wasmjump.Thread(threaded)
	if err != nil || count != 0 || !bytes.Equal(again, threaded) {
		t.Fatalf("threading %x again: %d threaded, %v", module, count, err)
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	if _, err := r.CompileModule(ctx, module); err != nil {
		return
	}
	if _, err := r.CompileModule(ctx, threaded); err != nil {
		t.Fatalf("module %x is valid, threaded it is not: %v", module, err)
	}
}

// The seeds, which go test runs, are every mutation of the hand-made module.
func FuzzThread(f *testing.F) {
	for _, m := range testbuild.Mutations(moduleOf(goShaped(false, goJump), goShaped(true, goJump), notGoShaped())) {
		f.Add(m)
	}
	f.Fuzz(checkThread)
}
