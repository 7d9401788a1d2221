package config_test

import (
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
