package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"

	"github.com/tollgate-proxy/tollgate/internal/simulate"
)

// The access log `tollgate simulate` reads is shipped twice: commented out in envoy.yaml, between
// "# BEGIN simulate access log" and "# END simulate access log" as an access_log list, and in
// docs/simulate.md as its one entry, after the marker that has TestDocumentBlocksAreValid check
// it as an Envoy AccessLog message.
const (
	accessLogBegin = "# BEGIN simulate access log"
	accessLogEnd   = "# END simulate access log"
	accessLogDoc   = "<!-- fragment: envoy.config.accesslog.v3.AccessLog -->"
)

// TestSimulateAccessLogIsValidAndReadable uncomments the block in envoy.yaml and loads the result
// as Envoy would, checks docs/simulate.md shows the same block, and writes a line the way the
// json_format says, which the simulator must read back field by field.
func TestSimulateAccessLogIsValidAndReadable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case accessLogBegin:
			begin = i
		case accessLogEnd:
			end = i
		}
	}
	if begin < 0 || end < begin+2 {
		t.Fatalf("envoy.yaml has no %q … %q block", accessLogBegin, accessLogEnd)
	}
	var block []string
	indent := ""
	for i, l := range lines[begin+1 : end] {
		trimmed := strings.TrimLeft(l, " ")
		if i == 0 {
			indent = l[:len(l)-len(trimmed)]
		}
		if !strings.HasPrefix(l, indent+"# ") {
			t.Fatalf("envoy.yaml line %d: %q is not commented at the block's indentation", begin+2+i, l)
		}
		block = append(block, strings.TrimPrefix(l, indent+"# "))
	}
	uncommented := append(append(append([]string{}, lines[:begin]...), indentAll(block, indent)...), lines[end+1:]...)
	c, err := checkEnvoyConfig("envoy.yaml (access log uncommented)", []byte(strings.Join(uncommented, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	var format map[string]string
	for _, hcm := range c.hcms {
		for _, l := range hcm.GetAccessLog() {
			var file filev3.FileAccessLog
			if err := l.GetTypedConfig().UnmarshalTo(&file); err != nil {
				t.Fatalf("access_log: %v", err)
			}
			format = map[string]string{}
			for k, v := range file.GetLogFormat().GetJsonFormat().GetFields() {
				format[k] = v.GetStringValue()
			}
		}
	}
	if format == nil {
		t.Fatal("the uncommented envoy.yaml has no access log with a json_format")
	}

	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "simulate.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The list's one entry, unindented.
	if len(block) < 2 || block[0] != "access_log:" || !strings.HasPrefix(block[1], "- ") {
		t.Fatalf("the envoy.yaml block does not start with an access_log list: %q", block)
	}
	entry := []string{strings.TrimPrefix(block[1], "- ")}
	for _, l := range block[2:] {
		entry = append(entry, strings.TrimPrefix(l, "  "))
	}
	want := "```yaml\n" + strings.Join(entry, "\n") + "\n```"
	_, after, ok := strings.Cut(string(doc), accessLogDoc+"\n")
	if !ok || !strings.HasPrefix(after, want) {
		t.Errorf("docs/simulate.md does not show, after %q, the block of envoy.yaml:\n%s", accessLogDoc, want)
	}

	// The sample line of the document is one the simulator reads.
	_, sample, ok := strings.Cut(string(doc), "<!-- json-lines -->\n```json\n")
	sample, _, _ = strings.Cut(sample, "\n")
	if !ok {
		t.Error("docs/simulate.md shows no sample line (a json-lines block)")
	} else if _, err := simulate.EnvoyJSON.Parse([]byte(sample)); err != nil {
		t.Errorf("docs/simulate.md's sample line: %v", err)
	}

	// The operators of the fields the simulator reads, and one header field per request header.
	fixed := map[string]string{
		"start_time": "%START_TIME%", "method": "%REQ(:METHOD)%", "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
		"authority": "%REQ(:AUTHORITY)%", "downstream_remote_address": "%DOWNSTREAM_REMOTE_ADDRESS%",
		"response_code": "%RESPONSE_CODE%", "tollgate_usage": "%FILTER_STATE(wasm.tollgate_usage:PLAIN)%",
	}
	header := regexp.MustCompile(`^%REQ\(([A-Z0-9-]+)\)%$`)
	var headers []string
	for field, operator := range format {
		if want, ok := fixed[field]; ok {
			if operator != want {
				t.Errorf("json_format %s: %q, want %q", field, operator, want)
			}
			continue
		}
		name, ok := strings.CutPrefix(field, "req.")
		m := header.FindStringSubmatch(operator)
		if !ok || m == nil || strings.ToUpper(name) != m[1] || strings.ToLower(name) != name {
			t.Errorf("json_format %s: %q; want only the fixed fields and req.<lower-case name>: %%REQ(<NAME>)%%", field, operator)
			continue
		}
		headers = append(headers, name)
	}
	for field := range fixed {
		if _, ok := format[field]; !ok {
			t.Errorf("json_format lacks %s", field)
		}
	}

	// A line as Envoy writes it with that format (%START_TIME%'s default form), read back.
	values := map[string]string{
		"%START_TIME%": `"2026-11-30T10:00:00.123Z"`, "%REQ(:METHOD)%": `"GET"`, "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%": `"/v1/items?page=2"`,
		"%REQ(:AUTHORITY)%": `"api.example.com"`, "%DOWNSTREAM_REMOTE_ADDRESS%": `"192.0.2.7:41000"`,
		"%RESPONSE_CODE%": `503`, // a number in Envoy's JSON
		// The PLAIN form of the filter state Tollgate writes: its bytes, as a JSON string.
		"%FILTER_STATE(wasm.tollgate_usage:PLAIN)%": `"1520"`,
	}
	var fields []string
	for field, operator := range format {
		v, ok := values[operator]
		if !ok {
			v = `"value of ` + field + `"`
		}
		fields = append(fields, `"`+field+`":`+v)
	}
	sort.Strings(fields)
	line := "{" + strings.Join(fields, ",") + "}"
	e, err := simulate.EnvoyJSON.Parse([]byte(line))
	if err != nil {
		t.Fatalf("the simulator cannot read %s: %v", line, err)
	}
	if e.Method != "GET" || e.Path != "/v1/items?page=2" || e.Authority != "api.example.com" || e.RemoteAddress != "192.0.2.7:41000" ||
		e.Status != 503 || e.Usage != 1520 || !e.HasUsage || len(e.Headers) != len(headers) {
		t.Errorf("read %s as %+v", line, e)
	}
	for _, h := range e.Headers {
		if h[1] != "value of req."+h[0] {
			t.Errorf("header %s read as %q", h[0], h[1])
		}
	}
}

func indentAll(lines []string, indent string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = indent + l
	}
	return out
}
