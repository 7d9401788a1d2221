package testbuild

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRootHoldsThisModulesGoMod(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !declares(data, modulePath) {
		t.Fatalf("%s/go.mod does not declare %s: %v", root, modulePath, err)
	}
}

func TestDeclares(t *testing.T) {
	for _, tt := range []struct {
		gomod string
		want  bool
	}{
		{"module github.com/tollgate-proxy/tollgate\n\ngo 1.26.0\n", true},
		{"// a comment\nmodule   github.com/tollgate-proxy/tollgate  \n", true},
		{"module github.com/tollgate-proxy/tollgate/tools\n", false},
		{"require github.com/tollgate-proxy/tollgate v1.0.0\n", false},
	} {
		if got := declares([]byte(tt.gomod), modulePath); got != tt.want {
			t.Errorf("%q: got %v, want %v", tt.gomod, got, tt.want)
		}
	}
}

// A module is a reactor built for wasip1: it starts with the Wasm magic and version, and the
// result of a build is kept, so a second call returns the same bytes without building again.
func TestModuleIsBuiltOnce(t *testing.T) {
	first := Module(t, "./internal/host/testdata/probe")
	if !bytes.HasPrefix(first, []byte("\x00asm\x01\x00\x00\x00")) {
		t.Fatalf("the build is not a Wasm binary: % x", first[:min(8, len(first))])
	}
	second := Module(t, "./internal/host/testdata/probe")
	if &first[0] != &second[0] {
		t.Error("the second call built the module again")
	}
}

// A package that does not build is an error naming the command and the compiler's output.
func TestBuildFailureIsReported(t *testing.T) {
	_, err := ModuleBytes("./internal/testbuild/testdata/nosuchpackage")
	if err == nil || !strings.Contains(err.Error(), "go build -buildmode=c-shared") || !strings.Contains(err.Error(), "nosuchpackage") {
		t.Fatalf("got %v, want the failed go build and its output", err)
	}
}

// The tests optimize with the flags make build uses: -Oz, the name section kept.
func TestOptimizerFlagsComeFromTheMakefile(t *testing.T) {
	flags, err := makeVariable("WASM_OPT_FLAGS")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(flags, "-Oz") || !strings.Contains(flags, "-g") {
		t.Fatalf("WASM_OPT_FLAGS %q: want -Oz and -g (names kept for trap backtraces)", flags)
	}
}

// The tests compile the module with the compiler flags make build uses: the configuration's
// package without inlining.
func TestCompilerFlagsComeFromTheMakefile(t *testing.T) {
	flags, err := makeVariable("WASM_GCFLAGS")
	if err != nil {
		t.Fatal(err)
	}
	if flags != modulePath+"/config=-l" {
		t.Fatalf("WASM_GCFLAGS %q: want the config package compiled without inlining", flags)
	}
	if _, err := makeVariable("NO_SUCH_VARIABLE"); err == nil {
		t.Fatal("a variable the Makefile does not set was found")
	}
}

// The host's test modules are built without the product's last steps: the module is the build's,
// and Names reads its name section, whole.
func TestHostModulesKeepTheirNames(t *testing.T) {
	module := Module(t, "./internal/host/testdata/probe")
	if unsplit := Unsplit(t, "./internal/host/testdata/probe"); &unsplit[0] != &module[0] {
		t.Error("a host test module was split")
	}
	names := Names(t, "./internal/host/testdata/probe")
	if len(names) < 100 {
		t.Fatalf("the probe's name map has %d names, want the whole name section", len(names))
	}
}

// Every module the benchmarks measure the filter against is built as the filter is: a probe built
// otherwise would count the optimizer's absence in what it stands for. The probes are the commands
// under bench/testdata (a directory of package main); the others there are libraries they share.
func TestEveryProbeIsOptimized(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := os.ReadDir(filepath.Join(root, "bench", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	probes := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, "bench", "testdata", d.Name(), "main.go"))
		if err != nil || !bytes.Contains(src, []byte("\npackage main\n")) {
			continue // not a command
		}
		probes++
		if pkg := "./bench/testdata/" + d.Name(); !optimized(pkg) {
			t.Errorf("%s is not among the optimized packages: it would be measured unoptimized", pkg)
		}
	}
	if probes < 3 {
		t.Errorf("found %d probes under bench/testdata, want the floor, surface and glue probes at least", probes)
	}
}
