package gateway

import "testing"

func TestPrometheusName(t *testing.T) {
	for name, want := range map[string][2]string{
		"tollgate.rule.per-api-key.admitted": {"tollgate_rule_admitted", `{tollgate_rule="per-api-key"}`},
		"tollgate.rule.a.b.c.shadow_limited": {"tollgate_rule_shadow_limited", `{tollgate_rule="a.b.c"}`},
		"tollgate.exempt":                    {"tollgate_exempt", ""},
		"tollgate.internal_errors":           {"tollgate_internal_errors", ""},
		"other-plugin.some metric":           {"other_plugin_some_metric", ""},
	} {
		family, labels := PrometheusName(name)
		if family != want[0] || labels != want[1] {
			t.Errorf("PrometheusName(%q) = %q %q, want %q %q", name, family, labels, want[0], want[1])
		}
	}
}
