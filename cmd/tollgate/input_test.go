package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// mkfifo makes a named pipe nobody writes to: opening it the usual way would wait forever.
func mkfifo(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// check, serve and simulate refuse a configuration (or module) that is not a regular file at
// once, naming what it is; check and serve read standard input from "-" instead. A named pipe
// without a writer would block their open(2) forever, a device never end.
func TestInputsThatAreNotRegularFilesAreRefusedAtOnce(t *testing.T) {
	fifo := mkfifo(t, "config.fifo")
	dir := t.TempDir()
	valid := writeFile(t, "valid.json", simulateConfig)
	log := writeFile(t, "access.log", `192.0.2.1 - - [30/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 5`+"\n")
	out := t.TempDir()
	const upstream = "http://127.0.0.1:1"
	notRegular := func(path, kind string) string {
		return path + " is " + kind + ", not a regular file: give a regular file"
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  int
		// stderr is the whole of it, line by line.
		stderr []string
	}{
		{"check: a named pipe", []string{"check", fifo}, "", 1,
			[]string{"tollgate check: " + notRegular(fifo, "a named pipe") + ", or - to read standard input"}},
		{"check: a device", []string{"check", "/dev/zero"}, "", 1,
			[]string{"tollgate check: " + notRegular("/dev/zero", "a character device") + ", or - to read standard input"}},
		{"check: a directory", []string{"check", dir}, "", 1,
			[]string{"tollgate check: " + notRegular(dir, "a directory") + ", or - to read standard input"}},
		{"serve: a named pipe", []string{"serve", "--config", fifo, "--upstream", upstream}, "", 1,
			[]string{"tollgate serve: " + notRegular(fifo, "a named pipe") + ", or - to read standard input"}},
		{"serve: standard input", []string{"serve", "--config", "-", "--upstream", upstream}, `{"rules": []}`, 1,
			[]string{"-: rules: an empty list is not allowed: add a rule such as " +
				`{"name": "per-api-key", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}]}`}},
		{"serve: the module a named pipe", []string{"serve", "--config", valid, "--upstream", upstream, "--wasm", fifo}, "", 1,
			[]string{"tollgate serve: cannot read the module: " + notRegular(fifo, "a named pipe") + " (run `make build`, or pass --wasm)"}},
		{"simulate: a named pipe", []string{"simulate", "--config", fifo, "--log", log, "--out", out}, "", 1,
			[]string{"tollgate simulate: " + notRegular(fifo, "a named pipe")}},
		{"simulate: the other configuration a device", []string{"simulate", "--config", valid, "--compare", "/dev/zero", "--log", log, "--out", out}, "", 1,
			[]string{"tollgate simulate: " + notRegular("/dev/zero", "a character device")}},
		{"simulate: standard input", []string{"simulate", "--config", "-", "--log", log, "--out", out}, "{}", 1,
			[]string{`tollgate simulate: "-" (standard input) is not read here: give a file`}},
		{"simulate: the module a named pipe", []string{"simulate", "--config", valid, "--log", log, "--out", out, "--wasm", fifo}, "", 1,
			[]string{"tollgate simulate: cannot read the module: " + notRegular(fifo, "a named pipe") + " (run `make build`, or pass --wasm)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(tt.stdin, tt.args...)
			if got := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); code != tt.code || !slices.Equal(got, tt.stderr) {
				t.Errorf("exit %d, stderr lines\n%q\nwant exit %d and\n%q", code, got, tt.code, tt.stderr)
			}
		})
	}
}

// simulate --log /dev/zero (one line that never ends) gives up after 64 MiB without a request,
// saying so with the counts and a hint about --format, instead of running forever.
func TestSimulateGivesUpOnALogWithoutRequests(t *testing.T) {
	valid := writeFile(t, "valid.json", simulateConfig)
	// The module is not loaded before the log is read: any regular file will do.
	code, stdout, stderr := runCLI("", "simulate", "--config", valid, "--log", "/dev/zero", "--out", t.TempDir(), "--wasm", valid)
	want := "tollgate simulate: /dev/zero: gave up at line 1: 64 MiB in a row hold no envoy-json request, and line 1 has not ended " +
		"(0 requests and 0 bad lines so far): is --format right (envoy-json or combined), and is this an access log? " +
		"first: line 1: longer than 1048576 bytes\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr\n%q\nwant exit 1 and\n%q", code, stdout, stderr, want)
	}
}

// A log in a named pipe is replayed once a writer comes; until then simulate says what it waits
// for.
func TestSimulateReadsALogFromANamedPipe(t *testing.T) {
	wasm := builtModule(t)
	cfg := writeFile(t, "config.json", simulateConfig)
	fifo := mkfifo(t, "access.fifo")
	out := t.TempDir()
	var lines []string
	for i := 0; i < 3; i++ { // one client, three requests in one second: the third is limited
		lines = append(lines, fmt.Sprintf(`192.0.2.1 - - [30/Nov/2026:10:00:00 +0000] "GET /%d HTTP/1.1" 200 5 "-" "curl/8"`, i))
	}
	stderrReader, stderrWriter, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	var stdout bytes.Buffer
	go func() {
		done <- run([]string{"simulate", "--config", cfg, "--log", fifo, "--format", "combined", "--out", out, "--wasm", wasm},
			strings.NewReader(""), &stdout, stderrWriter)
		stderrWriter.Close()
	}()
	// The note comes before simulate opens the pipe: read it, then write the log.
	note := "tollgate simulate: " + fifo + " is a named pipe: waiting for a writer\n"
	got := make([]byte, len(note))
	if _, err := io.ReadFull(stderrReader, got); err != nil || string(got) != note {
		t.Fatalf("stderr starts %q (%v), want %q", got, err, note)
	}
	if err := os.WriteFile(fifo, []byte(strings.Join(lines, "\n")+"\n"), 0); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderrReader)
	if code := <-done; code != 0 {
		t.Fatalf("exit %d, stderr %s", code, rest)
	}
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var summary struct {
		Rules map[string]struct{ Admitted, Limited int64 }
	}
	if err := json.Unmarshal(data, &summary); err != nil {
		t.Fatalf("summary.json: %v\n%s", err, data)
	}
	if r := summary.Rules["per-ip"]; r.Admitted != 2 || r.Limited != 1 {
		t.Errorf("per-ip admitted %d, limited %d; want 2 and 1\n%s", r.Admitted, r.Limited, data)
	}
}

// The progress bar is drawn for a long replay on a terminal only: not into a file, a pipe or
// the null device.
func TestProgressOnlyOnATerminal(t *testing.T) {
	regular, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	// A pseudo-terminal's master side is a terminal device like any other.
	terminal, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal to test with: %v", err)
	}
	defer terminal.Close()
	_, pipe, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipe.Close()
	tests := []struct {
		name     string
		w        io.Writer
		requests int
		want     bool
	}{
		{"terminal, long replay", terminal, progressFrom, true},
		{"terminal, short replay", terminal, progressFrom - 1, false},
		{"a buffer", &bytes.Buffer{}, 10 * progressFrom, false},
		{"a regular file", regular, 10 * progressFrom, false},
		{"the null device", null, 10 * progressFrom, false},
		{"a pipe", pipe, 10 * progressFrom, false},
	}
	for _, tt := range tests {
		if got := progressFor(tt.w, tt.requests) != nil; got != tt.want {
			t.Errorf("%s: progress %v, want %v", tt.name, got, tt.want)
		}
	}
}
