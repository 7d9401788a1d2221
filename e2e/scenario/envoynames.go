package scenario

import (
	"fmt"
	"regexp"
	"strings"
)

// StatsTag is one entry of an Envoy bootstrap's stats_config.stats_tags that extracts its value
// with a regex.
type StatsTag struct {
	Name, Regex string
}

// customStatNamespace is where Envoy files the metrics a Wasm module defines
// (source/extensions/common/wasm/stats_handler.h, CustomStatNamespace).
const customStatNamespace = "wasmcustom"

var notPrometheusNameChar = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// EnvoyPrometheusSeries is the series, in CanonicalSeries form, that Envoy's /stats/prometheus
// shows for a metric a Wasm module defined as stat, given the bootstrap's stats tags. It follows
// Envoy's source (source/common/stats/tag_extractor_impl.cc, tag_producer_impl.cc,
// source/server/admin/prometheus_stats.cc):
//
//   - the full name is "wasmcustom." + stat;
//   - each tag's regex is searched in the name; on a match, group 1 is cut out of the name and
//     group 2 (or group 1 when there is none) is the tag's value; a regex that starts with "^"
//     and a literal segment followed by `\.` is only tried on names whose first segment is that
//     literal;
//   - for Prometheus "wasmcustom." is stripped again, every character other than letters,
//     digits and "_" becomes "_", and no "envoy_" prefix is added.
//
// Envoy's built-in tag extractors are left out: they match only names under Envoy's own prefixes
// (cluster., http., listener., …) or ending in _rq_<code>, which a Tollgate counter never does.
func EnvoyPrometheusSeries(stat string, tags []StatsTag) (string, error) {
	name := customStatNamespace + "." + stat
	type cut struct{ start, end int }
	var cuts []cut
	var labels [][2]string
	for _, tag := range tags {
		re, err := regexp.Compile(tag.Regex)
		if err != nil {
			return "", fmt.Errorf("stats tag %s: %w", tag.Name, err)
		}
		if prefix := literalPrefix(tag.Regex); prefix != "" && !strings.HasPrefix(name, prefix+".") {
			continue
		}
		m := re.FindStringSubmatchIndex(name)
		if len(m) < 4 || m[2] < 0 {
			continue
		}
		value := name[m[2]:m[3]]
		if len(m) >= 6 && m[4] >= 0 {
			value = name[m[4]:m[5]]
		}
		cuts = append(cuts, cut{m[2], m[3]})
		labels = append(labels, [2]string{tag.Name, value})
	}
	var extracted strings.Builder
	for i := 0; i < len(name); i++ {
		inCut := false
		for _, c := range cuts {
			inCut = inCut || (i >= c.start && i < c.end)
		}
		if !inCut {
			extracted.WriteByte(name[i])
		}
	}
	metric := strings.TrimPrefix(extracted.String(), customStatNamespace+".")
	return render(notPrometheusNameChar.ReplaceAllString(metric, "_"), labels), nil
}

// literalPrefix is Envoy's TagExtractorImplBase::extractRegexPrefix: the letters, digits and
// underscores after a leading "^", when a `\.` follows them.
func literalPrefix(regex string) string {
	if !strings.HasPrefix(regex, "^") {
		return ""
	}
	i := 1
	for i < len(regex) && (isAlnum(regex[i]) || regex[i] == '_') {
		i++
	}
	if i > 1 && (strings.HasPrefix(regex[i:], `\.`) || strings.HasPrefix(regex[i:], `(?=\.)`)) {
		return regex[1:i]
	}
	return ""
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
