package wasmbin_test

import (
	"fmt"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
)

// Walking a module's sections: a custom section named "name", then a code section whose content
// is cut short. The error names the byte where the module ran out.
func ExampleSections() {
	module := []byte(wasmbin.Header)
	module = wasmbin.AppendSection(module, wasmbin.CustomSection, wasmbin.AppendName(nil, "name"))
	module = append(module, wasmbin.CodeSection, 9, 1, 2)
	sections, err := wasmbin.Sections(module)
	if err != nil {
		panic(err)
	}
	for sections.More() {
		start := sections.Offset()
		id, content := sections.Section()
		if sections.Err() != nil {
			break
		}
		fmt.Printf("section %d at byte %d: %d bytes\n", id, start, len(content.Left()))
	}
	fmt.Println(sections.Err())
	// Output:
	// section 0 at byte 8: 5 bytes
	// byte 17: 9 bytes announced, 2 left
}

// Rewriting every function body of a module: each `i32.const 7` becomes `i32.const 8`, the other
// instructions are copied as they are (SkipImmediates reads past what they carry).
func ExampleRewriteCode() {
	// Two bodies, no locals: `i32.const 7; drop; i32.const 9; drop; end` and `i32.const 7; drop; end`.
	code := []byte{2, 8, 0, 0x41, 7, 0x1a, 0x41, 9, 0x1a, 0x0b, 5, 0, 0x41, 7, 0x1a, 0x0b}
	module := wasmbin.AppendSection([]byte(wasmbin.Header), wasmbin.CodeSection, code)
	sevens := func(body []byte) ([]byte, int, error) {
		r := wasmbin.NewReader(body)
		r.SkipLocals()
		out := append([]byte(nil), body[:r.Offset()]...)
		count := 0
		for r.More() {
			start := r.Offset()
			op := r.Byte()
			if op == 0x41 && r.FollowedBy(7) {
				out = append(out, 0x41, 8)
				count++
				continue
			}
			r.SkipImmediates(op)
			out = append(out, body[start:r.Offset()]...)
		}
		return out, count, r.Err()
	}
	rewritten, count, err := wasmbin.RewriteCode(module, sevens)
	fmt.Println(count, err)
	fmt.Printf("% x\n", rewritten[len(wasmbin.Header):])
	// Output:
	// 2 <nil>
	// 0a 10 02 08 00 41 08 1a 41 09 1a 0b 05 00 41 08 1a 0b
}
