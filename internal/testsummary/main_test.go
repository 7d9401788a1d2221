package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, input string, reports ...string) (string, bool) {
	t.Helper()
	var out bytes.Buffer
	s := &summary{out: &out, running: map[string]map[string][]string{}, reports: reports}
	if err := s.read(strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	ok := s.close()
	return out.String(), ok
}

const pkg = `"Package":"github.com/tollgate-proxy/tollgate/limiter"`

func TestPassingRunPrintsPackageLinesAndSkips(t *testing.T) {
	out, ok := run(t, strings.Join([]string{
		`{"Action":"start",` + pkg + `}`,
		`{"Action":"run",` + pkg + `,"Test":"TestA"}`,
		`{"Action":"output",` + pkg + `,"Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output",` + pkg + `,"Test":"TestA","Output":"    a_test.go:3: chatter\n"}`,
		`{"Action":"pass",` + pkg + `,"Test":"TestA"}`,
		`{"Action":"output",` + pkg + `,"Test":"TestB","Output":"    b_test.go:9: no Docker here\n"}`,
		`{"Action":"output",` + pkg + `,"Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}`,
		`{"Action":"skip",` + pkg + `,"Test":"TestB"}`,
		`{"Action":"output",` + pkg + `,"Output":"PASS\n"}`,
		`{"Action":"output",` + pkg + `,"Output":"ok  \tgithub.com/tollgate-proxy/tollgate/limiter\t0.1s\n"}`,
		`{"Action":"pass",` + pkg + `}`,
	}, "\n"))
	want := "ok  \tgithub.com/tollgate-proxy/tollgate/limiter\t0.1s\n\n" +
		"skipped (1):\n  limiter TestB: b_test.go:9: no Docker here\n" +
		"PASS: 1 tests passed, 1 skipped, 0 failed\n"
	if !ok || out != want {
		t.Fatalf("ok %v, output:\n%s\nwant:\n%s", ok, out, want)
	}
}

func TestFailuresShowTheirOutputAndFailTheRun(t *testing.T) {
	out, ok := run(t, strings.Join([]string{
		`{"Action":"output",` + pkg + `,"Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output",` + pkg + `,"Test":"TestA","Output":"    a_test.go:3: got 1, want 2\n"}`,
		`{"Action":"output",` + pkg + `,"Test":"TestA","Output":"--- FAIL: TestA (0.00s)\n"}`,
		`{"Action":"fail",` + pkg + `,"Test":"TestA"}`,
		`{"Action":"output",` + pkg + `,"Test":"TestHang","Output":"    hang_test.go:5: waiting\n"}`,
		`{"Action":"output",` + pkg + `,"Output":"FAIL\tgithub.com/tollgate-proxy/tollgate/limiter\t0.1s\n"}`,
		`{"Action":"fail",` + pkg + `}`,
	}, "\n"))
	for _, want := range []string{
		"    a_test.go:3: got 1, want 2\n--- FAIL: TestA (0.00s)\n",
		"--- TestHang did not finish:\n    hang_test.go:5: waiting\n",
		"FAIL: 0 tests passed, 0 skipped, 1 failed; failed packages: limiter\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if ok || strings.Contains(out, "=== RUN") {
		t.Fatalf("ok %v, output:\n%s", ok, out)
	}
}

func TestBuildFailuresAndStrayLinesFailTheRun(t *testing.T) {
	for _, input := range []string{
		`{"ImportPath":"github.com/tollgate-proxy/tollgate/limiter","Action":"build-output","Output":"limiter.go:1: syntax error\n"}` + "\n" +
			`{"ImportPath":"github.com/tollgate-proxy/tollgate/limiter","Action":"build-fail"}`,
		"go: unknown flag -frob",
	} {
		out, ok := run(t, input)
		if ok || !strings.Contains(out, "FAIL: ") {
			t.Errorf("%q: ok %v, output:\n%s", input, ok, out)
		}
	}
}

// A report the tests wrote comes before the closing count; one that does not exist is no error.
func TestReportsComeBeforeTheClosingCount(t *testing.T) {
	report := filepath.Join(t.TempDir(), "latency.txt")
	if err := os.WriteFile(report, []byte("p50 1ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, ok := run(t, `{"Action":"pass",`+pkg+`}`, report, filepath.Join(t.TempDir(), "absent.txt"))
	if !ok || !strings.HasSuffix(out, "p50 1ms\nPASS: 0 tests passed, 0 skipped, 0 failed\n") {
		t.Fatalf("ok %v, output:\n%s", ok, out)
	}
}
