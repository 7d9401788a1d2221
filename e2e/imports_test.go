package e2e

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// minimumEnvoy is the oldest Envoy generation Tollgate supports (docs/envoy.md, "Supported versions"),
// and abiVersion the proxy-wasm ABI the module must declare.
const (
	minimumEnvoy = host.Envoy133
	abiVersion   = "0_2_1"
)

// moduleInterface is what Envoy looks at when it loads a module: its imports and exports.
type moduleInterface struct {
	imports         []string // "module.name", sorted, each once
	importsMemory   bool
	exports         map[string]bool
	exportsMemory   bool
	abiMarkerParams int
}

func readInterface(t *testing.T, wasm []byte) moduleInterface {
	t.Helper()
	ctx := context.Background()
	// The hosts' configuration and compilation cache: the module is compiled once for both.
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	defer r.Close(ctx)
	compiled, err := r.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	mi := moduleInterface{exports: map[string]bool{}}
	for _, def := range compiled.ImportedFunctions() {
		module, name, _ := def.Import()
		mi.imports = append(mi.imports, module+"."+name)
	}
	sort.Strings(mi.imports)
	mi.imports = slices.Compact(mi.imports) // Go may import one function twice
	mi.importsMemory = len(compiled.ImportedMemories()) > 0
	for name, def := range compiled.ExportedFunctions() {
		mi.exports[name] = true
		if name == "proxy_abi_version_"+abiVersion {
			mi.abiMarkerParams = len(def.ParamTypes()) + len(def.ResultTypes())
		}
	}
	_, mi.exportsMemory = compiled.ExportedMemories()["memory"]
	return mi
}

// notProvided lists the imports that the Envoy generation does not provide: each one alone makes
// Envoy refuse the module ("Failed to load Wasm module due to a missing import").
func notProvided(imports []string, profile host.Profile) []string {
	provided := map[string]bool{}
	for _, name := range host.ProvidedImports(profile, abiVersion) {
		provided[name] = true
	}
	var missing []string
	for _, name := range imports {
		if !provided[name] {
			missing = append(missing, name)
		}
	}
	return missing
}

// The module loads in the oldest supported Envoy: it imports nothing Envoy 1.33 lacks, declares
// proxy-wasm ABI 0.2.1, and exports what Envoy needs to start it.
func TestModuleLoadsInTheMinimumEnvoy(t *testing.T) {
	t.Parallel()
	wasm := module(t)
	mi := readInterface(t, wasm)
	t.Logf("the module imports %d functions: %s", len(mi.imports), strings.Join(mi.imports, " "))

	if missing := notProvided(mi.imports, minimumEnvoy); len(missing) > 0 {
		t.Errorf("the module imports what %v does not provide: %s", minimumEnvoy, strings.Join(missing, ", "))
	}
	if mi.importsMemory {
		t.Error("the module imports a memory; Envoy provides none, the module must export its own")
	}
	tests := []struct {
		export, why string
	}{
		{"proxy_abi_version_" + abiVersion, "Envoy picks the ABI by this marker export and refuses a module without one"},
		{"_initialize", "Envoy runs a reactor's _initialize (Go's runtime and init functions) before anything else"},
		{"proxy_on_memory_allocate", "Envoy needs an allocator to hand the module variable-size results"},
		{"proxy_on_context_create", "Envoy creates every root and stream context through it"},
		{"proxy_on_vm_start", "a root context starts through it"},
		{"proxy_on_configure", "the plugin configuration arrives through it"},
		{"proxy_on_request_headers", "the rate-limit decision is made in it"},
	}
	for _, tt := range tests {
		if !mi.exports[tt.export] {
			t.Errorf("the module does not export %s: %s", tt.export, tt.why)
		}
	}
	if mi.exports["proxy_abi_version_"+abiVersion] && mi.abiMarkerParams != 0 {
		t.Errorf("proxy_abi_version_%s takes or returns values; the marker is a function of no arguments", abiVersion)
	}
	for _, other := range []string{"proxy_abi_version_0_1_0", "proxy_abi_version_0_2_0"} {
		if mi.exports[other] {
			t.Errorf("the module also exports %s; Envoy takes the first marker it finds, so declare one ABI", other)
		}
	}
	if !mi.exportsMemory {
		t.Error(`the module does not export its memory as "memory"`)
	}
	if mi.exports["_start"] {
		t.Error("the module exports _start: it is a command, not a reactor; build with -buildmode=c-shared")
	}
	// Names are not enough: Envoy also refuses an import with another signature. The host checks
	// signatures the same way on load.
	h, err := host.New(context.Background(), wasm, host.Options{Profile: minimumEnvoy, CompilationCache: cache})
	if err != nil {
		t.Fatalf("%v refuses the module: %v", minimumEnvoy, err)
	}
	defer h.Close(context.Background())
	if h.ABIVersion() != abiVersion {
		t.Errorf("the host reads ABI %s, want %s", h.ABIVersion(), abiVersion)
	}
}

// The check above does catch a module Envoy 1.33 cannot load: one that touches the file system
// imports WASI functions that only Envoy 1.39 provides.
func TestImportCheckCatchesFunctionsEnvoy133Lacks(t *testing.T) {
	t.Parallel()
	wasm := testbuild.Module(t, "./internal/host/testdata/fsimport")
	mi := readInterface(t, wasm)
	missing := notProvided(mi.imports, minimumEnvoy)
	if !slices.Contains(missing, "wasi_snapshot_preview1.path_filestat_get") {
		t.Fatalf("imports not provided by %v: %q; want wasi_snapshot_preview1.path_filestat_get among them", minimumEnvoy, missing)
	}
	if still := notProvided(mi.imports, host.Envoy139); len(still) > 0 {
		t.Fatalf("%v provides every import of the probe, but the check reports %q", host.Envoy139, still)
	}
}

// The module links the standard library, the SDK's pure-Go types and Tollgate's own packages,
// nothing else: the dependencies of the tests and tools (go-control-plane, Istio's API, YAML,
// wazero) must never reach it.
func TestModuleLinksNoOtherModules(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./filter")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{"github.com/tollgate-proxy/tollgate/", "github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"}
	for _, pkg := range strings.Fields(string(out)) {
		if !slices.ContainsFunc(allowed, func(prefix string) bool { return strings.HasPrefix(pkg, prefix) }) {
			t.Errorf("the module links %s", pkg)
		}
	}
}

// The module links neither package time nor what importing it brings (internal/godebug, which
// registers the runtime's metrics, and syscall's file access): a twelfth of the module for
// nothing the filter uses (internal/duration stands in for time.Duration).
func TestModuleLinksNoPackageTime(t *testing.T) {
	root, err := testbuild.Root()
	if err != nil {
		t.Fatal(err)
	}
	goTool := "go"
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		goTool = goroot + "/bin/go"
	}
	cmd := exec.Command(goTool, "list", "-deps", "./filter")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./filter: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/tollgate-proxy/tollgate/internal/duration") {
		t.Fatalf("the module's packages %v do not include internal/duration: not the module's list?", deps)
	}
	for _, unwanted := range []string{"time", "internal/godebug", "syscall"} {
		if slices.Contains(deps, unwanted) {
			t.Errorf("the module links %s", unwanted)
		}
	}
}

// wasiImports returns the names of a module's WASI imports.
func wasiImports(mi moduleInterface) map[string]bool {
	names := map[string]bool{}
	for _, imp := range mi.imports {
		if name, ok := strings.CutPrefix(imp, "wasi_snapshot_preview1."); ok {
			names[name] = true
		}
	}
	return names
}

// moduleImportsMarker comes before the paragraph of docs/envoy.md that lists every WASI function
// the module imports.
const moduleImportsMarker = "<!-- module-imports: wasi_snapshot_preview1 -->"

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	identifier = regexp.MustCompile(`[a-z_]+`)
)

// The WASI functions the documentation names are the module's: the list in docs/envoy.md is
// exactly its imports, and every other WASI function named anywhere (in backticks) is one it
// imports, or one that only Envoy 1.39 provides (troubleshooting names those as what a modified
// build that uses the file system imports, and Envoy 1.33 refuses).
func TestDocumentedImportsAreTheModules(t *testing.T) {
	t.Parallel()
	imported := wasiImports(readInterface(t, module(t)))
	wasiOf := func(profile host.Profile) map[string]bool {
		return wasiImports(moduleInterface{imports: host.ProvidedImports(profile, abiVersion)})
	}
	wasi, old := wasiOf(host.Envoy139), wasiOf(minimumEnvoy)
	mayName := func(name string) bool { return imported[name] || !old[name] }
	root, err := testbuild.Root()
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md"), filepath.Join(root, "SECURITY.md"))
	listed := 0
	for _, path := range docs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range backticked.FindAllStringSubmatch(line, -1) {
				for _, word := range identifier.FindAllString(m[1], -1) {
					if wasi[word] && !mayName(word) {
						t.Errorf("%s:%d: names %s, which the module does not import", name, i+1, word)
					}
				}
			}
		}
		_, after, found := strings.Cut(string(data), moduleImportsMarker+"\n")
		if !found {
			continue
		}
		listed++
		paragraph, _, _ := strings.Cut(after, "\n\n")
		documented := map[string]bool{}
		for _, m := range backticked.FindAllStringSubmatch(paragraph, -1) {
			if wasi[m[1]] {
				documented[m[1]] = true
			}
		}
		if !maps.Equal(documented, imported) {
			t.Errorf("%s lists the WASI imports %v; the module imports %v", name, slices.Sorted(maps.Keys(documented)), slices.Sorted(maps.Keys(imported)))
		}
	}
	if listed != 1 {
		t.Errorf("%d documents list the module's WASI imports after %q, want docs/envoy.md alone", listed, moduleImportsMarker)
	}
}
