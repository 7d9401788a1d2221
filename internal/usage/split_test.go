package usage

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// sample is a body of the tables with how to read it.
type sample struct {
	name   string
	src    Source
	stream bool
	body   string
}

// samples are the bodies of every table.
func samples() []sample {
	var all []sample
	for _, c := range realBodies {
		all = append(all, sample{c.name, c.src, c.stream, c.body})
	}
	for _, c := range badBodies {
		all = append(all, sample{c.name, c.src, c.stream, c.body})
	}
	for _, c := range framingBodies {
		all = append(all, sample{c.name, OpenAI, true, c.body})
	}
	return all
}

// result is all a Scanner reports.
type result struct {
	n   int64
	ok  bool
	why string
}

// scanChunks reads body cut into chunks of the given sizes (the rest in a last chunk) with s.
func scanChunks(s *Scanner, src Source, count Count, stream bool, body []byte, sizes ...int) result {
	s.Reset(src, count, stream)
	for _, size := range sizes {
		size = min(size, len(body))
		s.Write(body[:size])
		body = body[size:]
	}
	s.Write(body)
	n, ok := s.Tokens()
	return result{n, ok, s.Reason()}
}

// Cutting a body anywhere, or into single bytes, changes nothing.
func TestSplitAnywhereIsWhole(t *testing.T) {
	var s Scanner
	for _, c := range samples() {
		body := []byte(c.body)
		for _, count := range counts {
			whole := scanChunks(&s, c.src, count, c.stream, body)
			for cut := range len(body) + 1 {
				if got := scanChunks(&s, c.src, count, c.stream, body, cut); got != whole {
					t.Fatalf("%s, count %d, cut at %d: %+v, whole %+v", c.name, count, cut, got, whole)
				}
			}
			s.Reset(c.src, count, c.stream)
			for i := range body {
				s.Write(body[i : i+1])
			}
			s.Write(nil)
			n, ok := s.Tokens()
			if got := (result{n, ok, s.Reason()}); got != whole {
				t.Fatalf("%s, count %d, in bytes: %+v, whole %+v", c.name, count, got, whole)
			}
		}
	}
}

// FuzzScanner: arbitrary bytes cut at arbitrary points never panic, read as they do whole, and
// a usage read is within [0, MaxTokens].
func FuzzScanner(f *testing.F) {
	for i, c := range samples() {
		f.Add([]byte(c.body), []byte{byte(i), 1, 7, 0, 3}, mode(c.src, c.stream, counts[i%len(counts)]))
	}
	var s Scanner
	f.Fuzz(func(t *testing.T, body, cuts []byte, m uint8) {
		src, stream, count := Source(1+m&1), m&2 != 0, Count((m>>2)%3)
		whole := scanChunks(&s, src, count, stream, body)
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c)
		}
		if got := scanChunks(&s, src, count, stream, body, sizes...); got != whole {
			t.Fatalf("cut into %v: %+v, whole %+v", sizes, got, whole)
		}
		if whole.ok && (whole.n < 0 || whole.n > MaxTokens || whole.why != "") || !whole.ok && whole.why == "" {
			t.Fatalf("read %+v", whole)
		}
		if !stream {
			checkSyntax(t, body, whole)
		}
	})
}

// checkSyntax holds a JSON body's reading to encoding/json's syntax: valid JSON is never refused
// as malformed or truncated, and invalid JSON never gives a usage unless it nests deeper than
// maxDepth (where only brackets and strings are followed).
func checkSyntax(t *testing.T, body []byte, got result) {
	t.Helper()
	valid := json.Valid(body)
	syntax := got.why == reasonMalformed.String() || got.why == reasonTruncated.String() || got.why == reasonEmpty.String()
	shallow := bytes.Count(body, []byte("["))+bytes.Count(body, []byte("{")) <= maxDepth
	if valid && syntax || !valid && got.ok && shallow {
		t.Fatalf("encoding/json: valid %v; read %+v", valid, got)
	}
}

// mode packs a Scanner's settings into FuzzScanner's byte.
func mode(src Source, stream bool, count Count) uint8 {
	m := uint8(src-1) | uint8(count)<<2
	if stream {
		m |= 2
	}
	return m
}

// FuzzWholeNumber: a number read is the string's digits, within [0, MaxTokens].
func FuzzWholeNumber(f *testing.F) {
	for _, seed := range []string{"0", " 42\t", "9007199254740992", "9007199254740993", "-1", "1.0", "", "0012"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, ok := WholeNumber(in)
		if !ok {
			return
		}
		if n < 0 || n > MaxTokens {
			t.Fatalf("WholeNumber(%q) = %d", in, n)
		}
		digits := trimBlanks(in)
		for len(digits) > 1 && digits[0] == '0' {
			digits = digits[1:]
		}
		if digits != strconv.FormatInt(n, 10) {
			t.Fatalf("WholeNumber(%q) = %d: the digits are %q", in, n, digits)
		}
	})
}

func trimBlanks(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
