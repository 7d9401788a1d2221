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
