package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// indexOf is the function index the map gives a name.
func indexOf(t *testing.T, names string, suffix string) uint32 {
	t.Helper()
	for _, line := range strings.Split(names, "\n") {
		if index, name, ok := strings.Cut(line, " "); ok && strings.HasSuffix(name, suffix) {
			var i uint32
			fmt.Sscan(index, &i)
			return i
		}
	}
	t.Fatalf("the map names no function ending in %s", suffix)
	return 0
}

// A trap in Envoy's log, as proxy-wasm-cpp-host's V8 prints it (src/v8/v8.cc,
// V8::getFailMessage: " 0x<offset> - <name>", or unknown(function index:N) where the module's
// name section has no name), comes out with every frame named from the map of the module's
// build; everything else is copied as it is, line endings included.
func TestBacktraceNamesTheUnnamedFrames(t *testing.T) {
	var text bytes.Buffer
	testbuild.Names(t, "./filter").WriteTo(&text)
	names := writeFile(t, "tollgate.wasm.names", text.String())
	hash := indexOf(t, text.String(), "internal_admission.sipHash24")
	admit := indexOf(t, text.String(), "internal_admission.__Gate_.Admit")
	entry := indexOf(t, text.String(), "proxy_on_request_headers")
	notInMap := 4_000_000
	log := fmt.Sprintf(`[2026-12-01 04:00:00.000][17][critical][wasm] [source/extensions/common/wasm/wasm_vm.cc:45] wasm log tollgate: Function: proxy_on_request_headers failed: Uncaught RuntimeError: unreachable
Proxy-Wasm plugin in-VM backtrace:
  0:  0x1a2b3 - unknown(function index:%d)
  1:  0x1c0de - unknown(function index:%d)
  2:  0x2f00d - proxy_on_request_headers
  3:  0x30000 - unknown(function index:%d)`+"\r\n"+`[2026-12-01 04:00:01.000][17][info][main] unknown(function index:x) stays
`, hash, admit, notInMap)
	want := fmt.Sprintf(`[2026-12-01 04:00:00.000][17][critical][wasm] [source/extensions/common/wasm/wasm_vm.cc:45] wasm log tollgate: Function: proxy_on_request_headers failed: Uncaught RuntimeError: unreachable
Proxy-Wasm plugin in-VM backtrace:
  0:  0x1a2b3 - github.com_tollgate_proxy_tollgate_internal_admission.sipHash24 (function index %d)
  1:  0x1c0de - github.com_tollgate_proxy_tollgate_internal_admission.__Gate_.Admit (function index %d)
  2:  0x2f00d - proxy_on_request_headers
  3:  0x30000 - unknown(function index:%d)`+"\r\n"+`[2026-12-01 04:00:01.000][17][info][main] unknown(function index:x) stays
`, hash, admit, notInMap)
	if entry == hash || entry == admit {
		t.Fatal("the map gives two functions one index")
	}
	code, stdout, stderr := runCLI(log, "backtrace", "--names", names)
	if code != 0 || stdout != want {
		t.Fatalf("exit %d, stderr %q; got\n%s\nwant\n%s", code, stderr, stdout, want)
	}
	if !strings.Contains(stderr, fmt.Sprintf("names no function %d: is it the map of the module Envoy ran?", notInMap)) {
		t.Errorf("stderr %q: want the index the map does not name", stderr)
	}

	// The embedded host's traps: wazero's stack trace, frames unnamed in the module as ".$N(".
	wazeroLog := fmt.Sprintf("wasm error: unreachable\nwasm stack trace:\n\t.$%d(i64,i64) i64\n\t.proxy_on_request_headers(i32,i32,i32) i32\n", hash)
	wazeroWant := "wasm error: unreachable\nwasm stack trace:\n\t.github.com_tollgate_proxy_tollgate_internal_admission.sipHash24(i64,i64) i64\n\t.proxy_on_request_headers(i32,i32,i32) i32\n"
	if code, stdout, stderr := runCLI(wazeroLog, "backtrace", "--names", names); code != 0 || stdout != wazeroWant {
		t.Errorf("wazero's trace: exit %d, stderr %q; got\n%s\nwant\n%s", code, stderr, stdout, wazeroWant)
	}

	// The last line without a line ending keeps none.
	code, stdout, _ = runCLI(strings.TrimSuffix(log, "\n"), "backtrace", "--names", names)
	if code != 0 || stdout != strings.TrimSuffix(want, "\n") {
		t.Errorf("without a final line ending: exit %d, got %q", code, stdout)
	}
}

func TestBacktraceRefusesWhatItCannotUse(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "tollgate.wasm.names")
	good := writeFile(t, "good.names", "3 main.main\n")
	for _, tt := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
		stdout string
	}{
		{"missing map", "", []string{"--names", missing}, 1, missing + ": no such file: the function name map is written by make build beside the module (build/tollgate.wasm.names)", ""},
		{"not a map", "", []string{"--names", writeFile(t, "config.json", `{"rules": []}`+"\n")}, 1, `config.json is not a function name map: line 1: "{\"rules\":" is not a function index`, ""},
		{"a module, not its map", "", []string{"--names", writeFile(t, "tollgate.wasm", "\x00asm\x01\x00\x00\x00")}, 1, "is not a function name map: line 1: the map ends without a newline", ""},
		{"empty map", "", []string{"--names", writeFile(t, "empty.names", "")}, 1, "empty.names is not a function name map: it names no function (make build writes the map beside the module", ""},
		{"an argument", "", []string{"--names", good, "envoy.log"}, 2, `unexpected argument "envoy.log": the log is read from stdin`, ""},
		{"unknown flag", "", []string{"--map", good}, 2, "flag provided but not defined: -map", ""},
		{"no frame", "all is well\n", []string{"--names", good}, 0, "the log has no unknown(function index:N) frame", "all is well\n"},
		{"a line too long", strings.Repeat("x", maxLogLine+1), []string{"--names", good}, 1, "a line of the log is longer than 1048576 bytes", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(tt.stdin, append([]string{"backtrace"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) || stdout != tt.stdout {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q", code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// Without --names the map is the one make build writes, build/tollgate.wasm.names.
func TestBacktraceReadsTheBuildsMapByDefault(t *testing.T) {
	t.Chdir(t.TempDir())
	code, stdout, stderr := runCLI("", "backtrace")
	if want := "build/tollgate.wasm.names: no such file"; code != 1 || stdout != "" || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--names FILE") {
		t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	writeFileAt(t, "build/tollgate.wasm.names", "5 main.main\n")
	code, stdout, stderr = runCLI("  0:  0x10 - unknown(function index:5)\n", "backtrace")
	if code != 0 || stdout != "  0:  0x10 - main.main (function index 5)\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func writeFileAt(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
