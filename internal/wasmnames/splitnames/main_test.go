package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

// The command writes what the tests' builds produce: the module the tests run, and the map
// testbuild.Names returns. Run again on its own output, it refuses, leaving both files alone.
func TestSplitWritesTheModuleAndTheMapOnce(t *testing.T) {
	module := filepath.Join(t.TempDir(), "tollgate.wasm")
	if err := os.WriteFile(module, testbuild.Unsplit(t, "./filter"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := split(module); err != nil {
		t.Fatal(err)
	}
	reduced, err := os.ReadFile(module)
	if err != nil || !bytes.Equal(reduced, testbuild.Product(t)) {
		t.Fatalf("the module written is not the tests' product (%v)", err)
	}
	text, err := os.ReadFile(module + ".names")
	if err != nil {
		t.Fatal(err)
	}
	names, err := wasmnames.ParseMap(text)
	if err != nil || !reflect.DeepEqual(names, testbuild.Names(t, "./filter")) {
		t.Fatalf("the map written is not the tests' map (%v)", err)
	}

	err = split(module)
	if err == nil || !strings.Contains(err.Error(), "split out already") {
		t.Fatalf("splitting again: %v, want a refusal", err)
	}
	if again, _ := os.ReadFile(module + ".names"); !bytes.Equal(again, text) {
		t.Error("the refused split changed the map")
	}
	if err := split(filepath.Join(t.TempDir(), "missing.wasm")); err == nil || !strings.Contains(err.Error(), "missing.wasm") {
		t.Errorf("a missing module: %v", err)
	}
}
