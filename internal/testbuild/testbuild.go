package testbuild

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/wasmaddr"
	"github.com/tollgate-proxy/tollgate/internal/wasmdata"
	"github.com/tollgate-proxy/tollgate/internal/wasmjump"
	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

// modulePath is the module path of this repository, how Root recognises its go.mod.
const modulePath = "github.com/tollgate-proxy/tollgate"

// Module builds the package pkg (relative to the repository root, e.g. "./filter") into a Wasm
// module with the given build tags and returns its bytes; a failed build fails tb.
func Module(tb testing.TB, pkg string, tags ...string) []byte {
	tb.Helper()
	return built(tb, pkg, tags).wasm
}

// Product is the module `make build` writes to build/tollgate.wasm.
func Product(tb testing.TB) []byte {
	tb.Helper()
	return Module(tb, "./filter")
}

// Names is the function name map of the module Module returns: for the packages built as the
// product is (optimized: the filter and the benchmarks' probes) what `make build` writes beside the
// module (build/tollgate.wasm.names), the names of all its functions, where the module keeps only
// its exported functions' (internal/wasmnames); for the other modules, the names of their name
// section.
func Names(tb testing.TB, pkg string, tags ...string) wasmnames.Map {
	tb.Helper()
	return built(tb, pkg, tags).names
}

// Unsplit is the module as it was built before its names were split out of it (the go build, the
// optimizer and the packing of its data of `make build`, without the last step): what Names was
// read from.
func Unsplit(tb testing.TB, pkg string, tags ...string) []byte {
	tb.Helper()
	return built(tb, pkg, tags).unsplit
}

// Unpacked is the module as it was built before its data segments were packed (the go build and,
// for the filter and the benchmarks' probes, narrowaddr, threadjumps and wasm-opt; names not split): the
// module internal/wasmdata's start function stands in for, which the start-up benchmarks compare.
func Unpacked(tb testing.TB, pkg string, tags ...string) []byte {
	tb.Helper()
	return built(tb, pkg, tags).unpacked
}

// built is the build of pkg with tags; a failed build fails tb.
func built(tb testing.TB, pkg string, tags []string) *build {
	tb.Helper()
	b := moduleBuild(pkg, tags)
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b
}

// ModuleBytes is Module for callers without a testing.TB, such as a TestMain or a sync.Once.
// The result of each distinct build, error included, is kept for the life of the process: the
// returned bytes are shared and must not be modified.
func ModuleBytes(pkg string, tags ...string) ([]byte, error) {
	b := moduleBuild(pkg, tags)
	return b.wasm, b.err
}

func moduleBuild(pkg string, tags []string) *build {
	key := pkg + " " + strings.Join(tags, ",")
	modules.Lock()
	b, ok := modules.builds[key]
	if !ok {
		b = &build{}
		modules.builds[key] = b
	}
	modules.Unlock()
	b.once.Do(func() { b.unpacked, b.unsplit, b.wasm, b.names, b.err = buildModule(pkg, tags) })
	return b
}

type build struct {
	once     sync.Once
	unpacked []byte
	unsplit  []byte
	wasm     []byte
	names    wasmnames.Map
	err      error
}

var modules = struct {
	sync.Mutex
	builds map[string]*build
}{builds: map[string]*build{}}

// buildModule builds a module, returning it before the packing of its data segments, before and
// after the split of its names, and the names.
func buildModule(pkg string, tags []string) (unpacked, unsplit, wasm []byte, names wasmnames.Map, err error) {
	unpacked, err = compileModule(pkg, tags)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if !optimized(pkg) {
		names, err := wasmnames.FunctionNames(unpacked)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%s: %v", pkg, err)
		}
		return unpacked, unpacked, unpacked, names, nil
	}
	if unsplit, _, err = wasmdata.Pack(unpacked); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%s: packing its data: %v", pkg, err)
	}
	wasm, names, err = wasmnames.Split(unsplit)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%s: splitting its names out: %v", pkg, err)
	}
	return unpacked, unsplit, wasm, names, nil
}

// compileModule runs go build and, for the packages in optimized, the optimizer.
func compileModule(pkg string, tags []string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "tollgate-module-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "module.wasm")
	gcflags, err := makeVariable("WASM_GCFLAGS")
	if err != nil {
		return nil, err
	}
	args := []string{"build", "-buildmode=c-shared", "-trimpath", "-gcflags", gcflags}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "-o", out, pkg)
	if err := goCommand([]string{"GOOS=wasip1", "GOARCH=wasm"}, args...); err != nil {
		return nil, err
	}
	if optimized(pkg) {
		if err := optimize(out); err != nil {
			return nil, err
		}
	}
	return os.ReadFile(out)
}

// optimized is whether a package is built as the product is, optimizer and the split of the names
// included: the filter, and every probe under bench/testdata it is measured against (a probe built
// otherwise would measure the optimizer's absence along with what it stands for). The other test
// modules (the host's, the jump threader's) test those packages, and skip both.
func optimized(pkg string) bool {
	return pkg == "./filter" || strings.HasPrefix(pkg, "./bench/testdata/")
}

// optimize runs the optimizer step of `make build` on a module, in place: the narrowing of its
// address arithmetic (internal/wasmaddr) and the threading of its jumps (internal/wasmjump), then
// wasm-opt with the Makefile's WASM_OPT_FLAGS, when wasm-opt is installed (as make build, which
// falls back to the unoptimized module without it).
// buildModule then packs its data segments (internal/wasmdata), so that the tests run the module
// Envoy loads.
func optimize(module string) error {
	wasmOpt, err := exec.LookPath("wasm-opt")
	if err != nil {
		return nil
	}
	flags, err := makeVariable("WASM_OPT_FLAGS")
	if err != nil {
		return err
	}
	if _, err := wasmaddr.NarrowFile(module); err != nil {
		return err
	}
	if _, err := wasmjump.ThreadFile(module); err != nil {
		return err
	}
	cmd := exec.Command(wasmOpt, append(strings.Fields(flags), module, "-o", module+".opt")...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, output)
	}
	return os.Rename(module+".opt", module)
}

// makeVariable reads a variable the Makefile sets with ?= (WASM_GCFLAGS, WASM_OPT_FLAGS), so
// that the tests build the module with the flags make build uses, written in one place.
func makeVariable(variable string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(makefile), "\n") {
		if name, value, ok := strings.Cut(line, "?="); ok && strings.TrimSpace(name) == variable {
			return strings.TrimSpace(value), nil
		}
	}
	return "", errors.New("testbuild: the Makefile sets no " + variable)
}

// Command builds the package pkg (relative to the repository root, e.g. "./cmd/tollgate") into a
// native executable at out. It builds without -trimpath, as go test builds, so that the packages
// the tests already compiled come from the build cache.
func Command(pkg, out string) error {
	return goCommand([]string{"GOOS=", "GOARCH="}, "build", "-o", out, pkg)
}

// goCommand runs the go command in the repository root with env added to the environment.
func goCommand(env []string, args ...string) error {
	root, err := Root()
	if err != nil {
		return err
	}
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = root
	// GOFLAGS could carry flags of the test run, such as -race, that a wasm build refuses.
	cmd.Env = append(os.Environ(), append([]string{"GOFLAGS="}, env...)...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", strings.Join(env, " "), strings.Join(cmd.Args, " "), err, output.Bytes())
	}
	return nil
}

// goTool is the go command of the toolchain running the tests when there is one (GOROOT, as go
// test sets it), else the one on PATH.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if path := filepath.Join(root, "bin", "go"); isFile(path) {
			return path
		}
	}
	return "go"
}

func isFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// Root returns the repository root: the nearest directory, from the working directory up, whose
// go.mod declares this module.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && declares(data, modulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testbuild: no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

func declares(gomod []byte, path string) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if fields := strings.Fields(line); len(fields) == 2 && fields[0] == "module" && fields[1] == path {
			return true
		}
	}
	return false
}
