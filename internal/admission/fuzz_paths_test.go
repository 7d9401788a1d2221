package admission

import (
	"strings"
	"testing"
)

const hexDigits = "0123456789abcdefABCDEF"

// hexValue is a hexadecimal digit's value, for the reference below (independent of netaddr's).
func hexValue(c byte) int {
	i := strings.IndexByte(hexDigits, c)
	if i >= 16 { // upper case
		i -= 6
	}
	return i
}

// refPlainReading is the RFC 3986 normalization as docs/configuration.md describes it, written
// independently of appendReading: unreserved characters decoded, then the path split at '/',
// empty and "." segments dropped, ".." removing the one before; a trailing slash is kept.
func refPlainReading(p string) string {
	var decoded strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) && strings.ContainsRune(hexDigits, rune(p[i+1])) && strings.ContainsRune(hexDigits, rune(p[i+2])) {
			if c := byte(hexValue(p[i+1])<<4 | hexValue(p[i+2])); isUnreserved(c) {
				decoded.WriteByte(c)
				i += 2
				continue
			}
		}
		decoded.WriteByte(p[i])
	}
	var out []string
	segments := strings.Split(decoded.String(), "/")
	for _, segment := range segments {
		switch segment {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, segment)
		}
	}
	last := segments[len(segments)-1]
	result := "/" + strings.Join(out, "/")
	if len(out) > 0 && (last == "" || last == "." || last == "..") {
		result += "/"
	}
	return result
}

// FuzzPathReadings checks the readings of any path: the plain one is the reference
// normalization, there are at most four, none repeats, each is normal (no empty, "." or ".."
// segment), the separator readings hold no spelled separator, and a path already normal has
// itself as its only reading.
func FuzzPathReadings(f *testing.F) {
	for _, seed := range []string{"/api/x", "/x/..%2Fapi/x", "/public/..;/ip/x", `/public/..\ip/x`, "/a;b%2F../api", "//%2e%2E/", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if strings.IndexByte(p, '?') >= 0 {
			return // the query string is split off before
		}
		var r pathReadings
		readings := r.read(p)
		if len(readings) < 1 || len(readings) > numReadings {
			t.Fatalf("%q: %d readings", p, len(readings))
		}
		normal := !strings.ContainsAny(p, "%.\\;") && !strings.Contains(p, "//")
		if normal {
			if len(readings) != 1 || readings[0] != p {
				t.Fatalf("%q is normal, readings %q", p, readings)
			}
			return
		}
		if want := refPlainReading(p); readings[0] != want {
			t.Fatalf("plain reading of %q is %q, the reference gives %q", p, readings[0], want)
		}
		for i, r := range readings {
			for _, earlier := range readings[:i] {
				if r == earlier {
					t.Fatalf("%q: reading %q repeats", p, r)
				}
			}
			if !strings.HasPrefix(r, "/") || strings.Contains(r, "//") {
				t.Fatalf("%q: reading %q is not normal", p, r)
			}
			for _, segment := range strings.Split(r, "/") {
				if segment == "." || segment == ".." {
					t.Fatalf("%q: reading %q keeps a dot segment", p, r)
				}
			}
		}
		if hasSeparatorSpelling(p) && strings.Contains(r.mostDecoded, `\`) {
			t.Fatalf("%q: the most decoded reading %q still has a backslash", p, r.mostDecoded)
		}
		if strings.IndexByte(p, ';') >= 0 && strings.IndexByte(r.mostDecoded, ';') >= 0 {
			t.Fatalf("%q: the most decoded reading %q still has a parameter", p, r.mostDecoded)
		}
	})
}
