package wasmaddr_test

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
	"github.com/tollgate-proxy/tollgate/internal/wasmaddr"
	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
)

// moduleOf is a hand-made module whose functions, each of type (i64) -> i32 and exported as f0,
// f1, ..., have the given bodies (locals and instructions, without the final end).
func moduleOf(bodies ...[]byte) []byte {
	n := uint32(len(bodies))
	functions, exports, code := wasmbin.AppendU32(nil, n), wasmbin.AppendU32(nil, n), wasmbin.AppendU32(nil, n)
	for i, body := range bodies {
		functions = append(functions, 0) // type 0
		exports = wasmbin.AppendU32(append(wasmbin.AppendName(exports, "f"+strconv.Itoa(i)), 0), uint32(i))
		code = append(wasmbin.AppendU32(code, uint32(len(body)+1)), append(body, wasmbin.OpEnd)...)
	}
	m := wasmbin.AppendSection([]byte(wasmbin.Header), 1, []byte{1, 0x60, 1, 0x7e, 1, wasmbin.TypeI32})
	m = wasmbin.AppendSection(m, 3, functions)
	m = wasmbin.AppendSection(m, 5, []byte{1, 0, 1}) // a memory of one page
	m = wasmbin.AppendSection(m, wasmbin.ExportSection, exports)
	m = wasmbin.AppendSection(m, wasmbin.CodeSection, code)
	// The memory's first bytes, for the loads: both signs in every byte.
	return wasmbin.AppendSection(m, 11, append([]byte{1, 0, wasmbin.OpI32Const, 0, wasmbin.OpEnd, byte(len(memoryBytes))}, memoryBytes...))
}

var memoryBytes = []byte{0x81, 0x7f, 0xfe, 0x02, 0x93, 0x64, 0xa5, 0xb6, 0xc7, 0x18, 0xe9, 0xfa}

// wrapSum is the body Go's address arithmetic reduces to: wrap(x + c), x the parameter.
func wrapSum(c int64) []byte {
	return append(wasmbin.AppendS64([]byte{0, 0x20, 0, 0x42}, c), 0x7c, 0xa7)
}

// An extended value compared with zero: both extensions, for the parameter's low half.
func TestNarrowedComparisonsGiveTheSame(t *testing.T) {
	comparisons := [][]byte{{0, 0x20, 0, 0xa7, 0xad, 0x50}, {0, 0x20, 0, 0xa7, 0xac, 0x50}}
	module := moduleOf(comparisons...)
	narrowed, count, err := wasmaddr.Narrow(module)
	if err != nil || count != len(comparisons) {
		t.Fatalf("Narrow: %d rewritten, %v; want %d", count, err, len(comparisons))
	}
	before, after := functions(t, module, len(comparisons)), functions(t, narrowed, len(comparisons))
	for i := range comparisons {
		for _, x := range []uint64{0, 1, 1 << 31, 1 << 32, 1<<32 + 1, math.MaxUint64} {
			if want, got := uint32(before[i](x)), uint32(after[i](x)); got != want || got != b2u(uint32(x) == 0) {
				t.Errorf("comparison %d of %#x: narrowed %d, original %d", i, x, got, want)
			}
		}
	}
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

var constants = []int64{0, 8, -8, 1000, 1 << 31, 1<<32 + 5, -1 << 40, math.MaxInt64, math.MinInt64}

// The narrowed functions compute what the originals do, for every constant and argument, and
// every one of them is rewritten.
func TestNarrowedFunctionsComputeTheSame(t *testing.T) {
	var bodies [][]byte
	for _, c := range constants {
		bodies = append(bodies, wrapSum(c))
	}
	module := moduleOf(bodies...)
	narrowed, count, err := wasmaddr.Narrow(module)
	if err != nil || count != len(constants) {
		t.Fatalf("Narrow: %d rewritten, %v; want %d", count, err, len(constants))
	}
	before, after := functions(t, module, len(constants)), functions(t, narrowed, len(constants))
	for i, c := range constants {
		for _, x := range []uint64{0, 1, 4096, 1<<31 - 1, 1 << 31, 1<<32 - 1, 1 << 32, 1<<63 - 1, 1 << 63, math.MaxUint64} {
			if want, got := before[i](x), after[i](x); got != want || uint32(got) != uint32(x+uint64(c)) {
				t.Errorf("c %d, x %d: narrowed %d, original %d", c, x, got, want)
			}
		}
	}
}

// wrappedLoad is the body of a 64-bit load (op, with its alignment and an offset of 2) at the
// parameter's address, wrapped to 32 bits.
func wrappedLoad(op, align byte) []byte {
	return []byte{0, 0x20, 0, 0xa7, op, align, 2, 0xa7}
}

// The wrapped 64-bit loads become 32-bit loads that read what the wrap kept, at every address of
// the memory's first bytes.
func TestNarrowedLoadsReadTheSame(t *testing.T) {
	loads := [][]byte{wrappedLoad(0x29, 3), wrappedLoad(0x30, 0), wrappedLoad(0x31, 0), wrappedLoad(0x32, 1),
		wrappedLoad(0x33, 1), wrappedLoad(0x34, 2), wrappedLoad(0x35, 2)}
	module := moduleOf(loads...)
	narrowed, count, err := wasmaddr.Narrow(module)
	if err != nil || count != len(loads) || len(narrowed) != len(module)-len(loads) {
		t.Fatalf("Narrow: %d rewritten, %v, %d bytes from %d; want %d rewritten, a byte less each",
			count, err, len(narrowed), len(module), len(loads))
	}
	before, after := functions(t, module, len(loads)), functions(t, narrowed, len(loads))
	for i := range loads {
		for x := uint64(0); x < 4; x++ {
			if want, got := uint32(before[i](x)), uint32(after[i](x)); got != want {
				t.Errorf("load %d at %d: narrowed %#x, original %#x", i, x, got, want)
			}
		}
	}
}

// functions instantiates a module made by moduleOf and returns its n functions, whose i32
// results come back in the low half of a uint64.
func functions(t *testing.T, module []byte, n int) []func(uint64) uint64 {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	instance, err := r.Instantiate(ctx, module)
	if err != nil {
		t.Fatal(err)
	}
	var calls []func(uint64) uint64
	for i := range n {
		f := instance.ExportedFunction("f" + strconv.Itoa(i))
		calls = append(calls, func(x uint64) uint64 {
			results, err := f.Call(ctx, x)
			if err != nil {
				t.Fatal(err)
			}
			return results[0]
		})
	}
	return calls
}

// Only the exact sequence is rewritten, and bytes that look like it inside another
// instruction's immediates are left alone.
func TestNarrowRewritesOnlyTheSequence(t *testing.T) {
	tests := []struct {
		name string
		body []byte
	}{
		{"sum stored as i64", []byte{0, 0x20, 0, 0x42, 8, 0x7c, 0x1a, 0x41, 0}},
		{"wrap without a sum", []byte{0, 0x20, 0, 0xa7}},
		{"the sequence inside an f64.const", []byte{0, 0x44, 0x42, 8, 0x7c, 0xa7, 0, 0, 0, 0, 0x1a, 0x41, 0}},
		{"the sequence inside a load's offset and after a block type", []byte{0, 0x02, 0x7f, 0x41, 0, 0x28, 0x02, 0xc2, 0x08, 0x0b, 0x1a, 0x41, 0}},
		{"locals, a br_table and a saturating conversion", []byte{1, 2, 0x7e, 0x02, 0x40, 0x41, 0, 0x0e, 1, 0, 0, 0x0b,
			0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0xfc, 0x02, 0x1a, 0x41, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			module := moduleOf(tt.body)
			narrowed, count, err := wasmaddr.Narrow(module)
			if err != nil || count != 0 || !bytes.Equal(narrowed, module) {
				t.Fatalf("Narrow: %d rewritten, %v, changed %v; want the module as it was", count, err, !bytes.Equal(narrowed, module))
			}
		})
	}
}

// A load of another memory than the first, which the rewrite reads itself, is an error naming
// where (wasmbin's tests cover the rest of what cannot be read).
func TestNarrowRefusesWhatItCannotRead(t *testing.T) {
	_, _, err := wasmaddr.Narrow(moduleOf([]byte{0, 0x41, 0, 0x28, 0x42, 0, 0, 0x1a, 0x41, 0}))
	if err == nil || !strings.Contains(err.Error(), "function body 0: byte 4: a load or store of another memory") {
		t.Fatalf("Narrow: %v, want an error naming the body, the byte and the memory", err)
	}
}

// checkNarrow narrows a module and, when that succeeds, narrows the result again: nothing is
// left to rewrite, and the module stays as it is. A malformed module is an error, never a panic.
func checkNarrow(t *testing.T, module []byte) {
	narrowed, _, err := wasmaddr.Narrow(module)
	if err != nil {
		return
	}
	again, count, err := wasmaddr.Narrow(narrowed)
	if err != nil || count != 0 || !bytes.Equal(again, narrowed) {
		t.Fatalf("narrowing %x again: %d rewritten, %v", module, count, err)
	}
}

// The seeds, which go test runs, are every mutation of two modules.
func FuzzNarrow(f *testing.F) {
	for _, module := range [][]byte{
		moduleOf(wrapSum(8), wrapSum(math.MinInt64)),
		moduleOf([]byte{0, 0x44, 0x42, 8, 0x7c, 0xa7, 0, 0, 0, 0, 0x1a, 0x41, 0}),
	} {
		for _, m := range testbuild.Mutations(module) {
			f.Add(m)
		}
	}
	f.Fuzz(checkNarrow)
}
