package subcommand

import (
	"bytes"
	"testing"
)

func TestUnmatched(t *testing.T) {
	const usage = "usage: prog thing\n"
	for _, tt := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"no argument", nil, 2, "", usage},
		{"help", []string{"help"}, 0, usage, ""},
		{"-h", []string{"-h", "extra"}, 0, usage, ""},
		{"--help", []string{"--help"}, 0, usage, ""},
		{"unknown", []string{"bild", "--x"}, 2, "", "prog: unknown command \"bild\"\n" + usage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Unmatched("prog", usage, tt.args, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if stdout.String() != tt.stdout || stderr.String() != tt.stderr {
				t.Errorf("stdout %q, stderr %q; want %q, %q", stdout.String(), stderr.String(), tt.stdout, tt.stderr)
			}
		})
	}
}
