package admission

import "testing"

func TestPartitionKeyFollowsMatchAndMissingKey(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "api", "match": {"path": {"prefix": "/api/"}}, "key": [{"header": "x-api-key"}, {"method": {}}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "user", "key": [{"header": "x-user"}], "missing_key": {"action": "fallback", "key": [{"client_ip": {}}]},
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "tenant", "key": [{"header": "x-tenant"}], "missing_key": {"action": "allow"},
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	req := func(path string, headers ...string) fakeRequest {
		r := fakeRequest{headers: map[string]string{":path": path, ":method": "GET"}, source: "192.0.2.1:5000"}
		for i := 0; i+1 < len(headers); i += 2 {
			r.headers[headers[i]] = headers[i+1]
		}
		return r
	}
	tests := []struct {
		name     string
		req      fakeRequest
		rule     int
		matched  bool
		describe string // "" for no key
	}{
		{"match leaves it out", req("/web", "x-api-key", "k1"), 0, false, ""},
		{"two parts", req("/api/x", "x-api-key", "k1"), 0, true, "k1 | GET"},
		{"missing key rejected", req("/api/x"), 0, true, ""},
		{"own key", req("/", "x-user", "ann"), 1, true, "ann"},
		{"fallback key", req("/"), 1, true, "fallback: 192.0.2.1"},
		{"missing key allowed", req("/"), 2, true, ""},
	}
	for _, tt := range tests {
		key, matched := g.PartitionKey(tt.req, tt.rule)
		got := ""
		if key != nil {
			got = DescribeKey(key)
		}
		if matched != tt.matched || got != tt.describe {
			t.Errorf("%s: PartitionKey = %q (%q), %v; want %q, %v", tt.name, key, got, matched, tt.describe, tt.matched)
		}
	}
}

func TestDescribeKeyKeepsWhatItCannotSplit(t *testing.T) {
	for _, key := range []string{"5:ab", "x", "3:abc4"} {
		if got := DescribeKey([]byte(key)); got != key {
			t.Errorf("DescribeKey(%q) = %q, want it unchanged", key, got)
		}
	}
}
