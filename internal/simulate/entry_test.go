package simulate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func ns(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixNano()
}

func TestParseEnvoyJSON(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Entry
		err  string // a substring of the error; "" when the line is good
	}{
		{"shipped format", `{"start_time":"2026-11-30T10:00:00.123Z","method":"GET","path":"/a?b=1","authority":"api.example.com",` +
			`"downstream_remote_address":"192.0.2.7:41000","req.x-api-key":"alice","req.x-forwarded-for":null,"response_code":200}`,
			Entry{Time: ns("2026-11-30T10:00:00.123Z"), Method: "GET", Path: "/a?b=1", Authority: "api.example.com",
				RemoteAddress: "192.0.2.7:41000", Headers: [][2]string{{"x-api-key", "alice"}}, Status: 200}, ""},
		{"dash and null are absent, header names lower-cased and sorted",
			`{"start_time":"2026-11-30T10:00:00Z","method":"POST","path":"/","authority":"-","downstream_remote_address":null,"req.X-User":"u","req.accept":"-","req.a":"1"}`,
			Entry{Time: ns("2026-11-30T10:00:00Z"), Method: "POST", Path: "/", Headers: [][2]string{{"a", "1"}, {"x-user", "u"}}}, ""},
		{"IPv6 peer and an offset", `{"start_time":"2026-11-30T11:00:00.5+01:00","method":"GET","path":"/","downstream_remote_address":"[2001:db8::1]:443"}`,
			Entry{Time: ns("2026-11-30T10:00:00.5Z"), Method: "GET", Path: "/", RemoteAddress: "[2001:db8::1]:443"}, ""},
		{"a status", `{"start_time":"2026-11-30T10:00:00Z","method":"GET","path":"/","response_code":503}`,
			Entry{Time: ns("2026-11-30T10:00:00Z"), Method: "GET", Path: "/", Status: 503}, ""},
		{"no status: 0", `{"start_time":"2026-11-30T10:00:00Z","method":"GET","path":"/","response_code":0}`,
			Entry{Time: ns("2026-11-30T10:00:00Z"), Method: "GET", Path: "/"}, ""},
		{"status out of range", `{"start_time":"2026-11-30T10:00:00Z","method":"GET","path":"/","response_code":600}`,
			Entry{Time: ns("2026-11-30T10:00:00Z"), Method: "GET", Path: "/"}, ""},
		{"status a string", `{"start_time":"2026-11-30T10:00:00Z","method":"GET","path":"/","response_code":"-"}`,
			Entry{Time: ns("2026-11-30T10:00:00Z"), Method: "GET", Path: "/"}, ""},
		{"not JSON", `GET / HTTP/1.1`, Entry{}, "not a JSON object"},
		{"two objects", `{"start_time":"2026-11-30T10:00:00Z","method":"GET","path":"/"} {}`, Entry{}, "text follows"},
		{"null", `null`, Entry{}, "null"},
		{"no start_time", `{"method":"GET","path":"/"}`, Entry{}, "start_time: missing"},
		{"bad start_time", `{"start_time":"30/Nov/2026","method":"GET","path":"/"}`, Entry{}, "start_time: \"30/Nov/2026\" is not a time"},
		{"number for a string", `{"start_time":"2026-11-30T10:00:00Z","method":1,"path":"/"}`, Entry{}, "method: got a number"},
		{"no method", `{"start_time":"2026-11-30T10:00:00Z","path":"/"}`, Entry{}, "method: missing"},
		{"pseudo-header as header", `{"start_time":"2026-11-30T10:00:00Z","method":"GET","path":"/","req.:path":"/x"}`, Entry{}, "pseudo-headers"},
		{"header not a string", `{"start_time":"2026-11-30T10:00:00Z","method":"GET","path":"/","req.x-n":3}`, Entry{}, "req.x-n: got a number"},
	}
	for _, tt := range tests {
		got, err := EnvoyJSON.Parse([]byte(tt.line))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.err)
		case tt.err == "" && !reflect.DeepEqual(got, tt.want):
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestParseCombined(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Entry
		err  string
	}{
		{"combined", `192.0.2.7 - frank [30/Nov/2026:10:00:01 +0000] "GET /api/items?page=2 HTTP/1.1" 200 512 "https://example.com/" "curl/8.5.0"`,
			Entry{Time: ns("2026-11-30T10:00:01Z"), Method: "GET", Path: "/api/items?page=2", RemoteAddress: "192.0.2.7:0",
				Headers: [][2]string{{"referer", "https://example.com/"}, {"user-agent", "curl/8.5.0"}}, Status: 200}, ""},
		{"common, IPv6, offset", `2001:db8::1 - - [30/Nov/2026:11:00:01 +0100] "POST / HTTP/2.0" 201 -`,
			Entry{Time: ns("2026-11-30T10:00:01Z"), Method: "POST", Path: "/", RemoteAddress: "[2001:db8::1]:0", Status: 201}, ""},
		{"escaped quote, dashes absent, CRLF", "192.0.2.7 - - [30/Nov/2026:10:00:01 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"a \\\"b\\\" \\x41\"\r",
			Entry{Time: ns("2026-11-30T10:00:01Z"), Method: "GET", Path: "/", RemoteAddress: "192.0.2.7:0",
				Headers: [][2]string{{"user-agent", `a "b" A`}}, Status: 200}, ""},
		{"host name, no address", `client.example - - [30/Nov/2026:10:00:01 +0000] "GET / HTTP/1.1" 200 5`,
			Entry{Time: ns("2026-11-30T10:00:01Z"), Method: "GET", Path: "/", Status: 200}, ""},
		{"no time", `192.0.2.7 - - "GET / HTTP/1.1" 200 5`, Entry{}, "no [time]"},
		{"bad time", `192.0.2.7 - - [2026-11-30 10:00:01] "GET / HTTP/1.1" 200 5`, Entry{}, "time:"},
		{"nginx 400 without a request", `192.0.2.7 - - [30/Nov/2026:10:00:01 +0000] "-" 400 0 "-" "-"`, Entry{}, "is not METHOD TARGET PROTOCOL"},
		{"unterminated", `192.0.2.7 - - [30/Nov/2026:10:00:01 +0000] "GET / HTTP/1.1`, Entry{}, "unterminated"},
		{"no status", `192.0.2.7 - - [30/Nov/2026:10:00:01 +0000] "GET / HTTP/1.1"`, Entry{}, "no status"},
		{"status not a number", `192.0.2.7 - - [30/Nov/2026:10:00:01 +0000] "GET / HTTP/1.1" OK 5`, Entry{}, "status"},
	}
	for _, tt := range tests {
		got, err := Combined.Parse([]byte(tt.line))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.err)
		case tt.err == "" && !reflect.DeepEqual(got, tt.want):
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

// Open sorts by start time, keeps ties in file order, skips blank lines, counts bad ones with
// their line numbers and refuses a log with too many.
func TestOpenSortsAndCountsBadLines(t *testing.T) {
	line := func(ts, path string) string {
		return `{"start_time":"` + ts + `","method":"GET","path":"` + path + `"}`
	}
	good := []string{
		line("2026-11-30T10:00:00.300Z", "/c"), line("2026-11-30T10:00:00.100Z", "/a"), "",
		line("2026-11-30T10:00:00.300Z", "/d"), "not json", line("2026-11-30T10:00:00.200Z", "/b"),
	}
	for i := 0; i < 20; i++ {
		good = append(good, line("2026-11-30T10:00:01Z", "/z"))
	}
	path := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(path, []byte(strings.Join(good, "\n")), 0o644); err != nil { // no final newline
		t.Fatal(err)
	}
	l, err := Open(path, EnvoyJSON)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Lines != 25 || l.Bad != 1 || !reflect.DeepEqual(l.BadSamples, []BadLine{{Line: 5, Error: l.BadSamples[0].Error}}) {
		t.Errorf("lines %d bad %d samples %+v; want 25 lines, line 5 bad", l.Lines, l.Bad, l.BadSamples)
	}
	var order []string
	var lines []int
	if err := l.Each(func(n int, e *Entry) error { order = append(order, e.Path); lines = append(lines, n); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order[:5], " "); got != "/a /b /c /d /z" || lines[0] != 2 || lines[2] != 1 || lines[3] != 4 || len(order) != 24 {
		t.Errorf("order %v lines %v; want /a /b /c /d then the rest, from lines 2 6 1 4", order, lines)
	}

	// 2 bad lines of 22 is over the limit.
	twoBad := append(append(append([]string{}, good[:6]...), "x"), good[6:21]...)
	if err := os.WriteFile(path, []byte(strings.Join(twoBad, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, EnvoyJSON); err == nil || !strings.Contains(err.Error(), "2 of 21 lines") || !strings.Contains(err.Error(), "line 5:") {
		t.Errorf("Open with 2 bad lines of 21: %v; want a refusal naming the share and line 5", err)
	}
	if err := os.WriteFile(path, []byte("\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, EnvoyJSON); err == nil || !strings.Contains(err.Error(), "no requests") {
		t.Errorf("Open of an empty log: %v", err)
	}
}

func FuzzParseEnvoyJSON(f *testing.F) {
	f.Add([]byte(`{"start_time":"2026-11-30T10:00:00.123Z","method":"GET","path":"/","req.x-api-key":"k"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := EnvoyJSON.Parse(line)
		if err != nil {
			return
		}
		if e.Method == "" || e.Path == "" {
			t.Fatalf("accepted %q without a method or path: %+v", line, e)
		}
		for i, h := range e.Headers {
			if h[0] == "" || h[0] != strings.ToLower(h[0]) || h[1] == "" || (i > 0 && e.Headers[i-1][0] > h[0]) {
				t.Fatalf("headers %q of %q: want non-empty lower-case names in order, non-empty values", e.Headers, line)
			}
		}
	})
}

func FuzzParseCombined(f *testing.F) {
	f.Add([]byte(`192.0.2.7 - - [30/Nov/2026:10:00:01 +0000] "GET /x HTTP/1.1" 200 5 "-" "curl/8.5.0"`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := Combined.Parse(line)
		if err != nil {
			return
		}
		if e.Method == "" || e.Path == "" || strings.Contains(e.Method, " ") {
			t.Fatalf("accepted %q with method %q, path %q", line, e.Method, e.Path)
		}
		if utf8.Valid(line) && e.RemoteAddress != "" && !strings.HasSuffix(e.RemoteAddress, ":0") {
			t.Fatalf("address %q from %q: a combined log has no port", e.RemoteAddress, line)
		}
	})
}
