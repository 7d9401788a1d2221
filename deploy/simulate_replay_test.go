package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tollgate-proxy/tollgate/internal/simulate"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// documentedFormat is the json_format docs/simulate.md shows, field by field.
func documentedFormat(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "simulate.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), accessLogDoc+"\n```yaml\n")
	block, _, closed := strings.Cut(after, "\n```")
	if !ok || !closed {
		t.Fatalf("docs/simulate.md has no YAML block after %q", accessLogDoc)
	}
	var entry struct {
		TypedConfig struct {
			LogFormat struct {
				JSONFormat map[string]string `json:"json_format"`
			} `json:"log_format"`
		} `json:"typed_config"`
	}
	if err := yaml.Unmarshal([]byte(block), &entry); err != nil {
		t.Fatal(err)
	}
	if len(entry.TypedConfig.LogFormat.JSONFormat) == 0 {
		t.Fatal("docs/simulate.md's access log has no json_format")
	}
	return entry.TypedConfig.LogFormat.JSONFormat
}

// loggedRequest is what Envoy knows of a request when it writes its access log line.
type loggedRequest struct {
	second       int
	method, path string
	status       int
}

// envoyLine writes r as Envoy's file access logger writes it with format: every operator of the
// format must be one this function knows, so the log is the documented format's and no other.
func envoyLine(t *testing.T, format map[string]string, r loggedRequest) string {
	t.Helper()
	var fields []string
	for field, operator := range format {
		var value string
		switch {
		case operator == "%START_TIME%":
			value = fmt.Sprintf(`"2026-11-30T10:00:%02d.000Z"`, r.second)
		case operator == "%REQ(:METHOD)%":
			value = `"` + r.method + `"`
		case operator == "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%":
			value = `"` + r.path + `"`
		case operator == "%REQ(:AUTHORITY)%":
			value = `"api.example.com"`
		case operator == "%DOWNSTREAM_REMOTE_ADDRESS%":
			value = `"192.0.2.7:41000"`
		case operator == "%RESPONSE_CODE%":
			value = fmt.Sprint(r.status) // Envoy's JSON formatter writes it as a number
		case operator == "%FILTER_STATE(wasm.tollgate_usage:PLAIN)%":
			value = "null" // these rules have no usage: Tollgate sets none
		case strings.HasPrefix(operator, "%REQ(") && strings.HasSuffix(operator, ")%"):
			value = "null" // a header the request did not have
		default:
			t.Fatalf("json_format %s: %q is an operator this test does not know how Envoy writes", field, operator)
		}
		fields = append(fields, `"`+field+`":`+value)
	}
	sort.Strings(fields)
	return "{" + strings.Join(fields, ",") + "}"
}

// A log written with exactly the documented json_format replays count and refund rules as they
// ran: failed logins charged, successes given back, upstream errors refunded. Without
// response_code the same log replays every request as a success, and the count rule never
// limits: the field is what makes the replay true.
func TestDocumentedAccessLogReplaysCountAndRefundRules(t *testing.T) {
	format := documentedFormat(t)
	if format["response_code"] != "%RESPONSE_CODE%" {
		t.Fatalf("the documented json_format has response_code %q, want %%RESPONSE_CODE%%", format["response_code"])
	}
	var requests []loggedRequest
	for i, status := range []int{200, 200, 401, 401, 200, 200} { // two failed logins spend the bucket
		requests = append(requests, loggedRequest{second: i, method: "POST", path: "/login", status: status})
	}
	for i, status := range []int{503, 503, 200, 200, 200} { // two refunded errors, then the bucket's two tokens
		requests = append(requests, loggedRequest{second: 10 + i, method: "GET", path: "/api/items", status: status})
	}
	const config = `{"rules": [
	  {"name": "failed-logins", "match": {"path": {"exact": "/login"}}, "key": [{"client_ip": {}}],
	   "limits": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"}], "count": {"statuses": ["401"]}},
	  {"name": "api", "match": {"path": {"prefix": "/api/"}}, "key": [{"client_ip": {}}],
	   "limits": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"}], "refund": {"statuses": ["5xx"]}}]}`
	wasm, err := testbuild.ModuleBytes("./filter")
	if err != nil {
		t.Fatal(err)
	}
	replay := func(format map[string]string) map[string]*simulate.RuleResult {
		var lines []string
		for _, r := range requests {
			lines = append(lines, envoyLine(t, format, r))
		}
		path := filepath.Join(t.TempDir(), "access.log")
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		log, err := simulate.Open(path, simulate.EnvoyJSON)
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		results, err := simulate.Run(context.Background(), log, simulate.RunOptions{
			Wasm: wasm, Configs: []simulate.ConfigFile{{Name: "config.json", Data: []byte(config)}}, Seed: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		return results[0].Rules
	}
	for _, tt := range []struct {
		name   string
		format map[string]string
		want   map[string][2]int64 // rule: admitted, limited
	}{
		{"the documented format", format, map[string][2]int64{"failed-logins": {4, 2}, "api": {4, 1}}},
		{"without response_code", without(format, "response_code"), map[string][2]int64{"failed-logins": {6, 0}, "api": {2, 3}}},
	} {
		rules := replay(tt.format)
		for name, want := range tt.want {
			r := rules[name]
			if r == nil || r.Admitted != want[0] || r.Limited != want[1] {
				t.Errorf("%s: rule %s: %+v, want %d admitted and %d limited", tt.name, name, r, want[0], want[1])
			}
		}
	}
}

func without(m map[string]string, key string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}
