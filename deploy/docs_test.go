package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	httpwasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"sigs.k8s.io/yaml"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/ratelimitconf"
)

// The documents whose JSON and YAML blocks are checked: the README and every page of docs/.
const documentGlob = "docs/*.md"

// docBlock is one fenced ```json or ```yaml block of a document.
type docBlock struct {
	file string
	line int    // of the opening fence
	lang string // json or yaml
	// marker is the first of the HTML comments on the lines just before the fence that starts
	// with one of the words below, without <!-- -->, or "" (other comments are left to other
	// tools):
	//
	//	(none)                  JSON: a whole Tollgate configuration config.Parse accepts.
	//	                        YAML: a whole Envoy bootstrap, Kubernetes object (an Istio
	//	                        WasmPlugin, AuthorizationPolicy or EnvoyFilter, a Gateway API
	//	                        Gateway or HTTPRoute) or envoyproxy/ratelimit descriptor
	//	                        configuration, told apart by their fields, checked as the
	//	                        shipped ones are.
	//	invalid: TEXT           JSON: a configuration config.Parse refuses with an error
	//	                        containing TEXT.
	//	fragment: rule          JSON: one rule, checked inside {"rules": [...]}.
	//	fragment: fields        JSON: top-level fields, checked next to a minimal rule.
	//	fragment: PROTO.NAME    YAML: one Envoy message of that type (e.g.
	//	                        envoy.config.cluster.v3.Cluster), checked as the shipped
	//	                        configurations' messages are.
	//	json-lines              JSON: one JSON object per line, such as an access log.
	//	unchecked: REASON       not a configuration nor anything a reader could check, such as
	//	                        a command's output with parts elided; the reason is required.
	marker string
	text   []byte
}

var (
	fenceOpen = regexp.MustCompile("^(\\s*)```([A-Za-z0-9_-]*)\\s*$")
	markerRE  = regexp.MustCompile(`^\s*<!--\s*(.*?)\s*-->\s*$`)
	// markerWord recognizes a comment as a marker of this test.
	markerWord = regexp.MustCompile(`^(fragment|invalid|json-lines|unchecked)\b`)
)

// readDocBlocks returns every fenced JSON and YAML block of a Markdown document, with its
// marker. Indented fences (inside list items) are read with their indentation removed.
func readDocBlocks(name string, data []byte) ([]docBlock, error) {
	var blocks []docBlock
	var comments []string // the HTML comments on the lines just before, outside a block
	scanner := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for scanner.Scan() {
		line++
		text := scanner.Text()
		m := fenceOpen.FindStringSubmatch(text)
		if m == nil {
			if c := markerRE.FindStringSubmatch(text); c != nil {
				comments = append(comments, c[1])
			} else if strings.TrimSpace(text) != "" {
				comments = nil
			}
			continue
		}
		indent, lang, start := m[1], strings.ToLower(m[2]), line
		var body strings.Builder
		closed := false
		for scanner.Scan() {
			line++
			text := scanner.Text()
			if strings.TrimSpace(text) == "```" {
				closed = true
				break
			}
			body.WriteString(strings.TrimPrefix(text, indent))
			body.WriteByte('\n')
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: the block is never closed", name, start)
		}
		if lang == "yml" {
			lang = "yaml"
		}
		if lang == "json" || lang == "yaml" {
			b := docBlock{file: name, line: start, lang: lang, text: []byte(body.String())}
			for _, c := range comments {
				if markerWord.MatchString(c) {
					b.marker = c
					break
				}
			}
			blocks = append(blocks, b)
		}
		comments = nil
	}
	return blocks, scanner.Err()
}

// minimalRule is the rule a "fragment: fields" block is checked next to.
const minimalRule = `{"name": "r", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}`

// checkDocBlock checks one block as its marker says.
func checkDocBlock(b docBlock) error {
	at := fmt.Sprintf("%s:%d", b.file, b.line)
	kind, arg, _ := strings.Cut(b.marker, ":")
	kind, arg = strings.TrimSpace(kind), strings.TrimSpace(arg)
	switch {
	case b.lang == "json" && kind == "":
		if _, err := config.Parse(b.text); err != nil {
			return fmt.Errorf("%s: Tollgate refuses this configuration (mark a fragment or an invalid example): %w", at, err)
		}
	case b.lang == "json" && kind == "invalid":
		if arg == "" {
			return fmt.Errorf("%s: say which error: <!-- invalid: TEXT OF THE ERROR -->", at)
		}
		_, err := config.Parse(b.text)
		if err == nil {
			return fmt.Errorf("%s: marked invalid, but config.Parse accepts it", at)
		}
		if !strings.Contains(err.Error(), arg) {
			return fmt.Errorf("%s: marked invalid with %q, but config.Parse says: %v", at, arg, err)
		}
	case b.lang == "json" && kind == "fragment" && arg == "rule":
		doc := `{"rules": [` + string(b.text) + `]}`
		if _, err := config.Parse([]byte(doc)); err != nil {
			return fmt.Errorf("%s: Tollgate refuses this rule: %w", at, err)
		}
	case b.lang == "json" && kind == "fragment" && arg == "fields":
		doc := `{"rules": [` + minimalRule + `], ` + string(b.text) + `}`
		if _, err := config.Parse([]byte(doc)); err != nil {
			return fmt.Errorf("%s: Tollgate refuses these fields: %w", at, err)
		}
	case b.lang == "json" && kind == "json-lines":
		lines := 0
		for i, line := range strings.Split(string(b.text), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			var object map[string]any
			if err := json.Unmarshal([]byte(line), &object); err != nil {
				return fmt.Errorf("%s: line %d of the block is not a JSON object: %w", at, i+1, err)
			}
			lines++
		}
		if lines == 0 {
			return fmt.Errorf("%s: marked json-lines, but holds no line", at)
		}
	case kind == "unchecked":
		if arg == "" {
			return fmt.Errorf("%s: say why the block is not checked: <!-- unchecked: REASON -->", at)
		}
	case b.lang == "yaml" && kind == "":
		return checkYAMLDocument(at, b.text)
	case b.lang == "yaml" && kind == "fragment" && arg != "":
		return checkEnvoyFragment(at, arg, b.text)
	default:
		return fmt.Errorf("%s: unknown marker %q for a %s block (see docBlock)", at, b.marker, b.lang)
	}
	return nil
}

// checkYAMLDocument checks a whole YAML document with the check of its kind.
func checkYAMLDocument(at string, text []byte) error {
	var head struct {
		Kind        string `json:"kind"`
		Domain      string `json:"domain"`
		Descriptors any    `json:"descriptors"`
	}
	if err := yaml.Unmarshal(text, &head); err != nil {
		return fmt.Errorf("%s: not YAML: %w", at, err)
	}
	switch {
	case head.Kind == "WasmPlugin":
		_, err := checkWasmPlugin(at, text)
		return err
	case head.Kind != "":
		crds, err := loadCRDValidators()
		if err != nil {
			return err
		}
		return checkAmbientDocument(at, text, crds)
	case head.Domain != "" || head.Descriptors != nil:
		_, err := ratelimitconf.Read(at, text)
		return err
	default:
		_, err := checkEnvoyConfig(at, text)
		return err
	}
}

// checkEnvoyFragment loads YAML into the named Envoy message the way checkEnvoyConfig loads a
// bootstrap (unknown fields rejected, every Any resolved), runs the generated validation over it
// and every packed message, and checks any Tollgate filter in it and a bootstrap's rule tag.
func checkEnvoyFragment(at, typeName string, text []byte) error {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typeName))
	if err != nil {
		return fmt.Errorf("%s: %q is not a message type the tests know (import its package in envoyconfig_test.go): %w", at, typeName, err)
	}
	jsonData, err := yaml.YAMLToJSONStrict(text)
	if err != nil {
		return fmt.Errorf("%s: not YAML: %w", at, err)
	}
	m := mt.New().Interface()
	if err := protojson.Unmarshal(jsonData, m); err != nil {
		return fmt.Errorf("%s: not an Envoy %s: %w", at, typeName, err)
	}
	problems := validate("", m)
	b, _ := m.(*bootstrapv3.Bootstrap) // nil for a fragment smaller than a bootstrap
	err = walk(m.ProtoReflect(), "", func(path string, inner proto.Message, packed bool) {
		if packed {
			problems = append(problems, validate(path, inner)...)
		}
		if w, ok := inner.(*httpwasmv3.Wasm); ok {
			problems = append(problems, checkTollgateFilter(path, w, b)...)
		}
	})
	if err != nil {
		problems = append(problems, err)
	}
	if b != nil && len(b.GetStatsConfig().GetStatsTags()) > 0 {
		problems = append(problems, checkRuleTag(b)...)
	}
	for i, p := range problems {
		problems[i] = fmt.Errorf("%s: %w", at, p)
	}
	return errors.Join(problems...)
}

// Every JSON and YAML block of the README and docs/ is checked with the code that reads such a
// configuration for real, so the documents cannot drift from what Tollgate, Envoy and Istio
// accept.
func TestDocumentBlocksAreValid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, documentGlob))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(repoRoot, "README.md")}, files...)
	count := map[string]int{}
	for _, path := range files {
		name, _ := filepath.Rel(repoRoot, path)
		name = filepath.ToSlash(name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := readDocBlocks(name, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			count[b.lang]++
			t.Run(fmt.Sprintf("%s:%d", name, b.line), func(t *testing.T) {
				if err := checkDocBlock(b); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	// The documents hold both kinds today; a broken reader that finds none must not pass.
	if count["json"] == 0 || count["yaml"] == 0 {
		t.Fatalf("found %d JSON and %d YAML blocks in %d documents; the reader is broken", count["json"], count["yaml"], len(files))
	}
}

// A document with wrong or wrongly marked blocks is refused, naming the file and line.
func TestDocumentBlockCheckRefusesMutations(t *testing.T) {
	const wasmFilter = "name: envoy.filters.http.wasm\ntyped_config:\n" +
		"  \"@type\": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm\n" +
		"  config:\n    name: tollgate\n    failure_policy: FAIL_CLOSED\n" +
		"    configuration:\n      \"@type\": type.googleapis.com/google.protobuf.StringValue\n" +
		"      value: '{\"rules\": [%s]}'\n" +
		"    vm_config: {vm_id: tollgate, runtime: envoy.wasm.runtime.v8, code: {local: {filename: tollgate.wasm}}}\n"
	const httpFilter = "<!-- fragment: envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter -->"
	cases := []struct {
		name, doc, want string
	}{
		{"a valid configuration marked invalid", "<!-- invalid: refill_interval -->\n```json\n{\"rules\": [" + minimalRule + "]}\n```\n", "config.Parse accepts it"},
		{"an invalid example refused for another reason", "<!-- invalid: capacity -->\n```json\n{\"rules\": [" + strings.Replace(minimalRule, `"1s"`, `"1 s"`, 1) + "]}\n```\n", "but config.Parse says"},
		{"an invalid example without its error", "<!-- invalid -->\n```json\n{}\n```\n", "say which error"},
		{"an unmarked fragment", "```json\n\"key_table\": {\"max_keys\": 100}\n```\n", "Tollgate refuses this configuration"},
		{"a rule with an unknown field", "<!-- fragment: rule -->\n```json\n" + strings.Replace(minimalRule, `"name"`, `"nmae"`, 1) + "\n```\n", "Tollgate refuses this rule"},
		{"fields out of range", "<!-- fragment: fields -->\n```json\n\"key_table\": {\"max_keys\": 1}\n```\n", "max_keys"},
		{"a misspelt marker is no marker", "<!-- fragmnet: rule -->\n```json\n" + minimalRule + "\n```\n", "Tollgate refuses this configuration"},
		{"another tool's comment is no marker", "<!-- simulate access log -->\n```json\n\"key_table\": {}\n```\n", "Tollgate refuses this configuration"},
		{"a marker for the other language", "<!-- json-lines -->\n```yaml\nname: r\n```\n", "unknown marker"},
		{"an unchecked block without its reason", "<!-- unchecked -->\n```json\n{…}\n```\n", "say why"},
		{"json-lines with a broken line", "<!-- json-lines -->\n```json\n{\"a\": 1}\n{\"a\": \n```\n", "line 2 of the block"},
		{"a marker before a paragraph is not the block's", "<!-- fragment: rule -->\nSome text.\n\n```json\n" + minimalRule + "\n```\n", "Tollgate refuses this configuration"},
		{"an unknown Envoy type", "<!-- fragment: envoy.config.nothing.v3.Nothing -->\n```yaml\nname: x\n```\n", "not a message type"},
		{"an unknown Envoy field", "<!-- fragment: envoy.config.cluster.v3.Cluster -->\n```yaml\nname: x\nconect_timeout: 1s\n```\n", "not an Envoy envoy.config.cluster.v3.Cluster"},
		{"an Envoy value out of range", "<!-- fragment: envoy.config.cluster.v3.Cluster -->\n```yaml\nname: x\nconnect_timeout: -1s\n```\n", "ConnectTimeout"},
		{"a Tollgate filter with a bad configuration", httpFilter + "\n```yaml\n" + fmt.Sprintf(wasmFilter, `{"name": "r"}`) + "```\n", "Tollgate refuses it"},
		{"a wrong rule tag", "<!-- fragment: envoy.config.bootstrap.v3.Bootstrap -->\n```yaml\nstats_config:\n  stats_tags:\n  - {tag_name: tollgate_rule, regex: '^tollgate\\.rule\\.((.+)\\.)[a-z_]+$'}\n```\n", "has regex"},
		{"a bootstrap with an unknown field", "```yaml\nstatic_resorces: {}\n```\n", "not an Envoy v3 Bootstrap"},
		{"a WasmPlugin without a selector", "```yaml\napiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {name: t}\nspec:\n  url: oci://r/t:1\n  phase: STATS\n  priority: 1\n  failStrategy: FAIL_OPEN\n  match: [{mode: SERVER}]\n  pluginConfig: {rules: [{name: r, key: [{header: k}], limits: [{capacity: 1, refill_tokens: 1, refill_interval: 1s}]}]}\n```\n", "spec.selector"},
		{"a descriptor without a key", "```yaml\ndomain: d\ndescriptors:\n- value: v\n```\n", "key: empty"},
		{"an indented block in a list", "1. Step:\n\n   <!-- fragment: rule -->\n   ```json\n   {\"name\": \"r\"}\n   ```\n", "Tollgate refuses this rule"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			blocks, err := readDocBlocks("doc.md", []byte("# Doc\n\n"+c.doc))
			if err != nil {
				t.Fatal(err)
			}
			if len(blocks) != 1 {
				t.Fatalf("read %d blocks, want 1", len(blocks))
			}
			err = checkDocBlock(blocks[0])
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "doc.md:") {
				t.Fatalf("got %v, want an error naming doc.md and containing %q", err, c.want)
			}
		})
	}
	// The unmutated forms of the Envoy cases pass, so the refusals above are the mutations'.
	for _, doc := range []string{
		httpFilter + "\n```yaml\n" + fmt.Sprintf(wasmFilter, minimalRule) + "```\n",
		"<!-- fragment: envoy.config.cluster.v3.Cluster -->\n```yaml\nname: x\nconnect_timeout: 1s\n```\n",
	} {
		blocks, err := readDocBlocks("doc.md", []byte(doc))
		if err != nil || len(blocks) != 1 {
			t.Fatalf("read %d blocks, %v", len(blocks), err)
		}
		if err := checkDocBlock(blocks[0]); err != nil {
			t.Fatalf("the valid form is refused: %v", err)
		}
	}
	if _, err := readDocBlocks("doc.md", []byte("```json\n{}\n")); err == nil || !strings.Contains(err.Error(), "never closed") {
		t.Fatalf("an unclosed block: got %v", err)
	}
}

var (
	markdownLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	markdownHeading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*$`)
)

// headingAnchor is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces
// turned into hyphens.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// markdownOutline returns the links of a Markdown document outside its fenced blocks, and the
// anchors of its headings.
func markdownOutline(data []byte) (links []string, anchors map[string]bool) {
	anchors = map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if m := markdownHeading.FindStringSubmatch(line); m != nil {
			anchors[headingAnchor(m[1])] = true
		}
		for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
			links = append(links, m[1])
		}
	}
	return links, anchors
}

// Every relative link between the documents leads to a file that exists and, with a #fragment,
// to one of its headings: moving or renaming a section breaks the test, not the reader.
func TestDocumentLinksResolve(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, documentGlob))
	if err != nil {
		t.Fatal(err)
	}
	roots, _ := filepath.Glob(filepath.Join(repoRoot, "*.md"))
	files = append(roots, files...)
	checked := 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repoRoot, path)
		links, anchors := markdownOutline(data)
		for _, link := range links {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, fragment, _ := strings.Cut(link, "#")
			targetAnchors := anchors
			if target != "" {
				file := filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
				other, err := os.ReadFile(file)
				if err != nil {
					t.Errorf("%s: link %q: %v", name, link, err)
					continue
				}
				_, targetAnchors = markdownOutline(other)
			}
			if fragment != "" && !targetAnchors[fragment] {
				t.Errorf("%s: link %q: no heading with the anchor #%s", name, link, fragment)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found; the reader is broken")
	}
}

func TestHeadingAnchors(t *testing.T) {
	for heading, want := range map[string]string{
		"Key table and memory":                 "key-table-and-memory",
		"Running envoyproxy/ratelimit":         "running-envoyproxyratelimit",
		"Envoy's local_ratelimit or Tollgate?": "envoys-local_ratelimit-or-tollgate",
		"`make test` and CI":                   "make-test-and-ci",
	} {
		if got := headingAnchor(heading); got != want {
			t.Errorf("headingAnchor(%q) = %q, want %q", heading, got, want)
		}
	}
}
