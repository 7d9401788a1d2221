package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// fakeEndpoint answers as the operator endpoint would: status and body for every request, with
// the endpoint's header unless bare; it records the last request.
type fakeEndpoint struct {
	status int
	body   string
	bare   bool
	last   *http.Request
}

func (f *fakeEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.last = r
	if !f.bare {
		w.Header().Set(operatorHeader, "1")
	}
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(f.status)
	w.Write([]byte(f.body))
}

const (
	fakeTop = `{"covers_ms":90000,"rules":[{"rule":"per-key","rejections":12,"error_bound":0,"keys":[` +
		`{"key_hash":"1f2e","limited_at_least":9,"limited_at_most":9},{"key_hash":"77","key":"bob","limited_at_least":3,"limited_at_most":3},` +
		`{"key_hash":"5","key":"\u001b[31mevil","limited_at_least":1,"limited_at_most":1}]},` +
		`{"rule":"per-ip","rejections":40,"error_bound":2,"keys":[{"key_hash":"ab","limited_at_least":30,"limited_at_most":32}]}]}` + "\n"
	fakeKeys = `{"rules":[{"rule":"per-key","key_hash":"1f2e","tier":"gold","limits":[` +
		`{"limit":0,"algorithm":"token_bucket","bucket":true,"capacity":10,"remaining":0,"tokens":0,"debt":0,"next_refill_ms":500,"whole_ms":5000},` +
		`{"limit":1,"algorithm":"sliding_window","bucket":true,"capacity":100,"remaining":40,"count":60,"previous":7,"next_refill_ms":20000,"whole_ms":20000},` +
		`{"limit":3,"algorithm":"fixed_window","bucket":true,"capacity":1000,"remaining":990,"count":10,"next_refill_ms":1000,"whole_ms":1000},` +
		`{"limit":2,"algorithm":"concurrency","bucket":false,"capacity":5,"remaining":5,"in_flight":0,"next_refill_ms":0,"whole_ms":0}]}],` +
		`"skipped":[{"rule":"per-ip-and-key","reason":"its key has 2 part(s) and 1 value(s) were given"}]}` + "\n"
	fakeReset = `{"rules":[{"rule":"per-key","key_hash":"1f2e","limits":[` +
		`{"limit":0,"algorithm":"token_bucket","bucket":true,"capacity":10,"remaining":10,"tokens":10,"debt":0,"next_refill_ms":0,"whole_ms":0,"written":true},` +
		`{"limit":1,"algorithm":"concurrency","bucket":true,"capacity":5,"remaining":3,"in_flight":2,"next_refill_ms":0,"whole_ms":0,` +
		`"skipped":"a concurrency limit: its slots are given back by the requests in flight"}]}],"skipped":[]}` + "\n"
)

// TestOperatorCommands runs top, inspect and reset against a fake endpoint: what each asks,
// its human and JSON output, and its exit code for every kind of answer.
func TestOperatorCommands(t *testing.T) {
	token := writeFile(t, "token", "s3cret\n")
	tests := []struct {
		name     string
		endpoint fakeEndpoint
		args     []string
		code     int
		stdout   string // exactly, when not ""
		stderr   string // contained
		method   string
		path     string
		rawQuery string
	}{
		{"top", fakeEndpoint{status: 200, body: fakeTop}, []string{"top"}, 0,
			"rule per-key: 12 rejection(s) in the last 1m30s\n  KEY                     LIMITED\n  key#1f2e                9\n  bob (key#77)            3\n" +
				"  \"\\x1b[31mevil\" (key#5)  1\n" +
				"rule per-ip: 40 rejection(s) in the last 1m30s (each count within 2)\n  KEY     LIMITED\n  key#ab  30 to 32\n",
			"", "GET", "/.tollgate/top", ""},
		{"top as JSON", fakeEndpoint{status: 200, body: fakeTop}, []string{"top", "--json"}, 0, fakeTop, "", "GET", "/.tollgate/top", ""},
		{"inspect", fakeEndpoint{status: 200, body: fakeKeys}, []string{"inspect", "--key", "k 1/x", "--prefix", "/ops/"}, 0,
			"rule per-key (key#1f2e, tier gold):\n" +
				"  limit 0 token_bucket: 0 of 10 token(s) left, next in 500ms, whole in 5s\n" +
				"  limit 1 sliding_window: 40 of 100 left, 60 counted (previous window 7), next in 20s, whole in 20s\n" +
				"  limit 3 fixed_window: 990 of 1000 left, 10 counted, next in 1s, whole in 1s\n" +
				"  limit 2 concurrency: no bucket: whole (5 of 5)\n" +
				"rule per-ip-and-key: not looked at: its key has 2 part(s) and 1 value(s) were given\n",
			"", "GET", "/ops/keys", "key=k+1%2Fx"},
		{"reset a level in one rule", fakeEndpoint{status: 200, body: fakeReset},
			[]string{"reset", "--key", "a", "--key", "b", "--rule", "per-key", "--level", "3"}, 0,
			"rule per-key (key#1f2e):\n  limit 0 token_bucket: reset, 10 of 10 token(s) left\n" +
				"  limit 1 concurrency: left alone: a concurrency limit: its slots are given back by the requests in flight, 2 of 5 slot(s) in flight\n",
			"", "POST", "/.tollgate/reset", "key=a&key=b&level=3&rule=per-key"},
		{"refused address", fakeEndpoint{status: 403, body: `{"error":"the peer address is not in operator.client_cidrs"}`},
			[]string{"top"}, 3, "", "tollgate top: the endpoint answered 403: the peer address is not in operator.client_cidrs\n", "GET", "/.tollgate/top", ""},
		{"refused token", fakeEndpoint{status: 401, body: `{"error":"the token's SHA-256 is not in operator.token_sha256"}`},
			[]string{"reset", "--key", "a"}, 3, "", "answered 401: the token's SHA-256", "POST", "/.tollgate/reset", "key=a"},
		{"rate limited", fakeEndpoint{status: 429, body: `{"error":"the operator endpoint is rate limited: retry in a second"}`},
			[]string{"top"}, 4, "", "answered 429", "GET", "/.tollgate/top", ""},
		{"unknown rule", fakeEndpoint{status: 404, body: `{"error":"no rule named \"nope\""}`},
			[]string{"inspect", "--key", "a", "--rule", "nope"}, 5, "", `answered 404: no rule named "nope"`, "GET", "/.tollgate/keys", "key=a&rule=nope"},
		{"endpoint failing", fakeEndpoint{status: 503, body: `{"error":"shared data failed: x"}`}, []string{"top"}, 1, "", "answered 503", "GET", "/.tollgate/top", ""},
		{"endpoint off: the upstream answers", fakeEndpoint{status: 404, body: "not found", bare: true}, []string{"top"}, 6, "",
			`tollgate top: GET /.tollgate/top was answered 404 by something other than the operator endpoint: is "operator" configured with path_prefix "/.tollgate/"`,
			"GET", "/.tollgate/top", ""},
		{"no rule takes the key", fakeEndpoint{status: 200, body: `{"rules":[],"skipped":[{"rule":"r","reason":"its key has 2 part(s) and 1 value(s) were given"}]}`},
			[]string{"inspect", "--key", "a"}, 5, "rule r: not looked at: its key has 2 part(s) and 1 value(s) were given\n",
			"tollgate inspect: no rule's key takes the key given", "GET", "/.tollgate/keys", "key=a"},
		{"not the endpoint's JSON", fakeEndpoint{status: 200, body: "<html>"}, []string{"top"}, 1, "", "with a body that is not its JSON", "GET", "/.tollgate/top", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			endpoint := tt.endpoint
			server := httptest.NewServer(&endpoint)
			defer server.Close()
			args := append(tt.args, "--url", server.URL, "--token-file", token)
			code, stdout, stderr := runCLI("", args...)
			if code != tt.code || (tt.stdout != "" && stdout != tt.stdout) || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stdout\n%s\nstderr %q\nwant exit %d, stdout\n%s\nstderr containing %q", code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
			r := endpoint.last
			if r == nil {
				t.Fatal("no request")
			}
			if r.Method != tt.method || r.URL.Path != tt.path || r.URL.RawQuery != tt.rawQuery || r.Header.Get("Authorization") != "Bearer s3cret" {
				t.Errorf("asked %s %s?%s with %q, want %s %s?%s with the token", r.Method, r.URL.Path, r.URL.RawQuery,
					r.Header.Get("Authorization"), tt.method, tt.path, tt.rawQuery)
			}
		})
	}
}

// TestOperatorCommandUsage: bad flags are refused, each problem named with its fix, exit 2.
func TestOperatorCommandUsage(t *testing.T) {
	token := writeFile(t, "token", "s3cret")
	empty := writeFile(t, "empty", "\n  \n")
	missing := filepath.Join(t.TempDir(), "none")
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"top"}, []string{"tollgate top: --url is required: Envoy's listener, e.g. --url http://127.0.0.1:8080",
			"tollgate top: --token-file is required"}},
		{[]string{"top", "--url", "127.0.0.1:8080", "--token-file", token}, []string{`--url "127.0.0.1:8080" is not an http(s) URL with a host`}},
		{[]string{"top", "--url", "http://h", "--token-file", empty}, []string{"--token-file " + empty + " is empty"}},
		{[]string{"top", "--url", "http://h", "--token-file", missing}, []string{"--token-file: open " + missing}},
		{[]string{"inspect", "--url", "http://h", "--token-file", token}, []string{"tollgate inspect: --key is required"}},
		{[]string{"reset", "--url", "http://h", "--token-file", token, "--key", "a", "--level", "-2"}, []string{"--level -2 is negative"}},
		{[]string{"inspect", "--url", "http://h", "--token-file", token, "alice"}, []string{`unexpected argument "alice": give everything as flags, e.g. --key alice`}},
		{[]string{"top", "--url", "http://h", "--token-file", token, "--prefix", "ops"}, []string{`--prefix "ops" does not start and end with '/'`}},
		{[]string{"top", "--url", "http://h", "--token-file", token, "--key", "a"}, []string{"flag provided but not defined: -key"}},
	} {
		code, stdout, stderr := runCLI("", tt.args...)
		if code != 2 || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q; want 2 and nothing", tt.args, code, stdout)
		}
		for _, want := range tt.want {
			if !strings.Contains(stderr, want) {
				t.Errorf("%q: stderr %q, want %q", tt.args, stderr, want)
			}
		}
	}
}

// TestOperatorCommandUnreachable: nobody listening is exit 1, saying where it tried.
func TestOperatorCommandUnreachable(t *testing.T) {
	server := httptest.NewServer(http.NotFoundHandler())
	url := server.URL
	server.Close()
	code, _, stderr := runCLI("", "top", "--url", url, "--token-file", writeFile(t, "token", "x"))
	if code != 1 || !strings.Contains(stderr, "tollgate top: cannot reach "+url) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestCheckOperatorBlock: tollgate check says where the endpoint answers, refuses a bad block
// naming the field, and warns when every peer may reach it.
func TestCheckOperatorBlock(t *testing.T) {
	const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	doc := func(operator string) string {
		return writeFile(t, "op.json", `{"rules": [{"name": "k", "key": [{"header": "x-api-key"}],
		  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}], "operator": `+operator+`}`)
	}
	for _, tt := range []struct {
		operator       string
		code           int
		stdout, stderr string
	}{
		{`{"path_prefix": "/.tollgate/", "client_cidrs": ["10.0.0.0/8"], "token_sha256": ["` + digest + `"], "raw_keys": true}`, 0,
			"operator endpoint under /.tollgate/ for 1 CIDR(s) with 1 token(s), top 32 keys per rule by raw keys\n", ""},
		{`{"path_prefix": "/.tollgate/", "client_cidrs": ["::/0"], "token_sha256": ["` + digest + `"]}`, 0,
			"", `warning: operator.client_cidrs[0]: "::/0" lets every peer reach the operator endpoint`},
		{`{"path_prefix": "/.tollgate/", "client_cidrs": ["10.0.0.0/8"], "token_sha256": ["` + digest[:63] + `"]}`, 1,
			"", `operator.token_sha256[0]: "` + digest[:40] + `..." is not 64 hex digits`},
		{`{"path_prefix": ".tollgate", "client_cidrs": ["10.0.0.0/8"], "token_sha256": ["` + digest + `"]}`, 1,
			"", `operator.path_prefix: ".tollgate" does not start and end with '/'`},
		{`{"path_prefix": "/.tollgate/", "client_cidrs": ["10.0.0.300"], "token_sha256": ["` + digest + `"]}`, 1,
			"", `operator.client_cidrs[0]: "10.0.0.300" is not an IP address or CIDR`},
	} {
		code, stdout, stderr := runCLI("", "check", doc(tt.operator))
		if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) {
			t.Errorf("%s: exit %d\nstdout %q\nstderr %q\nwant exit %d, %q, %q", tt.operator, code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
		}
	}
}
