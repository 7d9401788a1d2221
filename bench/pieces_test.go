package bench

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

// modulePieces are the parts of the module BenchmarkModuleSize reports, in the order the report
// lists them: the code of the pieces of Go that make it up (function bodies, by package, from the
// function name map `make build` writes beside the module, build/tollgate.wasm.names), the data
// section (Go's read-only data: pclntab, types, strings; no optimizer touches it), the name
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
	{"code-other-bytes", nil}, // the rest of the standard library
	{"data-bytes", nil},
	{"names-bytes", nil},
	{"other-bytes", nil},
}

// pieceSizes measures a module's pieces (modulePieces) in bytes, its functions named by names (the
// module's name map); they add up to its size.
func pieceSizes(wasm []byte, names wasmnames.Map) (map[string]int, error) {
	sizes := map[string]int{}
	if len(wasm) < 8 {
		return nil, errors.New("not a module")
	}
	sizes["other-bytes"] = 8
	var code []byte
	imported := 0
	for rest := wasm[8:]; len(rest) > 0; {
		id := rest[0]
		n, k := uleb(rest[1:])
		if k == 0 || 1+k+n > len(rest) {
			return nil, errors.New("truncated section")
		}
		body, whole := rest[1+k:1+k+n], 1+k+n
		rest = rest[whole:]
		switch id {
		case 2: // imports: functions come first in the index space
			imported = countFunctionImports(body)
			sizes["other-bytes"] += whole
		case 10:
			code = body
			sizes["other-bytes"] += whole // less the bodies, below
		case 11:
			sizes["data-bytes"] += whole
		case 0:
			nameLen, k := uleb(body)
			if string(body[k:k+nameLen]) == "name" {
				sizes["names-bytes"] += whole
			} else {
				sizes["other-bytes"] += whole
			}
		default:
			sizes["other-bytes"] += whole
		}
	}
	count, k := uleb(code)
	code = code[k:]
	for i := 0; i < count; i++ {
		n, k := uleb(code)
		if k == 0 || k+n > len(code) {
			return nil, errors.New("truncated function body")
		}
		name, _ := names.Lookup(uint32(imported + i))
		unit := pieceOf(name)
		sizes[unit] += k + n
		sizes["other-bytes"] -= k + n
		code = code[k+n:]
	}
	return sizes, nil
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

func uleb(b []byte) (int, int) {
	v, shift := 0, 0
	for i, c := range b {
		v |= int(c&0x7f) << shift
		if c < 0x80 {
			return v, i + 1
		}
		shift += 7
	}
	return 0, 0
}

// countFunctionImports counts the function imports of an import section.
func countFunctionImports(b []byte) int {
	count, k := uleb(b)
	b = b[k:]
	functions := 0
	for range count {
		for range 2 { // module and field names
			n, k := uleb(b)
			b = b[k+n:]
		}
		kind := b[0]
		b = b[1:]
		switch kind {
		case 0: // function: type index
			_, k := uleb(b)
			b = b[k:]
			functions++
		case 1: // table: element type, limits
			b = skipLimits(b[1:])
		case 2: // memory: limits
			b = skipLimits(b)
		case 3: // global: type, mutability
			b = b[2:]
		}
	}
	return functions
}

func skipLimits(b []byte) []byte {
	flags := b[0]
	_, k := uleb(b[1:])
	b = b[1+k:]
	if flags&1 != 0 {
		_, k = uleb(b)
		b = b[k:]
	}
	return b
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
