package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// transcriptPrompt starts the first line of a transcript: a ```text block that shows a tollgate
// command and, on the lines after it, everything the command prints (stdout, then stderr).
const transcriptPrompt = "$ tollgate "

// transcript is one command of the documents and what they say it prints.
type transcript struct {
	at   string // file:line of the opening fence
	args []string
	want string
	// config is the last whole configuration (an unmarked or invalid JSON block) before the
	// transcript in its document, which the command reads as example.json; "" when none.
	config string
}

// readTranscripts returns the transcripts of a Markdown document.
func readTranscripts(name string, data []byte) ([]transcript, error) {
	blocks, err := readDocBlocks(name, data)
	if err != nil {
		return nil, err
	}
	var out []transcript
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(nil, 1<<20)
	line := 0
	for scanner.Scan() {
		line++
		if strings.TrimSpace(scanner.Text()) != "```text" {
			continue
		}
		start := line
		var body []string
		for scanner.Scan() {
			line++
			if strings.TrimSpace(scanner.Text()) == "```" {
				break
			}
			body = append(body, scanner.Text())
		}
		if len(body) == 0 || !strings.HasPrefix(body[0], transcriptPrompt) {
			continue
		}
		t := transcript{
			at:   fmt.Sprintf("%s:%d", name, start),
			args: strings.Fields(strings.TrimPrefix(body[0], "$ tollgate")),
			want: strings.Join(body[1:], "\n") + "\n",
		}
		for _, b := range blocks {
			kind, _, _ := strings.Cut(b.marker, ":")
			if b.line < start && b.lang == "json" && (kind == "" || kind == "invalid") {
				t.config = string(b.text)
			}
		}
		out = append(out, t)
	}
	return out, scanner.Err()
}

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// builtCLI is cmd/tollgate, built once per test binary.
func builtCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tollgate-transcripts-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "tollgate")
		cliErr = testbuild.Command("./cmd/tollgate", cliPath)
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// runTranscript runs a transcript's command in a directory that holds what the repository root
// holds (linked), example.json (the configuration before it) and, instead of the built module,
// an empty build/tollgate.wasm: a transcript can show what a command prints before it loads the
// module (simulate reads its log first), never a module's work.
func runTranscript(t *testing.T, tr transcript) string {
	dir := t.TempDir()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "build" && !strings.HasPrefix(e.Name(), ".") {
			if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	files := map[string]string{"build/tollgate.wasm": ""}
	if tr.config != "" {
		files["example.json"] = tr.config
	}
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(builtCLI(t), tr.args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if _, exited := err.(*exec.ExitError); !exited {
			t.Fatalf("%s: %v", tr.at, err)
		}
	}
	return stdout.String() + stderr.String()
}

// Every command the README and docs/ show with its output prints exactly that output: usage
// texts, error messages and warnings are the binary's, whole, not typed by hand.
func TestDocumentTranscriptsAreTheBinarysOutput(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, documentGlob))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(repoRoot, "README.md")}, files...)
	count := 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repoRoot, path)
		transcripts, err := readTranscripts(filepath.ToSlash(name), data)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range transcripts {
			count++
			t.Run(tr.at, func(t *testing.T) {
				if got := runTranscript(t, tr); got != tr.want {
					t.Errorf("%s: `tollgate %s` prints\n%s\nthe document says\n%s", tr.at, strings.Join(tr.args, " "), got, tr.want)
				}
			})
		}
	}
	// The documents hold transcripts of usage, errors and warnings; a broken reader finds none.
	if count < 5 {
		t.Fatalf("found %d transcripts; the reader is broken", count)
	}
}

// A transcript is read with its command, its output and the configuration before it; a text
// block that is not a tollgate command is no transcript.
func TestReadTranscripts(t *testing.T) {
	doc := "# Doc\n\n<!-- invalid: x -->\n```json\n{\"rules\": 1}\n```\n\nrefused with:\n\n" +
		"```text\n$ tollgate check example.json\nexample.json: rules: got a number\n```\n\n" +
		"<!-- fragment: rule -->\n```json\n{\"name\": \"r\"}\n```\n\n```text\nsome output\n```\n"
	got, err := readTranscripts("doc.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].at != "doc.md:10" || strings.Join(got[0].args, " ") != "check example.json" ||
		got[0].want != "example.json: rules: got a number\n" || got[0].config != "{\"rules\": 1}\n" {
		t.Fatalf("read %+v", got)
	}
}

// The README's Go requirement is go.mod's go line: an older toolchain refuses the module.
func TestReadmeNamesTheGoVersionOfGoMod(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var version string
	for _, line := range strings.Split(string(gomod), "\n") {
		if v, ok := strings.CutPrefix(line, "go "); ok {
			version = strings.TrimSpace(v)
		}
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Requirements: Go " + version + " or later"; version == "" || !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q (go.mod's go line is %q)", want, version)
	}
}
