package plugin

import (
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
	"github.com/tollgate-proxy/tollgate/internal/hostcore"
)

// Shadow rules never reject: the upstream learns from x-tollgate-shadow-limited which would
// have, and a client's own header of that name never reaches it.
func TestShadowRulesMarkRequests(t *testing.T) {
	host := rig(t, `{"rules": [
	  {"name": "s1", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}], "shadow": true},
	  {"name": "s2", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1h"}], "shadow": true},
	  {"name": "enforced", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1h"}]}]}`)
	spoofed := [2]string{ShadowHeader, "nobody"}
	steps := []struct {
		req     abitest.Request
		outcome string
		marker  string // forwarded; "" for none
	}{
		{keyed("k", "/", spoofed), "continued", ""},
		{keyed("k", "/", spoofed), "continued", "s1"},
		{keyed("k", "/"), "continued", "s1,s2"},
		{keyed("k", "/", spoofed), "429 ra=3600", ""}, // the enforced rule rejects
	}
	for i, step := range steps {
		s, _ := host.Request(step.req)
		marker, _ := hostcore.HeaderValue(s.Forwarded(), ShadowHeader)
		if got := outcome(s); got != step.outcome || marker != step.marker {
			t.Errorf("request %d: %s, marker %q; want %s, %q", i, got, marker, step.outcome, step.marker)
		}
	}
	checkCounters(t, host, map[string]uint64{"tollgate.rule.s1.shadow_limited": 2, "tollgate.rule.s2.shadow_limited": 1,
		"tollgate.rule.enforced.admitted": 3, "tollgate.rule.enforced.limited": 1})
}
