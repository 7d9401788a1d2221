package e2e

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// An invalid configuration fails the plugin start, as Envoy then refuses the filter, with one
// critical log line per problem, each naming the field.
func TestInvalidConfigurationFailsStartWithOneLinePerProblem(t *testing.T) {
	t.Parallel()
	doc := `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 0, "refill_tokens": 1, "refill_interval": "forever"}]}], "mode": 1}`
	var logs []host.LogEntry
	h, err := host.New(context.Background(), module(t), host.Options{
		PluginName: "tollgate", PluginConfig: []byte(doc), CompilationCache: cache,
		Log: func(e host.LogEntry) { logs = append(logs, e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	_, err = h.NewVM(context.Background())
	if err == nil || !strings.Contains(err.Error(), "proxy_on_configure returned false") {
		t.Fatalf("start: %v, want the configuration rejected", err)
	}
	if errors.Is(err, host.ErrVMFailed) {
		t.Fatalf("a rejected configuration must not trap the VM: %v", err)
	}
	var critical []string
	for _, e := range logs {
		if e.Level == 5 {
			critical = append(critical, e.Message)
		}
	}
	want := []string{
		`tollgate: invalid configuration: unknown field "mode"`,
		"tollgate: invalid configuration: rules[0].limits[0].capacity: ",
		"tollgate: invalid configuration: rules[0].limits[0].refill_interval: ",
	}
	if len(critical) != len(want) {
		t.Fatalf("critical log lines:\n%s\nwant %d", strings.Join(critical, "\n"), len(want))
	}
	for _, w := range want {
		found := false
		for _, c := range critical {
			found = found || strings.HasPrefix(c, w)
		}
		if !found {
			t.Errorf("no log line starts with %q:\n%s", w, strings.Join(critical, "\n"))
		}
	}
}

// envoy.yaml carries the plugin configuration as a block scalar after `value: |`; it must be a
// configuration the module accepts. (The full check against Envoy's API schema is separate.)
func TestEnvoyYAMLCarriesAValidConfiguration(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var block []string
	for i, l := range lines {
		if strings.TrimSpace(l) != "value: |" {
			continue
		}
		indent := len(lines[i+1]) - len(strings.TrimLeft(lines[i+1], " "))
		for _, next := range lines[i+1:] {
			if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) < indent {
				break
			}
			block = append(block, next)
		}
		break
	}
	if len(block) == 0 {
		t.Fatal("envoy.yaml has no `value: |` block with the plugin configuration")
	}
	cfg, err := config.Parse([]byte(strings.Join(block, "\n")))
	if err != nil {
		t.Fatalf("envoy.yaml's plugin configuration: %v", err)
	}
	if len(cfg.Rules) != 1 || cfg.Rules[0].Name != "per-api-key" || cfg.Rules[0].Limits[0].Capacity != 3 {
		t.Fatalf("envoy.yaml should carry the seed rule, got %+v", cfg.Rules)
	}
	if !strings.Contains(string(data), "filename: build/tollgate.wasm") {
		t.Error("envoy.yaml must load build/tollgate.wasm")
	}
}
