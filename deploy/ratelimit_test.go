package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"sigs.k8s.io/yaml"

	"github.com/tollgate-proxy/tollgate/config"
)

// The import of upstreams/http/v3 registers HttpProtocolOptions, which a gRPC cluster's
// typed_extension_protocol_options names to ask for HTTP/2.

func init() {
	// Registered here rather than in the lists of shipped_test.go and istio_test.go, to keep
	// the global limit's files together.
	otherShippedFiles["deploy/ratelimit/ratelimit.yaml"] = "TestShippedRateLimitConfigMatchesEnvoy"
	istioManifests = append(istioManifests, "deploy/istio/wasmplugin-global.yaml")
}

// rateLimitConfigs pairs each shipped envoyproxy/ratelimit descriptor configuration with the
// Envoy configuration whose Tollgate global limits it serves.
var rateLimitConfigs = []struct{ descriptors, envoy string }{
	{"deploy/ratelimit/ratelimit.yaml", "deploy/ratelimit/envoy.yaml"},
}

// rateLimitFile is envoyproxy/ratelimit's configuration file (src/config/config_impl.go,
// yamlRoot, yamlDescriptor and yamlRateLimit), with the fields it reads.
type rateLimitFile struct {
	Domain      string                `json:"domain"`
	Descriptors []rateLimitDescriptor `json:"descriptors"`
}

type rateLimitDescriptor struct {
	Key            string                `json:"key"`
	Value          string                `json:"value"`
	RateLimit      *rateLimitLimit       `json:"rate_limit"`
	Descriptors    []rateLimitDescriptor `json:"descriptors"`
	ShadowMode     bool                  `json:"shadow_mode"`
	QuotaMode      bool                  `json:"quota_mode"`
	DetailedMetric bool                  `json:"detailed_metric"`
	ValueToMetric  bool                  `json:"value_to_metric"`
	ShareThreshold bool                  `json:"share_threshold"`
}

type rateLimitLimit struct {
	RequestsPerUnit uint32   `json:"requests_per_unit"`
	Unit            string   `json:"unit"`
	UnitMultiplier  *uint32  `json:"unit_multiplier"`
	Unlimited       bool     `json:"unlimited"`
	Name            string   `json:"name"`
	Replaces        []string `json:"replaces"`
}

var rateLimitUnits = []string{"SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "YEAR"}

// readRateLimitFile reads a descriptor configuration, refusing unknown fields and what the
// service refuses when it loads one: an empty domain or key, an unknown unit, a limit of 0
// requests that is not unlimited, and a key and value given twice at one level.
func readRateLimitFile(name string, data []byte) (*rateLimitFile, error) {
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not YAML: %w", name, err)
	}
	var f rateLimitFile
	decoder := json.NewDecoder(bytes.NewReader(jsonData))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var problems []error
	if f.Domain == "" {
		problems = append(problems, fmt.Errorf("%s: domain: empty", name))
	}
	var walk func(path string, ds []rateLimitDescriptor)
	walk = func(path string, ds []rateLimitDescriptor) {
		seen := map[string]bool{}
		for i, d := range ds {
			at := fmt.Sprintf("%s[%d]", path, i)
			if d.Key == "" {
				problems = append(problems, fmt.Errorf("%s: %s.key: empty", name, at))
			}
			if seen[d.Key+"_"+d.Value] {
				problems = append(problems, fmt.Errorf("%s: %s: key %q value %q given twice at one level", name, at, d.Key, d.Value))
			}
			seen[d.Key+"_"+d.Value] = true
			if l := d.RateLimit; l != nil {
				known := false
				for _, u := range rateLimitUnits {
					known = known || strings.EqualFold(l.Unit, u)
				}
				if !known && !l.Unlimited {
					problems = append(problems, fmt.Errorf("%s: %s.rate_limit.unit: %q, want one of %s", name, at, l.Unit, strings.Join(rateLimitUnits, ", ")))
				}
				if l.RequestsPerUnit == 0 && !l.Unlimited {
					problems = append(problems, fmt.Errorf("%s: %s.rate_limit.requests_per_unit: 0 requests; say unlimited: true instead", name, at))
				}
			}
			walk(at+".descriptors", d.Descriptors)
		}
	}
	walk("descriptors", f.Descriptors)
	return &f, errors.Join(problems...)
}

// limitFor finds the limit the service applies to a descriptor, as envoyproxy/ratelimit's
// GetLimit does: each entry matches "key_value" first, then "key" alone (any value), and only
// a node reached by the last entry gives its limit. A nil entry value stands for any value.
func (f *rateLimitFile) limitFor(entries []config.GlobalEntry) *rateLimitLimit {
	level := f.Descriptors
	for i, e := range entries {
		var next *rateLimitDescriptor
		for j := range level {
			if level[j].Key == e.Key && level[j].Value == e.Value && e.Value != "" {
				next = &level[j]
			}
		}
		if next == nil {
			for j := range level {
				if level[j].Key == e.Key && level[j].Value == "" {
					next = &level[j]
				}
			}
		}
		if next == nil {
			return nil
		}
		if i == len(entries)-1 {
			return next.RateLimit
		}
		level = next.Descriptors
	}
	return nil
}

// globalDescriptor is the descriptor Tollgate sends for a rule's global limit, with the hashed
// key left open.
func globalDescriptor(r config.Rule) []config.GlobalEntry {
	entries := append([]config.GlobalEntry(nil), r.Global.Entries...)
	return append(entries, config.GlobalEntry{Key: r.Global.RuleEntry, Value: r.Name}, config.GlobalEntry{Key: r.Global.KeyEntry})
}

// checkRateLimitPair checks that a descriptor configuration gives a limit to every global limit
// of the Tollgate filters of an Envoy configuration.
func checkRateLimitPair(descriptorsName string, descriptors []byte, envoy *envoyConfig) error {
	f, err := readRateLimitFile(descriptorsName, descriptors)
	if err != nil {
		return err
	}
	var problems []error
	globals := 0
	for _, path := range sortedKeys(envoy.tollgate) {
		cfg, err := tollgateConfiguration(envoy.tollgate[path])
		if err != nil {
			return err
		}
		for i, r := range cfg.Rules {
			if r.Global == nil {
				continue
			}
			globals++
			at := fmt.Sprintf("%s: %s rules[%d] (%s)", envoy.name, path, i, r.Name)
			if r.Global.Domain != f.Domain {
				problems = append(problems, fmt.Errorf("%s: global domain %q, but %s configures domain %q", at, r.Global.Domain, descriptorsName, f.Domain))
				continue
			}
			if l := f.limitFor(globalDescriptor(r)); l == nil || (l.RequestsPerUnit == 0 && !l.Unlimited) {
				problems = append(problems, fmt.Errorf("%s: %s has no limit for the descriptor Tollgate sends, %s", at, descriptorsName, describeEntries(globalDescriptor(r))))
			}
		}
	}
	if globals == 0 {
		problems = append(problems, fmt.Errorf("%s: no Tollgate rule has a global limit", envoy.name))
	}
	return errors.Join(problems...)
}

func describeEntries(entries []config.GlobalEntry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		value := e.Value
		if value == "" {
			value = "<hash of the key>"
		}
		parts[i] = "(" + e.Key + ", " + value + ")"
	}
	return strings.Join(parts, " ")
}

// checkGlobalClusters checks that every cluster a Tollgate global limit names exists and speaks
// HTTP/2, which gRPC needs: Envoy's default towards an upstream is HTTP/1.1.
func checkGlobalClusters(c *envoyConfig) error {
	clusters := map[string]*clusterv3.Cluster{}
	for _, cl := range c.bootstrap.GetStaticResources().GetClusters() {
		clusters[cl.GetName()] = cl
	}
	var problems []error
	for _, path := range sortedKeys(c.tollgate) {
		cfg, err := tollgateConfiguration(c.tollgate[path])
		if err != nil {
			return err
		}
		for i, r := range cfg.Rules {
			if r.Global == nil {
				continue
			}
			at := fmt.Sprintf("%s: %s rules[%d].global.cluster", c.name, path, i)
			cl, ok := clusters[r.Global.Cluster]
			if !ok {
				problems = append(problems, fmt.Errorf("%s: %q is not a cluster of static_resources.clusters", at, r.Global.Cluster))
				continue
			}
			if !speaksHTTP2(cl) {
				problems = append(problems, fmt.Errorf("%s: cluster %q does not speak HTTP/2, which gRPC needs: set typed_extension_protocol_options "+
					"envoy.extensions.upstreams.http.v3.HttpProtocolOptions with explicit_http_config: {http2_protocol_options: {}}", at, r.Global.Cluster))
			}
		}
	}
	return errors.Join(problems...)
}

func speaksHTTP2(cl *clusterv3.Cluster) bool {
	//lint:ignore SA1019 the deprecated field still works in Envoy
	if cl.GetHttp2ProtocolOptions() != nil {
		return true
	}
	packed, ok := cl.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if !ok {
		return false
	}
	var options upstreamhttpv3.HttpProtocolOptions
	if err := packed.UnmarshalTo(&options); err != nil {
		return false
	}
	return options.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

// Each shipped descriptor configuration is one envoyproxy/ratelimit loads, and gives a limit to
// what its Envoy configuration's Tollgate sends; each global limit's cluster speaks HTTP/2.
// e2e/ratelimit loads the same file into the real service.
func TestShippedRateLimitConfigMatchesEnvoy(t *testing.T) {
	for _, pair := range rateLimitConfigs {
		envoy, err := readEnvoyConfig(pair.envoy)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(repoRoot, pair.descriptors))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkRateLimitPair(pair.descriptors, data, envoy); err != nil {
			t.Error(err)
		}
	}
	for _, c := range envoyConfigs {
		envoy, err := readEnvoyConfig(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkGlobalClusters(envoy); err != nil {
			t.Error(err)
		}
	}
}

// The checks refuse what would break the global limit, each for the stated reason.
func TestRateLimitChecksRefuseMutations(t *testing.T) {
	const envoyFile, descriptorsFile = "deploy/ratelimit/envoy.yaml", "deploy/ratelimit/ratelimit.yaml"
	tests := []struct {
		name, file, old, new string
		want                 []string
	}{
		{"HTTP/1.1 to the service", envoyFile, "explicit_http_config:\n          http2_protocol_options: {}", "explicit_http_config:\n          http_protocol_options: {}",
			[]string{`rules[0].global.cluster: cluster "ratelimit" does not speak HTTP/2`}},
		{"cluster renamed", envoyFile, "  - name: ratelimit\n", "  - name: rls\n",
			[]string{`rules[0].global.cluster: "ratelimit" is not a cluster`}},
		{"other domain", descriptorsFile, "domain: tollgate", "domain: edge",
			[]string{`global domain "tollgate", but deploy/ratelimit/ratelimit.yaml configures domain "edge"`}},
		{"rule misnamed", descriptorsFile, "value: per-api-key", "value: per-apikey",
			[]string{"has no limit for the descriptor Tollgate sends, (rule, per-api-key) (key, <hash of the key>)"}},
		{"limit one level too high", descriptorsFile, "  descriptors:\n  - key: key\n    rate_limit:", "  rate_limit:",
			[]string{"has no limit for the descriptor Tollgate sends"}},
		{"unknown unit", descriptorsFile, "unit: minute", "unit: fortnight",
			[]string{`rate_limit.unit: "fortnight"`}},
		{"misspelt field", descriptorsFile, "requests_per_unit: 100", "request_per_unit: 100",
			[]string{`unknown field "request_per_unit"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string][]byte{}
			for _, name := range []string{envoyFile, descriptorsFile} {
				data, err := os.ReadFile(filepath.Join(repoRoot, name))
				if err != nil {
					t.Fatal(err)
				}
				files[name] = data
			}
			original := string(files[tt.file])
			if n := strings.Count(original, tt.old); n != 1 {
				t.Fatalf("%s contains %q %d times; the mutation needs it exactly once", tt.file, tt.old, n)
			}
			files[tt.file] = []byte(strings.Replace(original, tt.old, tt.new, 1))
			envoy, err := checkEnvoyConfig(envoyFile, files[envoyFile])
			if err == nil {
				err = errors.Join(checkGlobalClusters(envoy), checkRateLimitPair(descriptorsFile, files[descriptorsFile], envoy))
			}
			if err == nil {
				t.Fatal("the mutated files passed")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the report lacks %q:\n%v", want, err)
				}
			}
		})
	}
}
