package simulate

import (
	"strings"
	"testing"
)

// Reading a stream (standard input) reports progress every ProgressLines lines, and the log is
// then replayed from the copy it was spooled to.
func TestOpenInputReportsProgressOnAStream(t *testing.T) {
	t.Parallel()
	const lines = 2*ProgressLines + 5
	var b strings.Builder
	for i := range lines {
		b.WriteString(logLine(i%60, "/") + "\n")
	}
	var reported []int
	log, err := OpenInput(Input{Path: "standard input", Reader: strings.NewReader(b.String()),
		Progress: func(n int) { reported = append(reported, n) }}, EnvoyJSON)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if len(reported) != 2 || reported[0] != ProgressLines || reported[1] != 2*ProgressLines {
		t.Errorf("progress reported at %v lines, want %d and %d", reported, ProgressLines, 2*ProgressLines)
	}
	replayed := 0
	if err := log.Each(func(int, *Entry) error { replayed++; return nil }); err != nil {
		t.Fatal(err)
	}
	if log.Path != "standard input" || replayed != lines {
		t.Errorf("%s: %d requests replayed, want %d", log.Path, replayed, lines)
	}
}
