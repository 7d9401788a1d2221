package simulate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Format is an access-log format the simulator reads.
type Format int

const (
	// EnvoyJSON is one JSON object per line, as Envoy's file access log writes it with the
	// json_format of docs/simulate.md.
	EnvoyJSON Format = iota
	// Combined is the nginx and Apache "combined" format (also "common", without the last two
	// fields).
	Combined
)

// Entry is one request of an access log, as the module sees it.
type Entry struct {
	// Time is when the request started, in Unix nanoseconds.
	Time                    int64
	Method, Path, Authority string
	// RemoteAddress is the downstream address with its port ("192.0.2.1:5000", "[::1]:5000"),
	// the module's source.address; "" when the log lacks it.
	RemoteAddress string
	// Headers are the other request headers the line carries, names in lower case.
	Headers [][2]string
	// Status is the response status the line records, 100 to 599; 0 when it has none. The
	// replay's upstream answers an admitted request with it, for rules that count or refund by
	// status.
	Status int
	// Usage is what the module charged the request's rules with usage (the tollgate_usage field,
	// the filter state wasm.tollgate_usage), and HasUsage whether the line records it. The
	// replay's upstream reports it, so that usage budgets replay as they ran.
	Usage    int64
	HasUsage bool
}

// Parse reads one line in format f.
func (f Format) Parse(line []byte) (Entry, error) {
	if f == Combined {
		return parseCombined(line)
	}
	return parseEnvoyJSON(line)
}

// headerPrefix marks a request header in an envoy-json line: "req.x-api-key".
const headerPrefix = "req."

// parseEnvoyJSON reads a line of the shipped json_format. Fields other than the ones it knows
// are ignored (a log may carry response codes, durations, …); null and "-" mean absent, which is
// what Envoy writes for a value it does not have.
func parseEnvoyJSON(line []byte) (Entry, error) {
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&fields); err != nil {
		return Entry{}, fmt.Errorf("not a JSON object: %v", err)
	}
	if dec.More() {
		return Entry{}, errors.New("not one JSON object: text follows it")
	}
	if fields == nil {
		return Entry{}, errors.New("not a JSON object: null")
	}
	text := func(name string) (string, error) {
		switch v := fields[name].(type) {
		case nil:
			return "", nil
		case string:
			if v == "-" {
				return "", nil
			}
			return v, nil
		default:
			return "", fmt.Errorf("%s: got %s, want a string", name, jsonKind(v))
		}
	}
	var e Entry
	start, err := text("start_time")
	if err != nil {
		return Entry{}, err
	}
	if start == "" {
		return Entry{}, errors.New("start_time: missing: the replay needs each request's time")
	}
	t, err := time.Parse(time.RFC3339Nano, start)
	if err != nil {
		return Entry{}, fmt.Errorf("start_time: %q is not a time like 2026-11-30T10:00:00.123Z", start)
	}
	e.Time = t.UnixNano()
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
	}{
		{"method", &e.Method, true}, {"path", &e.Path, true},
		{"authority", &e.Authority, false}, {"downstream_remote_address", &e.RemoteAddress, false},
	} {
		if *f.dst, err = text(f.name); err != nil {
			return Entry{}, err
		}
		if f.required && *f.dst == "" {
			return Entry{}, fmt.Errorf("%s: missing", f.name)
		}
	}
	for name := range fields {
		header, ok := strings.CutPrefix(name, headerPrefix)
		if !ok {
			continue
		}
		value, err := text(name)
		if err != nil {
			return Entry{}, err
		}
		if header == "" || strings.HasPrefix(header, ":") {
			return Entry{}, fmt.Errorf("%s: not a header name: pseudo-headers have fields of their own (method, path, authority)", name)
		}
		if value != "" {
			e.Headers = append(e.Headers, [2]string{strings.ToLower(header), value})
		}
	}
	// response_code (a number in the shipped format) is the status; anything else is no status.
	if code, ok := fields["response_code"].(float64); ok && code >= 100 && code <= 599 && code == float64(int(code)) {
		e.Status = int(code)
	}
	if e.Usage, e.HasUsage, err = usageField(fields["tollgate_usage"]); err != nil {
		return Entry{}, err
	}
	// Map order is random; the module sees headers in one order every run.
	sortHeaders(e.Headers)
	return e, nil
}

// usageField reads tollgate_usage: a whole number from 0 to 2^53, as a number or a string of
// digits (%FILTER_STATE(...:PLAIN)% writes a string); null, "" and "-" are no usage.
func usageField(v any) (int64, bool, error) {
	const bad = "tollgate_usage: got %v, want a whole number from 0 to 9007199254740992, the amount the module charged"
	switch v := v.(type) {
	case nil:
		return 0, false, nil
	case float64:
		if v < 0 || v > 1<<53 || v != float64(int64(v)) {
			return 0, false, fmt.Errorf(bad, v)
		}
		return int64(v), true, nil
	case string:
		if v == "" || v == "-" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<53 || strings.TrimLeft(v, "0123456789") != "" {
			return 0, false, fmt.Errorf(bad, strconv.Quote(v))
		}
		return n, true, nil
	}
	return 0, false, fmt.Errorf("tollgate_usage: got %s, want a number", jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func sortHeaders(h [][2]string) {
	for i := 1; i < len(h); i++ {
		for j := i; j > 0 && h[j][0] < h[j-1][0]; j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
}

// combinedTime is the time layout of the combined format: [10/Oct/2000:13:55:36 -0700].
const combinedTime = "02/Jan/2006:15:04:05 -0700"

// parseCombined reads `host ident user [time] "request" status bytes "referer" "user-agent"`.
// The client address has no port (":0" is given, as the module needs one); the time has whole
// seconds.
func parseCombined(line []byte) (Entry, error) {
	s := strings.TrimRight(string(line), "\r")
	host, rest, ok := strings.Cut(s, " ")
	if !ok || host == "" {
		return Entry{}, errors.New("no client address")
	}
	open := strings.IndexByte(rest, '[')
	closing := strings.IndexByte(rest, ']')
	if open < 0 || closing < open {
		return Entry{}, errors.New("no [time]")
	}
	t, err := time.Parse(combinedTime, rest[open+1:closing])
	if err != nil {
		return Entry{}, fmt.Errorf("time: %q is not like 10/Oct/2000:13:55:36 -0700", rest[open+1:closing])
	}
	rest = strings.TrimLeft(rest[closing+1:], " ")
	request, rest, err := quoted(rest)
	if err != nil {
		return Entry{}, fmt.Errorf("request line: %v", err)
	}
	method, target, ok := strings.Cut(request, " ")
	target, _, _ = strings.Cut(target, " ") // the protocol
	if !ok || method == "" || !strings.HasPrefix(target, "/") && target != "*" && !strings.Contains(target, "://") {
		return Entry{}, fmt.Errorf("request line %q is not METHOD TARGET PROTOCOL", request)
	}
	e := Entry{Time: t.UnixNano(), Method: method, Path: target}
	if addr, err := netip.ParseAddr(host); err == nil {
		e.RemoteAddress = netip.AddrPortFrom(addr, 0).String()
	}
	// Status and size, then the optional referer and user agent.
	fields := strings.Fields(rest)
	if len(fields) < 2 {
		return Entry{}, errors.New("no status and size after the request line")
	}
	status, err := strconv.Atoi(fields[0])
	if err != nil {
		return Entry{}, fmt.Errorf("status %q is not a number", fields[0])
	}
	if status >= 100 && status <= 599 {
		e.Status = status
	}
	rest = strings.TrimLeft(rest, " ")
	rest = strings.TrimLeft(rest[len(fields[0]):], " ")
	rest = strings.TrimLeft(rest[len(fields[1]):], " ")
	for _, name := range []string{"referer", "user-agent"} {
		if rest == "" {
			break
		}
		var value string
		if value, rest, err = quoted(rest); err != nil {
			return Entry{}, fmt.Errorf("%s: %v", name, err)
		}
		rest = strings.TrimLeft(rest, " ")
		if value != "" && value != "-" {
			e.Headers = append(e.Headers, [2]string{name, value})
		}
	}
	return e, nil
}

// quoted reads a double-quoted field with backslash escapes (nginx writes \" and \xHH) from the
// start of s and returns it and what follows.
func quoted(s string) (value, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", errors.New("want a quoted field")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
				i++
				b.WriteByte(s[i])
				continue
			}
			if i+3 < len(s) && s[i+1] == 'x' {
				if n, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
					b.WriteByte(byte(n))
					i += 3
					continue
				}
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated quoted field")
}
