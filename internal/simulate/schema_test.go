package simulate

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// schemaChecker validates documents against docs/summary.schema.json: the subset of JSON Schema it
// uses (type, properties, required, additionalProperties, items, $ref to $defs, enum, minimum,
// format date-time), and records which properties the documents held.
type schemaChecker struct {
	root map[string]any
	seen map[string]bool // "def.property" (def "summary" for the top level)
}

func (c *schemaChecker) check(where, def string, node map[string]any, v any) []string {
	if ref, ok := node["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		return c.check(where, name, c.root["$defs"].(map[string]any)[name].(map[string]any), v)
	}
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, where+": "+fmt.Sprintf(format, args...)) }
	if enum, ok := node["enum"].([]any); ok && !containsValue(enum, v) {
		fail("%v is not one of %v", v, enum)
	}
	switch node["type"] {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			fail("%T is not an object", v)
			break
		}
		required, _ := node["required"].([]any)
		for _, name := range required {
			if _, ok := obj[name.(string)]; !ok {
				fail("required %q is missing", name)
			}
		}
		props, _ := node["properties"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(obj)) {
			if p, ok := props[name]; ok {
				c.seen[def+"."+name] = true
				problems = append(problems, c.check(where+"."+name, def, p.(map[string]any), obj[name])...)
			} else if node["additionalProperties"] == true {
				// Any value: the suggested configuration, which config/doc.go describes.
			} else if extra, ok := node["additionalProperties"].(map[string]any); ok {
				problems = append(problems, c.check(where+"."+name, def, extra, obj[name])...)
			} else {
				fail("%q is not in the schema", name)
			}
		}
	case "array":
		list, ok := v.([]any)
		if !ok {
			fail("%T is not an array", v)
			break
		}
		for i, item := range list {
			problems = append(problems, c.check(fmt.Sprintf("%s[%d]", where, i), def, node["items"].(map[string]any), item)...)
		}
	case "string":
		s, ok := v.(string)
		if !ok {
			fail("%T is not a string", v)
		} else if _, err := time.Parse(time.RFC3339Nano, s); node["format"] == "date-time" && err != nil {
			fail("%q is not a date-time", s)
		}
	case "integer", "number":
		n, ok := v.(float64)
		switch {
		case !ok:
			fail("%T is not a number", v)
		case node["type"] == "integer" && n != float64(int64(n)):
			fail("%v is not an integer", n)
		case node["minimum"] != nil && n < node["minimum"].(float64):
			fail("%v is below the minimum %v", n, node["minimum"])
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			fail("%T is not a boolean", v)
		}
	}
	return problems
}

func containsValue(list []any, v any) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// properties lists every "def.property" of the schema, each with its description.
func (c *schemaChecker) properties() map[string]string {
	out := map[string]string{}
	add := func(def string, node map[string]any) {
		props, _ := node["properties"].(map[string]any)
		for name, p := range props {
			desc, _ := p.(map[string]any)["description"].(string)
			out[def+"."+name] = desc
		}
	}
	add("summary", c.root)
	for name, node := range c.root["$defs"].(map[string]any) {
		add(name, node.(map[string]any))
	}
	return out
}

// summary.json is what docs/summary.schema.json describes: every field of rich summaries is in
// the schema with its type, every field of the schema is in one of them, each is described, and
// docs/simulate.md names each one.
func TestSummaryMatchesItsSchema(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "summary.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := &schemaChecker{seen: map[string]bool{}}
	if err := json.Unmarshal(data, &c.root); err != nil {
		t.Fatalf("docs/summary.schema.json: %v", err)
	}
	logPath := filepath.Join(t.TempDir(), "access.log")
	generateLog(t, logPath, 5, genOptions{requests: 3000, keys: 20, noKey: 0.05, exempt: 0.02, clients: 10, meanGapMs: 4, badEvery: 500})
	summaries := []struct {
		name string
		doc  map[string]any
	}{
		{"the rich summary", richSummary(t, logPath)},
		{"the fleet summary", fleetSummary(t, logPath)},
	}
	for _, s := range summaries {
		for _, p := range c.check(s.name+": summary.json", "summary", c.root, s.doc) {
			t.Error(p)
		}
	}
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "simulate.md"))
	if err != nil {
		t.Fatal(err)
	}
	props := c.properties()
	names := slices.Sorted(maps.Keys(props))
	for _, p := range names {
		if !c.seen[p] {
			t.Errorf("the schema's %s is in no summary the test made", p)
		}
		if props[p] == "" {
			t.Errorf("the schema's %s has no description", p)
		}
		field := p[strings.IndexByte(p, '.')+1:]
		if !regexp.MustCompile("`" + regexp.QuoteMeta(field) + "`").Match(docs) {
			t.Errorf("docs/simulate.md does not name %s's field `%s`", p, field)
		}
	}
}

// richSummary is a summary with every optional part but fleet: bad lines, tiers, windows over
// several phases, --compare and --suggest.
func richSummary(t *testing.T, logPath string) map[string]any {
	tiers := `{"name": "plans", "key": [{"header": "x-api-key"}], "limits_by": {"part": {"header": "x-plan"}, "default": "free",
	  "tiers": {"free": [{"algorithm": "sliding_window", "capacity": 50, "window": "1h"}]}}}`
	_, doc := simulateFileWith(t, logPath, EnvoyJSON, false, func(o *RunOptions) { o.SuggestPercent = 1 },
		`{"rules": [`+tiers+`, {"name": "per-key", "key": [{"header": "x-api-key"}],
		  "limits": [{"capacity": 4, "refill_tokens": 3, "refill_interval": "250ms"}]}]}`, compareConfigs[1])
	return doc
}

// fleetSummary is the summary tollgate simulate --replicas writes: the module's replay and the
// fleet model's, of a rule with a global limit and a lease and one with a global limit alone.
func fleetSummary(t *testing.T, logPath string) map[string]any {
	const cfg = `{"rules": [
	  {"name": "leased", "key": [{"header": "x-api-key"}],
	   "limits": [{"capacity": 20, "refill_tokens": 10, "refill_interval": "1s"}],
	   "global": {"cluster": "ratelimit", "domain": "api", "lease": {"max_tokens": 8, "ttl": "1s"}}},
	  {"name": "per-client", "key": [{"client_ip": {}}],
	   "limits": [{"capacity": 1000, "refill_tokens": 1000, "refill_interval": "1s"}],
	   "global": {"cluster": "ratelimit", "domain": "api"}}]}`
	s, _ := simulateFile(t, logPath, EnvoyJSON, false, cfg)
	log, err := Open(logPath, EnvoyJSON)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	limits := mustLimit(t, "leased=600/minute")
	// As a descriptor with unit_multiplier 5 has it: global_limit reads "100/5 second".
	if limits["per-client"], err = NewGlobalLimit(100, "second", 5); err != nil {
		t.Fatal(err)
	}
	s.Fleet, err = RunFleet(log, []byte(cfg), FleetOptions{Replicas: 3, Workers: 2, Balance: HashClient,
		Limits: limits, ServiceLatency: time.Millisecond, RedisShards: 3})
	if err != nil {
		t.Fatal(err)
	}
	return decodeSummary(t, s)
}
