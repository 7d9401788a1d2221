package simulate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func logLine(second int, path string) string {
	return fmt.Sprintf(`{"start_time":"2026-11-30T10:00:%02dZ","method":"GET","path":"%s"}`, second%60, path)
}

// Open gives up as soon as GiveUpLines lines or GiveUpBytes bytes in a row hold no request,
// with the counts so far and a hint about --format, instead of reading on; a file that never
// ends (/dev/zero: one line without end) is given up at the byte budget.
func TestOpenGivesUpOnInputWithoutRequests(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	combined := `192.0.2.7 - - [30/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 12 "-" "curl/8"`
	repeat := func(line string, n int) []string {
		lines := make([]string, n)
		for i := range lines {
			lines[i] = line
		}
		return lines
	}
	// The wrong format throughout, with requests of the right one after the budget: Open stops
	// at the budget, before it reads them.
	wrongThenRight := append(repeat(combined, GiveUpLines), repeat(logLine(1, "/"), 5*GiveUpLines)...)
	// Requests, then a run of bad lines as long as the budget: a log that turned into something
	// else is given up too.
	rightThenWrong := append(repeat(logLine(1, "/"), 3), repeat("x", GiveUpLines+5)...)
	tests := []struct {
		name string
		path string
		want []string
	}{
		{"/dev/zero", "/dev/zero", []string{"/dev/zero: gave up at line 1: 64 MiB in a row hold no envoy-json request, and line 1 has not ended", "0 requests and 0 bad lines so far",
			"is --format right (envoy-json or combined)", "first: line 1: longer than 1048576 bytes"}},
		{"the wrong format", write("combined.log", wrongThenRight...), []string{"gave up at line 10000: 10,000 lines (", ") in a row hold no envoy-json request",
			"0 requests and 10000 bad lines so far", "is --format right", "first: line 1: "}},
		{"requests then no more", write("turned.log", rightThenWrong...), []string{"gave up at line 10003: 10,000 lines", "3 requests and 10000 bad lines so far"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Open(tt.path, EnvoyJSON)
			if err == nil {
				l.Close()
				t.Fatal("Open accepted it")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// One request short of the budget is not given up: the bad-share rule decides at the end.
	l, err := Open(write("short.log", append(repeat("x", GiveUpLines-1), repeat(logLine(1, "/"), 20*GiveUpLines)...)...), EnvoyJSON)
	if err != nil {
		t.Fatalf("a log with %d bad lines, then requests: %v", GiveUpLines-1, err)
	}
	l.Close()
}

// A log that is not a regular file, such as a named pipe (or a shell's <(zcat log.gz)), is read
// once and replayed from a temporary copy, which Close removes.
func TestOpenReadsANamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "access.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	lines := []string{logLine(3, "/c"), logLine(1, "/a"), logLine(2, "/b")}
	written := make(chan error, 1)
	go func() {
		// Opening a pipe for writing waits for its reader, Open.
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			written <- err
			return
		}
		_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
		if closeErr := f.Close(); err == nil {
			err = closeErr
		}
		written <- err
	}()
	l, err := Open(fifo, EnvoyJSON)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	copyPath := l.file.Name()
	var paths []string
	err = l.Each(func(_ int, e *Entry) error { paths = append(paths, e.Path); return nil })
	if err != nil || strings.Join(paths, " ") != "/a /b /c" {
		t.Errorf("replayed %q, %v; want /a /b /c", paths, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copyPath); !os.IsNotExist(err) {
		t.Errorf("the temporary copy %s is still there after Close (%v)", copyPath, err)
	}
}
