package bench

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
)

// Upstream Go's Wasm copies a value of more than 16 bytes that is not kept in registers (a struct
// of more than four fields, an array of more than one element), passed, returned or assigned, with
// memory.copy, and zeroes one of more than 32 bytes with memory.fill. wazero's compiler makes each
// of them a call out of the compiled code into the Go runtime's memmove (a fill one for each
// doubling of the bytes filled: internal/engine/wazevo/frontend/lower.go, OpcodeMiscMemoryFill),
// which no count of guest calls sees. instrumentBulkMemory makes them seen: BenchmarkCrossings
// counts them (bulk-copies/op, bulk-fills/op) in a module where each is a call.

// bulkFunctions are the indices of the two functions instrumentBulkMemory adds.
type bulkFunctions struct{ copy, fill uint32 }

// instrumentBulkMemory returns module with every memory.copy and memory.fill replaced by a call
// to one of two functions added at the end of its functions, which do just that instruction with
// the call's arguments: the module does what it did, one call more for each. Indices of existing
// functions do not change, so a name map of module still names them.
func instrumentBulkMemory(module []byte) ([]byte, bulkFunctions, error) {
	sections, err := wasmbin.Sections(module)
	if err != nil {
		return nil, bulkFunctions{}, err
	}
	// The new functions' index: after the imported and the defined functions. The sections come
	// in the order the specification sets (imports, then functions, then code).
	var imported, defined, newType uint32
	var fns bulkFunctions
	out := []byte(wasmbin.Header)
	for sections.More() {
		id, s := sections.Section()
		if err := sections.Err(); err != nil {
			return nil, fns, fmt.Errorf("section %d: %v", id, err)
		}
		content := s.Left()
		switch id {
		case wasmbin.ImportSection:
			imported = s.ImportKinds()[wasmbin.ImportFunction]
		case wasmbin.TypeSection: // one type more: (i32, i32, i32) -> ()
			newType = s.U32()
			content, err = wasmbin.AppendToVector(content, []byte{0x60, 3, wasmbin.TypeI32, wasmbin.TypeI32, wasmbin.TypeI32, 0})
		case wasmbin.FunctionSection: // two functions more, of that type
			defined = s.U32()
			fns = bulkFunctions{copy: imported + defined, fill: imported + defined + 1}
			ofType := wasmbin.AppendU32(nil, newType)
			content, err = wasmbin.AppendToVector(content, ofType, ofType)
		case wasmbin.CodeSection:
			content, err = instrumentBodies(s, fns)
		}
		if err == nil {
			err = s.Err()
		}
		if err != nil {
			return nil, fns, fmt.Errorf("section %d: %v", id, err)
		}
		out = wasmbin.AppendSection(out, id, content)
	}
	if fns.copy == 0 {
		return nil, fns, fmt.Errorf("the module has no function section")
	}
	return out, fns, nil
}

// instrumentBodies rewrites a code section's bodies, which s reads, and appends the two new ones.
func instrumentBodies(s *wasmbin.Reader, fns bulkFunctions) ([]byte, error) {
	content, _, err := wasmbin.RewriteBodies(s, func(body []byte) ([]byte, int, error) {
		rewritten, err := instrumentBody(body, fns)
		return rewritten, 0, err
	})
	if err != nil {
		return nil, err
	}
	// No locals; the three parameters, then the instruction and its memory indices, then end.
	var bodies [][]byte
	for _, instruction := range [][]byte{{wasmbin.OpPrefix, 10, 0, 0}, {wasmbin.OpPrefix, 11, 0}} {
		body := []byte{0, wasmbin.OpLocalGet, 0, wasmbin.OpLocalGet, 1, wasmbin.OpLocalGet, 2}
		body = append(append(body, instruction...), wasmbin.OpEnd)
		bodies = append(bodies, wasmbin.AppendBody(nil, body))
	}
	return wasmbin.AppendToVector(content, bodies...)
}

// instrumentBody replaces a body's memory.copy and memory.fill instructions by calls. It knows
// them in the shortest encoding, the one Go and binaryen write.
func instrumentBody(body []byte, fns bulkFunctions) ([]byte, error) {
	return rewriteInstructions(body, func(instruction string) []byte {
		switch instruction {
		case memoryCopy:
			return callOf(fns.copy)
		case memoryFill:
			return callOf(fns.fill)
		}
		return []byte(instruction)
	})
}

// memory.copy of memory 0 to memory 0, and memory.fill of memory 0, as Go and binaryen write them.
const (
	memoryCopy = "\xfc\x0a\x00\x00"
	memoryFill = "\xfc\x0b\x00"
)

// rewriteInstructions returns a function body with each of its instructions (its bytes, its
// immediates included) replaced by what rewrite makes of it; its locals stay as they are.
func rewriteInstructions(body []byte, rewrite func(instruction string) []byte) ([]byte, error) {
	r := wasmbin.NewReader(body)
	r.SkipLocals()
	out := append([]byte(nil), body[:r.Offset()]...)
	for r.More() {
		start := r.Offset()
		r.SkipImmediates(r.Byte())
		out = append(out, rewrite(string(body[start:r.Offset()]))...)
	}
	return out, r.Err()
}

// callOf is the call instruction of the function at index fn, as instrumentBody writes it.
func callOf(fn uint32) []byte { return wasmbin.AppendU32([]byte{wasmbin.OpCall}, fn) }

// Tollgate's module, instrumented, gives the same answers to the same requests, and each of its
// memory.copy and memory.fill instructions became a call to the function that does it, which a
// request's counts see.
func TestInstrumentBulkMemory(t *testing.T) {
	wasm := tollgateModule(t, statsTag)
	instrumented, fns, err := instrumentBulkMemory(wasm)
	if err != nil {
		t.Fatal(err)
	}
	before, after := bulkInstructions(t, wasm, fns), bulkInstructions(t, instrumented, fns)
	if before.copies == 0 || before.fills == 0 || before.copyCalls != 0 || before.fillCalls != 0 {
		t.Fatalf("the module before: %+v; want copies and fills, and no calls of functions it lacks", before)
	}
	// What is left are the two added functions' own instructions.
	want := bulkCounts{copies: 1, fills: 1, copyCalls: before.copies, fillCalls: before.fills}
	if after != want {
		t.Fatalf("the module instrumented: %+v, want %+v", after, want)
	}

	for _, rt := range requestTypes[:3] { // admitted, rejected, new key
		// answers gives the statuses of 100 requests to a module, with calls listening to it.
		answers := func(wasm []byte, calls *guestCalls) []int {
			r := newRig(t, wasm, rigOptions{config: rt.config, calls: calls})
			key := rt.prepare(t, r, 100)
			statuses := make([]int, 100)
			for i := range statuses {
				statuses[i] = r.do(t, key(i))
			}
			return statuses
		}
		calls := &guestCalls{bulk: &fns}
		plain, instrumentedAnswers := answers(wasm, nil), answers(instrumented, calls)
		if !slices.Equal(plain, instrumentedAnswers) {
			t.Errorf("%s: the instrumented module answered %v, the module %v", rt.name, instrumentedAnswers, plain)
		}
		if calls.copies == 0 {
			t.Errorf("%s: no memory.copy counted in 100 requests", rt.name)
		}
	}
}

type bulkCounts struct{ copies, fills, copyCalls, fillCalls int }

// bulkInstructions counts a module's memory.copy and memory.fill instructions and its calls of
// the functions fns names.
func bulkInstructions(t *testing.T, module []byte, fns bulkFunctions) bulkCounts {
	t.Helper()
	copyCall := string(callOf(fns.copy))
	fillCall := string(callOf(fns.fill))
	var c bulkCounts
	_, _, err := wasmbin.RewriteCode(module, func(body []byte) ([]byte, int, error) {
		_, err := rewriteInstructions(body, func(instruction string) []byte {
			switch instruction {
			case memoryCopy:
				c.copies++
			case memoryFill:
				c.fills++
			case copyCall:
				c.copyCalls++
			case fillCall:
				c.fillCalls++
			}
			return nil
		})
		return body, 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
