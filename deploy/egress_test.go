package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

// egressConfig is examples/egress/tollgate.json, which the README there serves with `tollgate
// serve`: examples/egress/envoy.yaml must carry the same configuration (TestShippedEnvoyConfigsAreValid).
var egressConfig = func() string {
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples/egress/tollgate.json"))
	if err != nil {
		return "missing examples/egress/tollgate.json: " + err.Error()
	}
	return string(data)
}()

// The egress example paces by authority and holds requests rather than rejecting them, and the
// Envoy route waits longer than the longest hold.
func TestEgressExamplePacesByAuthority(t *testing.T) {
	cfg, err := config.Parse([]byte(egressConfig))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Rules[0]
	if len(r.Key) != 1 || r.Key[0].Kind != config.KeyAuthority || r.OnLimit.Action != config.OnLimitDelay {
		t.Fatalf("rule %+v: want the authority as key and on_limit delay", r)
	}
	c, err := readEnvoyConfig("examples/egress/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for path, hcm := range c.hcms {
		for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
			for _, route := range vh.GetRoutes() {
				if timeout := route.GetRoute().GetTimeout().AsDuration(); timeout <= r.OnLimit.MaxDelay {
					t.Errorf("%s: route timeout %v, want more than max_delay %v", path, timeout, r.OnLimit.MaxDelay)
				}
			}
		}
	}
}
