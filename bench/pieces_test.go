package bench

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
	"github.com/tollgate-proxy/tollgate/internal/wasmdata"
	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

// modulePieces are the parts of the module BenchmarkModuleSize reports, in the order the report
// lists them: the code of the pieces of Go that make it up (function bodies, by package, from the
// function name map `make build` writes beside the module, build/tollgate.wasm.names), the data
// section (Go's read-only data: pclntab, types, strings; packed by internal/wasmdata) with the
// start function that unpacks it, the name
// section (the entry points' names, all the module keeps) and everything else.
var modulePieces = []struct {
	unit     string
	prefixes []string // of function names, '/', '-', '(', ')' and '*' written as '_'
}{
	{"code-runtime-bytes", []string{"runtime", "internal_runtime", "type_.", "go_", "_rt0", "memeqbody", "cmpbody", "wasm_", "gcWriteBarrier", "callRet",
		"time.now"}}, // the runtime's clock, which it provides to package time by name
	{"code-config-bytes", []string{"github.com_tollgate_proxy_tollgate_config."}},
	{"code-admission-bytes", []string{"github.com_tollgate_proxy_tollgate_internal_admission."}},
	{"code-filter-bytes", []string{"main.", "proxy_", "github.com_tollgate_proxy_tollgate_internal_plugin.", "github.com_tollgate_proxy_tollgate_internal_abi.", "github.com_tollgate_proxy_tollgate_internal_wire.",
		"github.com_tollgate_proxy_tollgate_internal_rls.", "github.com_tollgate_proxy_tollgate_internal_version.",
		"github.com_tollgate_proxy_tollgate_internal_usage.", "github.com_tollgate_proxy_tollgate_internal_heavy.",
		"github.com_tollgate_proxy_tollgate_internal_digest."}},
	{"code-limiter-netaddr-bytes", []string{"github.com_tollgate_proxy_tollgate_limiter.", "github.com_tollgate_proxy_tollgate_internal_netaddr.",
		"github.com_tollgate_proxy_tollgate_internal_duration."}},
	{"code-strconv-bytes", []string{"strconv.", "internal_strconv."}},
	{"code-other-bytes", nil},                     // the rest of the standard library
	{"data-bytes", []string{wasmdata.UnpackName}}, // the data section, and the function that unpacks it
	{"names-bytes", nil},
	{"other-bytes", nil},
}

// pieceSizes measures a module's pieces (modulePieces) in bytes, its functions named by names (the
// module's name map); they add up to its size.
func pieceSizes(wasm []byte, names wasmnames.Map) (map[string]int, error) {
	sections, err := wasmbin.Sections(wasm)
	if err != nil {
		return nil, err
	}
	sizes := map[string]int{"other-bytes": len(wasmbin.Header)}
	var code *wasmbin.Reader
	imported := uint32(0)
	for sections.More() {
		start := sections.Offset()
		id, content := sections.Section()
		whole := sections.Offset() - start
		switch id {
		case wasmbin.ImportSection: // functions come first in the index space
			imported = content.ImportKinds()[wasmbin.ImportFunction]
			if err := content.Err(); err != nil {
				return nil, fmt.Errorf("import section: %v", err)
			}
			sizes["other-bytes"] += whole
		case wasmbin.CodeSection:
			code = content
			sizes["other-bytes"] += whole // less the bodies, below
		case wasmbin.DataSection:
			sizes["data-bytes"] += whole
		case wasmbin.CustomSection:
			name := content.Name()
			if err := content.Err(); err != nil {
				return nil, fmt.Errorf("custom section: %v", err)
			}
			if name == "name" {
				sizes["names-bytes"] += whole
			} else {
				sizes["other-bytes"] += whole
			}
		default:
			sizes["other-bytes"] += whole
		}
	}
	if err := sections.Err(); err != nil {
		return nil, err
	}
	if code == nil {
		return nil, errors.New("no code section")
	}
	for i, n := uint32(0), code.U32(); i < n && code.Err() == nil; i++ {
		start := code.Offset()
		code.Bytes(code.U32())
		body := code.Offset() - start
		name, _ := names.Lookup(imported + i)
		sizes[pieceOf(name)] += body
		sizes["other-bytes"] -= body
	}
	code.End()
	return sizes, code.Err()
}

// pieceOf is the piece a function belongs to, by its name as the Go linker or binaryen wrote it.
func pieceOf(name string) string {
	name = strings.TrimPrefix(strings.TrimPrefix(name, "."), "byn$mgfn-shared$")
	name = strings.NewReplacer("/", "_", "-", "_", "(", "_", ")", "_", "*", "_").Replace(name)
	for _, p := range modulePieces {
		for _, prefix := range p.prefixes {
			if strings.HasPrefix(name, prefix) {
				return p.unit
			}
		}
	}
	return "code-other-bytes"
}

// The pieces add up to the module, and the code is found where it is: most of it in the runtime,
// and some of it in each of Tollgate's packages, by the names of the map; the name section left in
// the module is the entry points' names, a few hundred bytes.
func TestPieceSizesAddUp(t *testing.T) {
	wasm := tollgateModule(t)
	sizes, err := pieceSizes(wasm, tollgateNames(t))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range modulePieces {
		total += sizes[p.unit]
	}
	if total != len(wasm) || len(sizes) != len(modulePieces) {
		t.Fatalf("pieces %v add up to %d bytes, the module has %d", sizes, total, len(wasm))
	}
	for _, p := range modulePieces {
		if sizes[p.unit] <= 0 {
			t.Errorf("%s: %d bytes", p.unit, sizes[p.unit])
		}
	}
	if sizes["names-bytes"] > 1024 {
		t.Errorf("the name section has %d bytes: more than the entry points' names", sizes["names-bytes"])
	}
	if sizes["code-runtime-bytes"] < sizes["code-other-bytes"] {
		t.Errorf("the runtime's code (%d bytes) is less than the rest of the standard library's (%d): names not read?",
			sizes["code-runtime-bytes"], sizes["code-other-bytes"])
	}
}
