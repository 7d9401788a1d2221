package config_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

// Configurations a careless operator writes that must be refused with a line naming the field,
// never silently read as something wider.
func TestRefusedNotWidened(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"CIDR with host bits", withExempt(`{"client_cidrs": ["127.0.0.2/8"]}`),
			`exempt.client_cidrs[0]: "127.0.0.2/8" has bits set after its first 8, so it is not the start of a range: write "127.0.0.0/8" for the whole range, or "127.0.0.2" for that address alone`},
		{"IPv6 CIDR with host bits", withExempt(`{"client_cidrs": ["10.0.0.0/8", "2001:db8::1/32"]}`),
			`exempt.client_cidrs[1]: "2001:db8::1/32" has bits set after its first 32, so it is not the start of a range: write "2001:db8::/32"`},
		{"IPv4-mapped CIDR with host bits", withExempt(`{"client_cidrs": ["::ffff:192.0.2.1/120"]}`),
			`exempt.client_cidrs[0]: "::ffff:192.0.2.1/120" has bits set after its first 120, so it is not the start of a range: write "::ffff:192.0.2.0/120"`},
		{"cost default 0", withRuleMembers(`"cost": {"header": "x-cost", "max": 10, "default": 0}`),
			`rules[0].cost.default: 0 is not allowed`},
	} {
		_, err := config.Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A fully qualified host name names the same host: it is stored without its trailing dot, and a
// list holding both spellings repeats itself.
func TestHostsWithATrailingDot(t *testing.T) {
	cfg, err := config.Parse([]byte(withMatch(`{"hosts": ["API.example.com."]}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Rules[0].Match.Hosts; len(got) != 1 || got[0] != "api.example.com" {
		t.Fatalf("hosts %q, want [api.example.com]", got)
	}
	for doc, want := range map[string]string{
		withMatch(`{"hosts": ["api.example.com", "api.example.com."]}`): `rules[0].match.hosts[1]: "api.example.com." is already listed at rules[0].match.hosts[0]`,
		withMatch(`{"hosts": ["."]}`):                                   `rules[0].match.hosts[0]: "." is not a host name`,
	} {
		if _, err := config.Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
	}
}

// A document that is not plain UTF-8, or too large, is refused in one line that says so, before
// it is parsed.
func TestRefusedBeforeParsing(t *testing.T) {
	valid := withTop(`"failure_mode": "allow"`)
	utf16 := func(bigEndian bool, bom bool) string {
		var b []byte
		if bom {
			if bigEndian {
				b = append(b, 0xfe, 0xff)
			} else {
				b = append(b, 0xff, 0xfe)
			}
		}
		for _, c := range []byte(valid) {
			if bigEndian {
				b = append(b, 0, c)
			} else {
				b = append(b, c, 0)
			}
		}
		return string(b)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"UTF-8 byte-order mark", "\xef\xbb\xbf" + valid, "the configuration starts with a UTF-8 byte-order mark (EF BB BF), which JSON does not allow: save the file as UTF-8 without a byte-order mark"},
		{"UTF-16LE", utf16(false, true), "the configuration is UTF-16 text (its byte-order mark is FF FE): save the file as UTF-8 without a byte-order mark"},
		{"UTF-16BE", utf16(true, true), "the configuration is UTF-16 text (its byte-order mark is FE FF)"},
		{"UTF-16 without a mark", utf16(true, false), "the configuration is UTF-16 or UTF-32 text without a byte-order mark"},
		{"UTF-32LE", "\xff\xfe\x00\x00{\x00\x00\x00", "the configuration is UTF-32 text (its byte-order mark is FF FE 00 00)"},
		{"over 1 MiB", valid[:len(valid)-1] + `, "shadow": false` + strings.Repeat(" ", config.MaxSize) + "}", "the configuration is larger than 1 MiB (1048576 bytes)"},
	} {
		_, err := config.Parse([]byte(tc.doc))
		var cfgErr *config.Error
		if !errors.As(err, &cfgErr) || len(cfgErr.Problems) != 1 || !strings.Contains(cfgErr.Problems[0].String(), tc.want) {
			t.Errorf("%s: got %v, want one problem containing %q", tc.name, err, tc.want)
		}
	}
	// Exactly the maximum is still read.
	padded := valid[:len(valid)-1] + strings.Repeat(" ", config.MaxSize-len(valid)) + "}"
	if _, err := config.Parse([]byte(padded)); len(padded) != config.MaxSize || err != nil {
		t.Fatalf("a document of exactly %d bytes: %v", len(padded), err)
	}
}

// exempt.headers that a client can set itself are flagged; x-envoy-internal, which Envoy removes
// from external requests, is not.
func TestWarnings(t *testing.T) {
	cfg, err := config.Parse([]byte(withExempt(`{"headers": [{"name": "X-Canary", "exact": "1"}, {"name": "x-envoy-internal", "exact": "true"},
	  {"name": "x-internal-token", "present": true}, {"name": "x-public", "present": false}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range config.Warnings(cfg) {
		got = append(got, w.String())
	}
	want := []string{
		`exempt.headers[0]: a client can send x-canary: "1" itself and skip every limit: exempt on a header only if a proxy`,
		`exempt.headers[2]: a client can send x-internal-token itself, with any value, and skip every limit`,
		`exempt.headers[3]: a client that leaves x-public out of its requests skips every limit`,
	}
	if len(got) != len(want) {
		t.Fatalf("warnings %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d: %q, want it to start with %q", i, got[i], want[i])
		}
	}
	if w := config.Warnings(configWith(baseRule())); len(w) != 0 {
		t.Fatalf("warnings for a plain configuration: %v", w)
	}
}

// An exempt CIDR that holds every address of its family exempts every client of it: valid, but
// flagged. One bit narrower is a choice, not an accident, and is not.
func TestWarningsOnCIDRsThatExemptEveryone(t *testing.T) {
	const ipv4, ipv6 = `"0.0.0.0/0" holds every IPv4 address, so every client that connects over IPv4 skips every limit: ` +
		`list only the ranges of trusted callers, e.g. "10.0.0.0/8"`, `"::/0" holds every IPv6 address, so every client ` +
		`that connects over IPv6 skips every limit: list only the ranges of trusted callers, e.g. "10.0.0.0/8"`
	for _, tt := range []struct {
		cidrs string
		want  []string
	}{
		{`["10.0.0.0/8", "0.0.0.0/0"]`, []string{"exempt.client_cidrs[1]: " + ipv4}},
		{`["::/0"]`, []string{"exempt.client_cidrs[0]: " + ipv6}},
		{`["::ffff:0:0/96", "::/0"]`, []string{"exempt.client_cidrs[0]: " + ipv4, "exempt.client_cidrs[1]: " + ipv6}},
		{`["0.0.0.0/1", "128.0.0.0/1", "::/1", "192.0.2.7"]`, nil},
	} {
		cfg, err := config.Parse([]byte(withExempt(`{"client_cidrs": ` + tt.cidrs + `}`)))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range config.Warnings(cfg) {
			got = append(got, w.String())
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: warnings\n%q\nwant\n%q", tt.cidrs, got, tt.want)
		}
	}
}

func TestEscapedSlashes(t *testing.T) {
	for doc, want := range map[string]config.EscapedSlashes{
		withTop(`"failure_mode": "allow"`):     config.EscapedSlashesAllow,
		withTop(`"escaped_slashes": "allow"`):  config.EscapedSlashesAllow,
		withTop(`"escaped_slashes": "reject"`): config.EscapedSlashesReject,
	} {
		cfg, err := config.Parse([]byte(doc))
		if err != nil || cfg.EscapedSlashes != want {
			t.Errorf("%s: %v, %v; want %v", doc, cfg, err, want)
		}
	}
	for doc, want := range map[string]string{
		withTop(`"escaped_slashes": "rejected"`):       `escaped_slashes: "rejected" is not an escaped_slashes policy: escaped_slashes is "allow" (the default: a path with %2F or %5C is matched under every reading, a limit applying if any reading matches it, an exemption only if every reading is exempt) or "reject" (answer such requests with 400) (did you mean "reject"?)`,
		withTop(`"escaped_slashes": true`):             `escaped_slashes: got true, want a string`,
		withRuleMembers(`"escaped_slashes": "reject"`): `rules[0]: unknown field "escaped_slashes"`,
	} {
		if _, err := config.Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
	}
}
