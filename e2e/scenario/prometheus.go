package scenario

import (
	"bufio"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ParsePrometheus reads the Prometheus text format, as Envoy's /stats/prometheus serves it,
// into each series' value, keyed by CanonicalSeries. Comment lines are skipped.
func ParsePrometheus(text string) (map[string]float64, error) {
	values := map[string]float64{}
	scanner := bufio.NewScanner(strings.NewReader(text))
	scanner.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; scanner.Scan(); n++ {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, rest, err := parseSeries(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n, line, err)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("line %d %q: no value", n, line)
		}
		value, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: value: %w", n, line, err)
		}
		values[render(name, labels)] = value
	}
	return values, scanner.Err()
}

// CanonicalSeries writes a series as `name{a="x",b="y"}` with its labels sorted, or as the bare
// name when it has none (Envoy prints a series without labels as `name{}`).
func CanonicalSeries(series string) (string, error) {
	name, labels, rest, err := parseSeries(series)
	if err != nil {
		return "", fmt.Errorf("series %q: %w", series, err)
	}
	if strings.TrimSpace(rest) != "" {
		return "", fmt.Errorf("series %q: unexpected %q after it", series, rest)
	}
	return render(name, labels), nil
}

// parseSeries reads a metric name and its optional {label="value",…} set from the start of s,
// returning what follows.
func parseSeries(s string) (name string, labels [][2]string, rest string, err error) {
	end := strings.IndexAny(s, "{ \t")
	if end < 0 {
		end = len(s)
	}
	name, s = s[:end], s[end:]
	if name == "" {
		return "", nil, "", fmt.Errorf("no metric name")
	}
	if !strings.HasPrefix(s, "{") {
		return name, nil, s, nil
	}
	s = s[1:]
	for {
		s = strings.TrimLeft(s, " ")
		if strings.HasPrefix(s, "}") {
			return name, labels, s[1:], nil
		}
		eq := strings.Index(s, "=")
		if eq <= 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return "", nil, "", fmt.Errorf("malformed label near %q", s)
		}
		label := strings.TrimSpace(s[:eq])
		value, after, ok := readQuoted(s[eq+2:])
		if !ok {
			return "", nil, "", fmt.Errorf("unterminated value of label %s", label)
		}
		labels = append(labels, [2]string{label, value})
		s = strings.TrimLeft(after, " ")
		if strings.HasPrefix(s, ",") {
			s = s[1:]
		} else if !strings.HasPrefix(s, "}") {
			return "", nil, "", fmt.Errorf("expected , or } after label %s", label)
		}
	}
}

// readQuoted reads an escaped label value up to its closing quote.
func readQuoted(s string) (value, rest string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return b.String(), s[i+1:], true
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

func render(name string, labels [][2]string) string {
	if len(labels) == 0 {
		return name
	}
	sorted := append([][2]string(nil), labels...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i][0] < sorted[j][0] })
	parts := make([]string, len(sorted))
	for i, l := range sorted {
		escaped := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(l[1])
		parts[i] = l[0] + `="` + escaped + `"`
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}
