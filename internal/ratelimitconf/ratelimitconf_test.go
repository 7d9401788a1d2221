package ratelimitconf

import (
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

func TestReadRefusesWhatTheServiceRefuses(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"no domain", "descriptors: []\n", "domain: empty"},
		{"unknown field", "domain: d\nlimit: 3\n", `unknown field "limit"`},
		{"empty key", "domain: d\ndescriptors:\n- value: v\n", "descriptors[0].key: empty"},
		{"unknown unit", "domain: d\ndescriptors:\n- key: k\n  rate_limit: {unit: fortnight, requests_per_unit: 1}\n", `rate_limit.unit: "fortnight"`},
		{"zero requests", "domain: d\ndescriptors:\n- key: k\n  rate_limit: {unit: second}\n", "0 requests; say unlimited: true"},
		{"twice", "domain: d\ndescriptors:\n- key: k\n  value: v\n- key: k\n  value: v\n", `key "k" value "v" given twice`},
	}
	for _, tt := range tests {
		if _, err := Read("f.yaml", []byte(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want an error with %q", tt.name, err, tt.want)
		}
	}
}

// LimitFor matches a key and value before a key alone, and only the last entry's node counts.
func TestLimitFor(t *testing.T) {
	f, err := Read("f.yaml", []byte(`domain: d
descriptors:
- key: rule
  value: api
  descriptors:
  - key: key
    rate_limit: {unit: minute, requests_per_unit: 100}
- key: rule
  rate_limit: {unit: hour, requests_per_unit: 7}
  descriptors:
  - key: key
    value: vip
    rate_limit: {unit: second, requests_per_unit: 1000}
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		entries []config.GlobalEntry
		want    uint32 // requests per unit; 0 for no limit
	}{
		{[]config.GlobalEntry{{Key: "rule", Value: "api"}, {Key: "key"}}, 100},
		{[]config.GlobalEntry{{Key: "rule", Value: "other"}, {Key: "key", Value: "vip"}}, 1000},
		{[]config.GlobalEntry{{Key: "rule", Value: "other"}, {Key: "key"}}, 0}, // only a value vip is limited there
		{[]config.GlobalEntry{{Key: "rule", Value: "other"}}, 7},
		{[]config.GlobalEntry{{Key: "env", Value: "prod"}, {Key: "rule", Value: "api"}}, 0},
	}
	for _, tt := range tests {
		got := uint32(0)
		if l := f.LimitFor(tt.entries); l != nil {
			got = l.RequestsPerUnit
		}
		if got != tt.want {
			t.Errorf("%s: %d requests per unit, want %d", DescribeEntries(tt.entries), got, tt.want)
		}
	}
}
