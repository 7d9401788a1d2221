package hostcore

import (
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// Header maps as Envoy's proxy_*_header_map_value calls see them (envoy
// source/extensions/common/wasm/context.cc getHeaderMapValue, addHeaderMapValue,
// replaceHeaderMapValue, removeHeaderMapValue): names are lower-case (Envoy's header maps are,
// and it lower-cases the names a module passes), a get returns the first value, an add appends
// a value, a replace drops every value of the name and appends the new one, a remove drops every
// value and is Ok for an absent name.

// HeaderValue returns the first value of name (lower-case) in headers.
func HeaderValue(headers [][2]string, name string) (string, bool) {
	for _, h := range headers {
		if h[0] == name {
			return h[1], true
		}
	}
	return "", false
}

// JoinedHeaderValues returns every value of name joined by ",", as Envoy serves the
// request.headers attribute of a header sent more than once.
func JoinedHeaderValues(headers [][2]string, name string) (string, bool) {
	var values []string
	for _, h := range headers {
		if h[0] == name {
			values = append(values, h[1])
		}
	}
	return strings.Join(values, ","), len(values) > 0
}

// AddHeader appends a value of name (lower-cased).
func AddHeader(headers [][2]string, name, value string) [][2]string {
	return append(headers, [2]string{Lower(name), value})
}

// ReplaceHeader drops every value of name (lower-cased) and appends value.
func ReplaceHeader(headers [][2]string, name, value string) [][2]string {
	name = Lower(name)
	return append(RemoveHeader(headers, name), [2]string{name, value})
}

// RemoveHeader returns headers without any value of key (lower-case), in a new slice.
func RemoveHeader(headers [][2]string, key string) [][2]string {
	out := headers[:0:0]
	for _, h := range headers {
		if h[0] != key {
			out = append(out, h)
		}
	}
	return out
}

// SetHeader replaces every value of name with one value, in place of the first, or appends it.
func SetHeader(headers [][2]string, name, value string) [][2]string {
	for i, h := range headers {
		if h[0] == name {
			out := append(headers[:i:i], [2]string{name, value})
			for _, rest := range headers[i+1:] {
				if rest[0] != name {
					out = append(out, rest)
				}
			}
			return out
		}
	}
	return append(headers, [2]string{name, value})
}

// Lower is a header name as Envoy stores it.
func Lower(name string) string { return strings.ToLower(name) }

// LowerKeys returns a copy of headers with lower-case names.
func LowerKeys(headers [][2]string) [][2]string {
	out := make([][2]string, len(headers))
	for i, h := range headers {
		out[i] = [2]string{Lower(h[0]), h[1]}
	}
	return out
}

// Limits of cpp-host's pairs parser (include/proxy-wasm/limits.h): anything larger is treated as
// an empty map.
const (
	maxPairsCount = 1024
	maxPairsBytes = 1 << 20
)

// DecodePairs decodes a serialized header map as cpp-host does (PairsUtil): false for
// malformed pairs and for maps past its limits, which it treats as an empty map.
func DecodePairs(raw []byte) ([][2]string, bool) {
	if len(raw) > maxPairsBytes {
		return nil, false
	}
	pairs, ok := wire.DecodePairs(raw)
	if !ok || len(pairs) > maxPairsCount {
		return nil, false
	}
	return pairs, true
}

// DecodeHeaders decodes a header map the module sends (a local reply's, or one that replaces a
// map) as Envoy takes it: malformed pairs or pairs past cpp-host's limits are no headers, and
// the names are lower-cased, in place, the pairs being decoded for this use alone.
func DecodeHeaders(raw []byte) [][2]string {
	pairs, _ := DecodePairs(raw)
	for i := range pairs {
		pairs[i][0] = Lower(pairs[i][0])
	}
	return pairs
}
