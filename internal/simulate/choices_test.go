package simulate

import "testing"

// Every name parses to its value and prints back; an unknown name is an error naming it and the
// names to use; a value beyond the names prints as the zero value's.
func TestChoices(t *testing.T) {
	for _, tt := range []struct {
		name   string
		parse  func(string) (string, error)
		values []string
		bad    string
		err    string
		beyond string
	}{
		{"format", func(s string) (string, error) { f, err := ParseFormat(s); return f.String(), err },
			[]string{"envoy-json", "combined"}, "clf", `unknown log format "clf": use envoy-json or combined`,
			Format(7).String()},
		{"balance", func(s string) (string, error) { b, err := ParseBalance(s); return b.String(), err },
			[]string{"round-robin", "hash"}, "Hash", `unknown balance "Hash": use round-robin or hash (of the client address)`,
			Balance(200).String()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range tt.values {
				if got, err := tt.parse(v); err != nil || got != v {
					t.Errorf("%q parses and prints as %q, %v", v, got, err)
				}
			}
			if _, err := tt.parse(tt.bad); err == nil || err.Error() != tt.err {
				t.Errorf("%q: error %v, want %s", tt.bad, err, tt.err)
			}
			if tt.beyond != tt.values[0] {
				t.Errorf("a value beyond the names prints as %q, want %q", tt.beyond, tt.values[0])
			}
		})
	}
	if Format(-1).String() != "envoy-json" {
		t.Errorf("Format(-1) prints as %q", Format(-1).String())
	}
}
