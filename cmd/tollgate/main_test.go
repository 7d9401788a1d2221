package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

func runCLI(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheck(t *testing.T) {
	valid := writeFile(t, "valid.json", `{"rules": [{"name": "per-api-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	invalid := writeFile(t, "invalid.json", `{"rules": [{"name": "per-api-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 0, "refill_tokens": 1, "refill_interval": 1}]}]}`)
	tests := []struct {
		name       string
		stdin      string
		args       []string
		code       int
		stdout     []string
		stderrLine []string // each must appear on its own line
	}{
		{"valid", "", []string{"check", valid}, 0, []string{valid + ": valid: 1 rule(s), failure_mode allow"}, nil},
		{"invalid names each field on its own line", "", []string{"check", invalid}, 1, nil, []string{
			invalid + ": rules[0].limits[0].capacity: ",
			invalid + ": rules[0].limits[0].refill_interval: ",
		}},
		{"stdin", `{"rules": []}`, []string{"check", "-"}, 1, nil, []string{"-: rules: "}},
		{"missing file", "", []string{"check", filepath.Join(t.TempDir(), "nope.json")}, 1, nil, []string{"tollgate check: open "}},
		{"no argument", "", []string{"check"}, 2, nil, []string{"tollgate check: expected one FILE argument"}},
		{"unknown command", "", []string{"chek"}, 2, nil, []string{`tollgate: unknown command "chek"`}},
		{"no command", "", nil, 2, nil, []string{"usage:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.code, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout %q lacks %q", stdout, s)
				}
			}
			lines := strings.Split(stderr, "\n")
			for _, prefix := range tt.stderrLine {
				found := false
				for _, l := range lines {
					found = found || strings.HasPrefix(l, prefix)
				}
				if !found {
					t.Errorf("stderr has no line starting with %q:\n%s", prefix, stderr)
				}
			}
		})
	}
}

func TestServeRejectsBadUsageBeforeStarting(t *testing.T) {
	invalid := writeFile(t, "invalid.json", `{"rules": [{"name": "r", "key": [], "limits": []}]}`)
	valid := writeFile(t, "valid.json", `{"rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve"}, 2, "--config is required"},
		{[]string{"serve", "--config", valid}, 2, "--upstream is required"},
		{[]string{"serve", "--config", valid, "--upstream", "localhost:80"}, 2, "is not an http(s) URL"},
		{[]string{"serve", "--config", valid, "--upstream", "http://127.0.0.1:1", "--workers", "0"}, 2, "--workers 0 is out of range"},
		{[]string{"serve", "--config", valid, "--upstream", "http://127.0.0.1:1", "--envoy", "1.20"}, 2, `--envoy "1.20" is not supported`},
		{[]string{"serve", "--config", invalid, "--upstream", "http://127.0.0.1:1"}, 1, invalid + ": rules[0].key: "},
		{[]string{"serve", "--config", valid, "--upstream", "http://127.0.0.1:1", "--wasm", filepath.Join(t.TempDir(), "none.wasm")}, 1, "cannot read the module"},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI("", tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d stderr %q; want exit %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
}

// A binary built without make says "dev"; make stamps the version (e2e's
// TestMakeBuildStampsVersionAndWritesChecksum checks that).
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := runCLI("", args...)
		if code != 0 || stdout != "tollgate dev\n" || stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and \"tollgate dev\\n\"", args, code, stdout, stderr)
		}
	}
	if code, _, stderr := runCLI("", "version", "extra"); code != 2 || !strings.Contains(stderr, "takes no arguments") {
		t.Errorf("version extra: exit %d, stderr %q; want 2 and a usage error", code, stderr)
	}
}

// Hostile and mistaken files: read with a limit and refused in one line, encodings named,
// warnings printed without changing the exit code.
func TestCheckRefusesBeforeParsing(t *testing.T) {
	const rule = `"rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]`
	big := writeFile(t, "big.json", `{`+rule+`, "shadow": false`+strings.Repeat(" ", 2<<20)+`}`)
	bom := writeFile(t, "bom.json", "\xef\xbb\xbf{"+rule+"}")
	utf16 := writeFile(t, "utf16.json", "\xff\xfe{\x00}\x00")
	everyone := writeFile(t, "everyone.json", `{`+rule+`, "exempt": {"client_cidrs": ["::/0"]}}`)
	warned := writeFile(t, "warned.json", `{`+rule+`, "exempt": {"headers": [{"name": "x-canary", "exact": "1"}]}}`)
	for _, tt := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string
		stderr []string // whole lines
	}{
		{"over 1 MiB", []string{"check", big}, "", 1, "", []string{big + ": " + config.ErrTooLarge.Problems[0].Message}},
		{"over 1 MiB on stdin", []string{"check", "-"}, strings.Repeat(" ", 1<<20) + "{}", 1, "", []string{"-: " + config.ErrTooLarge.Problems[0].Message}},
		{"UTF-8 byte-order mark", []string{"check", bom}, "", 1, "", []string{bom + ": the configuration starts with a UTF-8 byte-order mark (EF BB BF), which JSON does not allow: save the file as UTF-8 without a byte-order mark"}},
		{"UTF-16", []string{"check", utf16}, "", 1, "", []string{utf16 + ": the configuration is UTF-16 text (its byte-order mark is FF FE): save the file as UTF-8 without a byte-order mark"}},
		{"a warning keeps exit 0", []string{"check", warned}, "", 0, warned + ": valid: 1 rule(s)", []string{warned + `: warning: exempt.headers[0]: a client can send x-canary: "1" itself and skip every limit: ` +
			`exempt on a header only if a proxy in front of Envoy removes or overwrites it on every client request (x-envoy-internal, which Envoy removes from external requests with "use_remote_address: true", is safe)`}},
		{"a CIDR of everyone warns", []string{"check", everyone}, "", 0, everyone + ": valid: 1 rule(s)", []string{everyone + `: warning: exempt.client_cidrs[0]: ` +
			`"::/0" holds every IPv6 address, so every client that connects over IPv6 skips every limit: list only the ranges of trusted callers, e.g. "10.0.0.0/8"`}},
		{"serve refuses a large file too", []string{"serve", "--config", big, "--upstream", "http://127.0.0.1:1"}, "", 1, "", []string{big + ": " + config.ErrTooLarge.Problems[0].Message}},
	} {
		code, stdout, stderr := runCLI(tt.stdin, tt.args...)
		if code != tt.code || !strings.Contains(stdout, tt.stdout) {
			t.Errorf("%s: exit %d, stdout %q; want exit %d and %q (stderr %q)", tt.name, code, stdout, tt.code, tt.stdout, stderr)
		}
		if got := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); !slices.Equal(got, tt.stderr) {
			t.Errorf("%s: stderr lines\n%q\nwant\n%q", tt.name, got, tt.stderr)
		}
	}
}
