package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

const versionTestConfig = `{"rules": [{"name": "per-api-key", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]}]}`

// startupLog starts one VM of module and returns its info-level log lines.
func startupLog(t *testing.T, module []byte) []string {
	t.Helper()
	var lines []string
	h, err := host.New(context.Background(), module, host.Options{
		PluginName: "tollgate", PluginConfig: []byte(versionTestConfig), CompilationCache: cache,
		Log: func(e host.LogEntry) {
			if e.Level == 2 {
				lines = append(lines, e.Message)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	if _, err := h.NewVM(context.Background()); err != nil {
		t.Fatal(err)
	}
	return lines
}

// A module built without the version stamp (as the tests build it) says so in its start-up line.
func TestStartupLineOfAPlainBuildSaysDev(t *testing.T) {
	lines := startupLog(t, module(t))
	want := "tollgate dev: started with 1 rule(s), failure_mode allow"
	if len(lines) != 1 || lines[0] != want {
		t.Fatalf("info lines %q, want [%q]", lines, want)
	}
}

// `make build` stamps the version into the module's start-up line and `tollgate version`, and
// writes the module's checksum next to it in sha256sum's format, and its function name map: the
// module names its entry points as the tests' builds do, the map every function as theirs. It runs
// make itself, with the version and the output paths overridden, so what is checked is the
// Makefile's own recipe.
func TestMakeBuildStampsVersionAndWritesChecksum(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed to test `make build`: %v", err)
	}
	const version = "v0.0.0-e2e.1"
	dir := t.TempDir()
	wasm, bin := filepath.Join(dir, "tollgate.wasm"), filepath.Join(dir, "tollgate")
	cmd := exec.Command("make", "--no-print-directory", "build", "VERSION="+version, "WASM="+wasm, "BIN="+bin)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "built "+wasm+" "+version+" (") {
		t.Errorf("make build does not report the version it built:\n%s", out)
	}

	module, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	lines := startupLog(t, module)
	if want := "tollgate " + version + ": started with 1 rule(s), failure_mode allow"; len(lines) != 1 || lines[0] != want {
		t.Errorf("info lines %q, want [%q]", lines, want)
	}

	sum, err := os.ReadFile(wasm + ".sha256")
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(module)
	if want := hex.EncodeToString(digest[:]) + "  tollgate.wasm\n"; string(sum) != want {
		t.Errorf("tollgate.wasm.sha256 holds %q, want %q", sum, want)
	}

	text, err := os.ReadFile(wasm + ".names")
	if err != nil {
		t.Fatal(err)
	}
	names, err := wasmnames.ParseMap(text)
	if err != nil {
		t.Fatalf("tollgate.wasm.names: %v", err)
	}
	if want := testbuild.Names(t, "./filter"); !reflect.DeepEqual(names, want) {
		t.Errorf("tollgate.wasm.names has %d names, the tests' build %d, or other ones", len(names), len(want))
	}
	kept, err := wasmnames.FunctionNames(module)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := wasmnames.FunctionNames(testbuild.Product(t)); !reflect.DeepEqual(kept, want) || len(kept) > 20 {
		t.Errorf("the module names %v, the tests' build %v: want the entry points alone", kept, want)
	}

	printed, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "tollgate " + version + "\n"; string(printed) != want {
		t.Errorf("tollgate version printed %q, want %q", printed, want)
	}
}
