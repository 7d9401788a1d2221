package admission

import (
	"bytes"
	"strings"
	"unsafe"

	"github.com/tollgate-proxy/tollgate/config"
)

// Upstreams disagree about what a path means: nginx decodes %2F into a separator before routing,
// Tomcat and Jetty drop ";" parameters from each segment, IIS reads "\" as "/". A rule that
// looks at one reading only can be slipped past with another spelling, and an exemption can be
// reached through one ("/public/..%2fapi/x"). So a request path has a few readings, and:
//
//   - a limit applies if any reading matches it;
//   - an exemption applies only if every reading is exempt.
//
// The readings are the RFC 3986 normalization (unreserved characters decoded, runs of slashes
// merged, "." and ".." segments removed, as Envoy's normalize_path and merge_slashes do), and
// that normalization after also decoding %2F and %5C as separators and "\" as "/", after
// removing ";" parameters from each segment, and after both. A limit's exact path also matches
// with one trailing slash more or less. Their number is fixed and each is one pass over the
// path, so the work per request is bounded by a small multiple of the path's length.

// Reading flags: what a reading does beyond the RFC 3986 normalization.
const (
	readSeparators = 1 << iota // %2F and %5C decoded as separators, '\' read as '/'
	readParameters             // ';' and what follows it removed from every segment
	numReadings    = 4         // every combination of the flags
)

// pathReadings holds the readings of one request's path, in a buffer reused from request to
// request (one Gate serves one VM, one request at a time).
type pathReadings struct {
	buf     []byte
	decoded []byte
	list    [numReadings]string // the distinct readings, the plain one first
	n       int
	// decoded is the reading that decodes the most: the path key part's value.
	mostDecoded string
}

// read computes the readings of p (a path without its query string). The strings point into the
// buffer and are valid until the next call.
func (r *pathReadings) read(p string) []string {
	r.n = 0
	if !strings.ContainsAny(p, "%.\\;") && !strings.Contains(p, "//") {
		// Already normal under every reading.
		r.list[0], r.n, r.mostDecoded = p, 1, p
		return r.list[:1]
	}
	flags := [numReadings]int{0, readSeparators, readParameters, readSeparators | readParameters}
	needed := [numReadings]bool{true, hasSeparatorSpelling(p), strings.IndexByte(p, ';') >= 0, false}
	needed[3] = needed[1] && needed[2]
	// Every reading is at most one byte longer than p (a leading '/'); reserve for all of them
	// at once, so that the buffer does not move under the strings already made.
	if room := numReadings * (len(p) + 1); cap(r.buf) < room {
		r.buf = make([]byte, 0, room)
	}
	r.buf = r.buf[:0]
	for i, flag := range flags {
		if !needed[i] {
			continue
		}
		start := len(r.buf)
		r.buf, r.decoded = appendReading(r.buf, r.decoded[:0], p, flag)
		reading := unsafe.String(unsafe.SliceData(r.buf[start:]), len(r.buf)-start)
		r.mostDecoded = reading
		if !r.has(reading) {
			r.list[r.n] = reading
			r.n++
		}
	}
	return r.list[:r.n]
}

func (r *pathReadings) has(reading string) bool {
	for _, seen := range r.list[:r.n] {
		if seen == reading {
			return true
		}
	}
	return false
}

// hasSeparatorSpelling reports whether p spells a separator in a way only some upstreams read as
// one: %2F or %5C (any case), or '\'.
func hasSeparatorSpelling(p string) bool {
	return strings.IndexByte(p, '\\') >= 0 || hasEscapedSlash(p)
}

// hasEscapedSlash reports whether p contains %2F or %5C, in any case: what escaped_slashes
// "reject" refuses, as Envoy's path_with_escaped_slashes_action REJECT_REQUEST does.
func hasEscapedSlash(p string) bool {
	for i := strings.IndexByte(p, '%'); i >= 0 && i+2 < len(p); {
		if a, b := p[i+1], p[i+2]|0x20; a == '2' && b == 'f' || a == '5' && b == 'c' {
			return true
		}
		next := strings.IndexByte(p[i+1:], '%')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return false
}

// appendReading appends the reading of p under flags to dst; decoded is scratch space.
func appendReading(dst, decoded []byte, p string, flags int) ([]byte, []byte) {
	separators := flags&readSeparators != 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if d, ok := escapedByte(p, i); ok {
			switch {
			case isUnreserved(d):
				decoded = append(decoded, d)
				i += 2
				continue
			case separators && (d == '/' || d == '\\'):
				decoded = append(decoded, '/')
				i += 2
				continue
			}
		}
		if c == '\\' && separators {
			c = '/'
		}
		decoded = append(decoded, c)
	}
	// Remove dot segments (RFC 3986 §5.2.4) and empty ones, segment by segment.
	start, trailing := len(dst), false
	for rest := decoded; ; {
		segment, more := rest, false
		if j := bytes.IndexByte(rest, '/'); j >= 0 {
			segment, rest, more = rest[:j], rest[j+1:], true
		}
		if flags&readParameters != 0 {
			if k := bytes.IndexByte(segment, ';'); k >= 0 {
				segment = segment[:k]
			}
		}
		switch {
		case len(segment) == 0 || len(segment) == 1 && segment[0] == '.':
			trailing = true
		case len(segment) == 2 && segment[0] == '.' && segment[1] == '.':
			if j := bytes.LastIndexByte(dst[start:], '/'); j >= 0 {
				dst = dst[:start+j]
			}
			trailing = true
		default:
			dst = append(dst, '/')
			dst = append(dst, segment...)
			trailing = false
		}
		if !more {
			break
		}
	}
	if len(dst) == start || trailing {
		dst = append(dst, '/')
	}
	return dst, decoded
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// pathMatches reports whether one reading matches m. A limit (loose) also takes an exact path
// with one trailing slash more or less ("/login/" for "/login"), as most upstreams serve both;
// an exemption takes only the path itself.
func pathMatches(m *config.PathMatch, reading string, loose bool) bool {
	if m.Exact == "" {
		return strings.HasPrefix(reading, m.Prefix)
	}
	e := m.Exact
	switch {
	case reading == e:
		return true
	case !loose:
		return false
	case len(reading) == len(e)+1:
		return reading[len(e)] == '/' && reading[:len(e)] == e
	case len(e) == len(reading)+1:
		return e[len(reading)] == '/' && e[:len(reading)] == reading
	}
	return false
}

// limitPathMatches reports whether any reading matches a rule's path.
func limitPathMatches(m *config.PathMatch, readings []string) bool {
	for _, reading := range readings {
		if pathMatches(m, reading, true) {
			return true
		}
	}
	return false
}

// exemptPath reports whether every reading matches one of the exempt paths.
func exemptPath(paths []config.PathMatch, readings []string) bool {
	if len(paths) == 0 {
		return false
	}
	for _, reading := range readings {
		exempt := false
		for i := range paths {
			if pathMatches(&paths[i], reading, false) {
				exempt = true
				break
			}
		}
		if !exempt {
			return false
		}
	}
	return true
}
