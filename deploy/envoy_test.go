package deploy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/e2e/scenario"
)

// envoyConfigs are the Envoy configurations the repository ships, with what each must carry.
var envoyConfigs = []struct {
	file string
	// tollgateFilters is how many Wasm filters run Tollgate in it.
	tollgateFilters int
	// module is where its Tollgate filter loads the module from.
	module string
	// pluginConfig, when set, is the configuration its Tollgate filter must carry.
	pluginConfig string
}{
	{file: "envoy.yaml", tollgateFilters: 1, module: "build/tollgate.wasm"},
	{file: "e2e/envoy/envoy.yaml", tollgateFilters: 1, module: "/etc/envoy/tollgate.wasm", pluginConfig: scenario.Config},
	{file: "e2e/envoy/upstream.yaml"},
	{file: "deploy/ratelimit/envoy.yaml", tollgateFilters: 1, module: "build/tollgate.wasm"},
	{file: "deploy/remote/envoy.yaml", tollgateFilters: 1, module: "https://downloads.example.com/tollgate/v0.1.0/tollgate.wasm"},
	{file: "examples/egress/envoy.yaml", tollgateFilters: 1, module: "build/tollgate.wasm", pluginConfig: egressConfig},
	{file: "examples/llm/envoy.yaml", tollgateFilters: 1, module: "build/tollgate.wasm", pluginConfig: llmConfig},
}

func TestShippedEnvoyConfigsAreValid(t *testing.T) {
	for _, tt := range envoyConfigs {
		t.Run(tt.file, func(t *testing.T) {
			c, err := readEnvoyConfig(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d typed configs, all resolved: %s", len(c.types), strings.Join(typeNames(c.types), ", "))
			if len(c.tollgate) != tt.tollgateFilters {
				t.Fatalf("%d Tollgate filters, want %d", len(c.tollgate), tt.tollgateFilters)
			}
			for _, path := range sortedKeys(c.tollgate) {
				filter := c.tollgate[path]
				if got := moduleSource(filter); got != tt.module {
					t.Errorf("%s loads the module from %q, want %q", path, got, tt.module)
				}
				if tt.pluginConfig == "" {
					continue
				}
				got, err := tollgateConfiguration(filter)
				if err != nil {
					t.Fatal(err)
				}
				want, err := config.Parse([]byte(tt.pluginConfig))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s carries %+v, want the scenario's configuration %+v", path, got, want)
				}
			}
		})
	}
}

func typeNames(types map[string]string) []string {
	seen := map[string]bool{}
	var names []string
	for _, path := range sortedKeys(types) {
		if !seen[types[path]] {
			seen[types[path]] = true
			names = append(names, types[path])
		}
	}
	return names
}

// The upstream of the container test answers with the body the scenario takes for the upstream's.
func TestUpstreamAnswersWithTheScenarioBody(t *testing.T) {
	c, err := readEnvoyConfig("e2e/envoy/upstream.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, hcm := range c.hcms {
		for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				bodies = append(bodies, r.GetDirectResponse().GetBody().GetInlineString())
			}
		}
	}
	if len(bodies) != 1 || bodies[0] != scenario.UpstreamBody {
		t.Fatalf("the upstream answers %q, want one route answering %q", bodies, scenario.UpstreamBody)
	}
}

// The check fails on the mistakes people make, each reported with the file and the field: a
// mutated copy of a shipped configuration must be refused for the stated reason.
func TestEnvoyConfigCheckRefusesMutations(t *testing.T) {
	const router = `          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`
	tests := []struct {
		name, file, old, new string
		want                 []string
	}{
		{"misspelt field", "envoy.yaml", "stat_prefix: ingress", "stat_prefx: ingress",
			[]string{"envoy.yaml: not an Envoy v3 Bootstrap", `unknown field "stat_prefx"`}},
		{"field repeated", "envoy.yaml", "stat_prefix: ingress", "stat_prefix: ingress\n          stat_prefix: egress",
			[]string{"envoy.yaml: not YAML", `key "stat_prefix" already set`}},
		{"misspelt type", "envoy.yaml", "http_connection_manager.v3.HttpConnectionManager", "http_connection_manager.v3.HttpConnectionManagr",
			[]string{"envoy.yaml: not an Envoy v3 Bootstrap", "unable to resolve", "HttpConnectionManagr"}},
		{"Istio's enum name in Envoy", "envoy.yaml", "failure_policy: FAIL_CLOSED", "failure_policy: FAIL_CLOSE",
			[]string{"envoy.yaml: not an Envoy v3 Bootstrap", "FAIL_CLOSE"}},
		{"port out of range", "envoy.yaml", "port_value: 10000", "port_value: 100000",
			[]string{"envoy.yaml: (bootstrap): invalid Bootstrap.StaticResources", "PortValue: value must be less than or equal to 65535"}},
		{"rule inside an Any broken", "envoy.yaml", `domains: ["*"]`, `domains: []`,
			[]string{"typed_config(envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager)", "Domains: value must contain at least 1 item"}},
		{"Tollgate field misspelt", "envoy.yaml", `"refill_interval": "1s"`, `"refill_intervall": "1s"`,
			[]string{"typed_config(envoy.extensions.filters.http.wasm.v3.Wasm).config.configuration: Tollgate refuses it", "refill_intervall"}},
		{"Tollgate value wrong", "e2e/envoy/envoy.yaml", `"capacity": 3`, `"capacity": 0`,
			[]string{"e2e/envoy/envoy.yaml:", "config.configuration: Tollgate refuses it: rules[0].limits[0].capacity"}},
		{"failure policy left to the default", "envoy.yaml", "failure_policy: FAIL_CLOSED", "fail_open: false",
			[]string{"config.failure_policy: not set"}},
		{"another runtime", "envoy.yaml", "runtime: envoy.wasm.runtime.v8", "runtime: envoy.wasm.runtime.wamr",
			[]string{"config.vm_config.runtime", "envoy.wasm.runtime.v8"}},
		{"another module", "envoy.yaml", "filename: build/tollgate.wasm", "filename: build/other.wasm",
			[]string{"config.vm_config.code.local.filename", "tollgate.wasm"}},
		{"router missing", "envoy.yaml", router, "",
			[]string{"http_filters: the last filter must be the router"}},
		{"unknown cluster", "e2e/envoy/envoy.yaml", "route: { cluster: upstream }", "route: { cluster: upstreams }",
			[]string{`route.cluster: "upstreams" is not a cluster`}},
		{"remote module without a checksum", "deploy/remote/envoy.yaml", `sha256: "0000000000000000000000000000000000000000000000000000000000000000"`, "",
			[]string{"deploy/remote/envoy.yaml: ", "RemoteDataSource.Sha256: value length must be at least 1"}},
		{"remote checksum unquoted", "deploy/remote/envoy.yaml", `sha256: "0000000000000000000000000000000000000000000000000000000000000000"`, "sha256: 0000000000000000000000000000000000000000000000000000000000000000",
			[]string{"deploy/remote/envoy.yaml: not an Envoy v3 Bootstrap", "invalid value for string field sha256"}},
		{"remote checksum not hex", "deploy/remote/envoy.yaml", `sha256: "0000000000000000000000000000000000000000000000000000000000000000"`, `sha256: "sha256:0000"`,
			[]string{"config.vm_config.code.remote.sha256", "64 lowercase hex digits"}},
		{"remote checksum in upper case", "deploy/remote/envoy.yaml", `sha256: "0000000000000000000000000000000000000000000000000000000000000000"`, `sha256: "ABCDEF0000000000000000000000000000000000000000000000000000000000"`,
			[]string{"config.vm_config.code.remote.sha256"}},
		{"remote module without retries", "deploy/remote/envoy.yaml", "                        num_retries: 5\n", "",
			[]string{"config.vm_config.code.remote.retry_policy.num_retries: not set"}},
		{"remote module through an unknown cluster", "deploy/remote/envoy.yaml", "cluster: tollgate_download", "cluster: tollgate_downloads",
			[]string{`config.vm_config.code.remote.http_uri.cluster: "tollgate_downloads" is not a cluster`}},
		{"remote module without a timeout", "deploy/remote/envoy.yaml", "                        timeout: 10s\n", "",
			[]string{"HttpUri.Timeout: value is required"}},
		{"remote module over plain http", "deploy/remote/envoy.yaml", "uri: https://", "uri: http://",
			[]string{"config.vm_config.code.remote.http_uri.uri", "over https"}},
		{"rule tag without the namespace", "envoy.yaml", `regex: '^wasmcustom\.tollgate`, `regex: '^tollgate`,
			[]string{"stats_config.stats_tags: tollgate_rule has regex"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original, err := os.ReadFile(filepath.Join(repoRoot, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(original), tt.old); n != 1 {
				t.Fatalf("%s contains %q %d times; the mutation needs it exactly once", tt.file, tt.old, n)
			}
			mutated := strings.Replace(string(original), tt.old, tt.new, 1)
			_, err = checkEnvoyConfig(tt.file, []byte(mutated))
			if err == nil {
				t.Fatalf("the mutated %s passed", tt.file)
			}
			t.Logf("refused: %v", err)
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the report lacks %q:\n%v", want, err)
				}
			}
		})
	}
}
