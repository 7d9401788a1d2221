package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if modulePath != "" {
		os.RemoveAll(filepath.Dir(modulePath))
	}
	os.Exit(code)
}

var (
	moduleOnce sync.Once
	modulePath string
	moduleErr  error
)

// builtModule is the filter built as `make build` does (internal/testbuild), written once into a
// directory of the test's own.
func builtModule(t *testing.T) string {
	t.Helper()
	moduleOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tollgate-cmd-")
		if err != nil {
			moduleErr = err
			return
		}
		modulePath = filepath.Join(dir, "tollgate.wasm")
		wasm, err := testbuild.ModuleBytes("./filter")
		if err == nil {
			err = os.WriteFile(modulePath, wasm, 0o644)
		}
		moduleErr = err
	})
	if moduleErr != nil {
		t.Fatal(moduleErr)
	}
	return modulePath
}

const simulateConfig = `{"rules": [{"name": "per-ip", "key": [{"client_ip": {}}],
  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`

func TestSimulateRejectsBadUsage(t *testing.T) {
	valid := writeFile(t, "valid.json", simulateConfig)
	invalid := writeFile(t, "invalid.json", `{"rules": [{"name": "r", "key": [], "limits": []}]}`)
	log := writeFile(t, "access.log", `192.0.2.1 - - [30/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 5`+"\n")
	junk := writeFile(t, "junk.log", "a\nb\n"+`{"start_time":"2026-11-30T10:00:00Z","method":"GET","path":"/"}`+"\n")
	out := t.TempDir()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"simulate"}, 2, "--config is required"},
		{[]string{"simulate", "--config", valid, "--out", out}, 2, "--log is required"},
		{[]string{"simulate", "--config", valid, "--log", log}, 2, "--out is required"},
		{[]string{"simulate", "--config", valid, "--log", log, "--out", out, "--format", "clf"}, 2, `unknown log format "clf"`},
		{[]string{"simulate", "--config", valid, "--log", log, "--out", out, "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"simulate", "--config", valid, "--log", log, "--out", out, "--phases", "0"}, 2, "--phases 0 is out of range: use 1 to 64"},
		{[]string{"simulate", "--config", valid, "--log", log, "--out", out, "--suggest", "--suggest-percent", "100"}, 2,
			"--suggest-percent 100 is out of range: use more than 0 and less than 100, such as 1"},
		{[]string{"simulate", "--config", invalid, "--log", log, "--out", out}, 1, invalid + ": rules[0].key: "},
		{[]string{"simulate", "--config", valid, "--compare", invalid, "--log", log, "--out", out}, 1, invalid + ": rules[0].key: "},
		{[]string{"simulate", "--config", valid, "--log", log, "--out", out, "--wasm", filepath.Join(t.TempDir(), "none.wasm")}, 1, "cannot read the module"},
		{[]string{"simulate", "--config", valid, "--log", filepath.Join(t.TempDir(), "none.log"), "--out", out, "--wasm", valid}, 1, "none.log"},
		{[]string{"simulate", "--config", valid, "--log", junk, "--out", out, "--wasm", valid}, 1, "2 of 3 lines (66.7 %) are not envoy-json requests"},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI("", tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d stderr %q; want exit %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
}

// A combined log through two configurations: the files, the table and the skipped line.
func TestSimulateWritesSummaryAndReport(t *testing.T) {
	wasm := builtModule(t)
	loose := writeFile(t, "loose.json", strings.Replace(simulateConfig, `"capacity": 2`, `"capacity": 5`, 1))
	tight := writeFile(t, "tight.json", simulateConfig)
	var lines []string
	for i := 0; i < 4; i++ { // four requests from one client in one second
		lines = append(lines, `192.0.2.1 - - [30/Nov/2026:10:00:00 +0000] "GET /x HTTP/1.1" 200 5 "-" "curl/8.5.0"`)
	}
	lines = append(lines[:2], append([]string{"garbage"}, lines[2:]...)...)
	for i := 0; i < 20; i++ {
		lines = append(lines, fmt.Sprintf(`192.0.2.%d - - [30/Nov/2026:10:00:%02d +0000] "GET /x HTTP/1.1" 200 5 "-" "curl/8.5.0"`, 2+i, 1+i))
	}
	log := writeFile(t, "access.log", strings.Join(lines, "\n")+"\n")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI("", "simulate", "--config", tight, "--compare", loose, "--log", log, "--format", "combined",
		"--out", out, "--show-keys", "--wasm", wasm)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, log+":3: skipped: ") {
		t.Errorf("stderr %q does not report line 3", stderr)
	}
	for _, want := range []string{"24 requests", tight + ": 24 requests, 0 exempt; responses 200: 22, 429: 2", loose + ": 24 requests", "per-ip", "192.0.2.1 (2)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Requests int64
		Rules    map[string]struct{ Admitted, Limited int64 }
		Compare  struct {
			Rules map[string]struct{ Admitted, Limited int64 }
		}
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Requests != 24 || s.Rules["per-ip"].Limited != 2 || s.Rules["per-ip"].Admitted != 22 || s.Compare.Rules["per-ip"].Limited != 0 {
		t.Errorf("summary.json: %s", data)
	}
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil || !bytes.Contains(page, []byte("<svg")) {
		t.Errorf("report.html: %v, %d bytes without a chart", err, len(page))
	}
}

func TestProgressBarDrawsEachPercentOnce(t *testing.T) {
	var b bytes.Buffer
	p := &progressBar{w: &b, total: 200}
	for _, done := range []int{0, 1, 2, 3, 100, 101, 200} {
		p.update(done)
	}
	p.finish()
	draws := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\r")[1:]
	if len(draws) != 4 || !strings.Contains(draws[1], "  1% 2/200") || !strings.Contains(draws[3], "100% 200/200") {
		t.Errorf("progress drawn %d times: %q", len(draws), draws)
	}
}
