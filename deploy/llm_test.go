package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

// llmConfig is examples/llm/tollgate.json, which the README there serves with `tollgate serve`:
// examples/llm/envoy.yaml must carry the same configuration (TestShippedEnvoyConfigsAreValid).
var llmConfig = func() string {
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples/llm/tollgate.json"))
	if err != nil {
		return "missing examples/llm/tollgate.json: " + err.Error()
	}
	return string(data)
}()

// The LLM example charges OpenAI usage per API key, reserves no more than its per-minute burst
// holds, logs the usage for the simulator, and its route never cuts a long stream.
func TestLLMExampleChargesUsage(t *testing.T) {
	cfg, err := config.Parse([]byte(llmConfig))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Rules[0]
	if r.Usage == nil || r.Usage.Source != config.UsageOpenAI || len(r.Limits) != 2 {
		t.Fatalf("rule %+v: want usage from openai and two limits", r)
	}
	if w := config.Warnings(cfg); len(w) != 0 {
		t.Errorf("the example has warnings: %v", w)
	}
	c, err := readEnvoyConfig("examples/llm/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for path, hcm := range c.hcms {
		for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
			for _, route := range vh.GetRoutes() {
				if timeout := route.GetRoute().GetTimeout(); timeout == nil || timeout.AsDuration() != 0 {
					t.Errorf("%s: route timeout %v, want 0s (none): a streamed completion may take minutes", path, timeout)
				}
			}
		}
		logs := hcm.GetAccessLog()
		if len(logs) != 1 || !strings.Contains(logs[0].String(), "FILTER_STATE(wasm.tollgate_usage:PLAIN)") {
			t.Errorf("%s: access log %v, want one that records wasm.tollgate_usage for tollgate simulate", path, logs)
		}
	}
}
