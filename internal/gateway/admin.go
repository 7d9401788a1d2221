package gateway

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// AdminHandler serves the host's metrics the way Envoy's admin interface does: /stats as
// "name: value" lines, and /stats/prometheus in Prometheus text format, where
// tollgate.rule.<rule>.<event> becomes tollgate_rule_<event>{tollgate_rule="<rule>"} (the
// stats_tags rule that envoy.yaml sets up) and other names have '.' replaced by '_'.
func AdminHandler(metrics *host.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "text/plain; charset=utf-8")
		for _, name := range metrics.Names() {
			v, _ := metrics.Value(name)
			fmt.Fprintf(w, "%s: %d\n", name, v)
		}
	})
	mux.HandleFunc("/stats/prometheus", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "text/plain; version=0.0.4; charset=utf-8")
		byFamily := map[string][]string{}
		for _, name := range metrics.Names() {
			v, _ := metrics.Value(name)
			family, labels := PrometheusName(name)
			byFamily[family] = append(byFamily[family], fmt.Sprintf("%s%s %d", family, labels, v))
		}
		families := make([]string, 0, len(byFamily))
		for f := range byFamily {
			families = append(families, f)
		}
		sort.Strings(families)
		for _, f := range families {
			fmt.Fprintf(w, "# TYPE %s counter\n%s\n", f, strings.Join(byFamily[f], "\n"))
		}
	})
	return mux
}

// PrometheusName turns a metric name into Envoy's Prometheus family name and label set.
func PrometheusName(name string) (family, labels string) {
	if rest, ok := strings.CutPrefix(name, "tollgate.rule."); ok {
		if i := strings.LastIndexByte(rest, '.'); i > 0 {
			return "tollgate_rule_" + sanitize(rest[i+1:]), `{tollgate_rule="` + rest[:i] + `"}`
		}
	}
	return sanitize(name), ""
}

// sanitize replaces what Prometheus does not allow in a metric name with '_'.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == ':' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return '_'
	}, s)
}
