package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/tollgate-proxy/tollgate/internal/ratelimitconf"
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

// checkRateLimitPair checks that a descriptor configuration gives a limit to every global limit
// of the Tollgate filters of an Envoy configuration.
func checkRateLimitPair(descriptorsName string, descriptors []byte, envoy *envoyConfig) error {
	f, err := ratelimitconf.Read(descriptorsName, descriptors)
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
			if l := f.LimitFor(ratelimitconf.RuleDescriptor(&r)); l == nil || (l.RequestsPerUnit == 0 && !l.Unlimited) {
				problems = append(problems, fmt.Errorf("%s: %s has no limit for the descriptor Tollgate sends, %s", at, descriptorsName, ratelimitconf.DescribeEntries(ratelimitconf.RuleDescriptor(&r))))
			}
		}
	}
	if globals == 0 {
		problems = append(problems, fmt.Errorf("%s: no Tollgate rule has a global limit", envoy.name))
	}
	return errors.Join(problems...)
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
