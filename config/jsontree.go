package config

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/tollgate-proxy/tollgate/internal/netaddr"
)

// jsonKind is the JSON type of a decoded value.
type jsonKind uint8

const (
	kindNull jsonKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// jsonValue is a decoded JSON value that, unlike map[string]any, keeps
// object members in document order, remembers repeated member names and
// keeps numbers as their literal text so that 3, 3.0 and 3e0 can be
// judged exactly rather than through a float64.
type jsonValue struct {
	kind    jsonKind
	boolean bool
	text    string // kindString: the string; kindNumber: the literal as written
	items   []*jsonValue
	members []jsonMember
	// repeated lists member names that appeared more than once, once each,
	// in order of their second appearance; only the first value is kept.
	repeated []string
}

type jsonMember struct {
	name  string
	value *jsonValue
}

// member returns the value of the named member, or nil if absent.
func (v *jsonValue) member(name string) *jsonValue {
	for i := range v.members {
		if v.members[i].name == name {
			return v.members[i].value
		}
	}
	return nil
}

// maxJSONDepth bounds nesting so that hostile input cannot make the
// recursive decoder use unbounded stack. The schema itself nests at most 7
// levels (document, rules, rule, missing_key, key, key part, attribute).
const maxJSONDepth = 32

// decodeDocument decodes data into a jsonValue tree. On failure it returns
// a single document-level Problem: when the syntax is broken nothing after
// that point can be trusted, so there is nothing more to report.
//
// The decoder is this package's own strict RFC 8259 parser rather than
// encoding/json: the configuration is parsed inside the Wasm module too, and
// encoding/json (reflection, fmt, os) made up half of the module's size. It
// follows encoding/json where the difference would show: the same error
// wording ("invalid character 'x' looking for beginning of value"), invalid
// UTF-8 and lone surrogates in strings decoded as U+FFFD, numbers kept as
// their literal text.
func decodeDocument(data []byte) (*jsonValue, *Problem) {
	if isJSONSpaceOnly(data) {
		return nil, &Problem{Message: "the configuration is empty: provide a JSON object such as " + minimalExample}
	}
	p := &jsonParser{data: data}
	root, err := p.value(1)
	if err != nil {
		return nil, err.problem(data)
	}
	// A configuration is exactly one JSON value.
	p.skipSpace()
	if p.pos < len(data) {
		return nil, &Problem{Message: "unexpected data after the end of the JSON document at " + position(data, p.pos) +
			": the configuration is a single JSON object; remove everything after its closing }"}
	}
	return root, nil
}

// jsonError is why decoding stopped, and where.
type jsonError struct {
	kind   jsonErrorKind
	offset int
	msg    string // kindSyntax: encoding/json's wording
}

type jsonErrorKind uint8

const (
	errSyntax jsonErrorKind = iota
	errEnd                  // the input ends inside a value
	errDepth                // nesting beyond maxJSONDepth
)

func (e *jsonError) problem(data []byte) *Problem {
	switch e.kind {
	case errEnd:
		return &Problem{Message: "the JSON ends early at " + position(data, len(data)) +
			": close every open string, [ and {"}
	case errDepth:
		return &Problem{Message: "the JSON nests deeper than " + strconv.Itoa(maxJSONDepth) + " levels at " +
			position(data, e.offset) + ": a configuration nests at most 7 levels; remove the extra [ and {"}
	}
	return &Problem{Message: "invalid JSON at " + position(data, e.offset) + ": " + e.msg +
		" (look for a missing or extra comma, quote or bracket at or just before that point)"}
}

// jsonParser is a recursive-descent parser over the whole input.
type jsonParser struct {
	data []byte
	pos  int
	// buf is reused to unescape strings.
	buf []byte
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) && isJSONSpace(p.data[p.pos]) {
		p.pos++
	}
}

// skipSpaceAnd skips space and then c, and reports whether c was there; if it was not, p.pos is
// at the byte an error names.
func (p *jsonParser) skipSpaceAnd(c byte) bool {
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

// unexpected is the error for the byte at p.pos (or the end of the input) in a context
// described as encoding/json does ("looking for beginning of value", "after array element").
func (p *jsonParser) unexpected(context string) *jsonError {
	if p.pos >= len(p.data) {
		return &jsonError{kind: errEnd, offset: len(p.data)}
	}
	return &jsonError{kind: errSyntax, offset: p.pos, msg: "invalid character " + quoteChar(p.data[p.pos]) + " " + context}
}

// quoteChar formats a byte as encoding/json does in its syntax errors.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

// value parses one value at the given nesting level (the document is level 1).
func (p *jsonParser) value(depth int) (*jsonValue, *jsonError) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return nil, &jsonError{kind: errEnd, offset: len(p.data)}
	}
	switch c := p.data[p.pos]; {
	case c == '{' || c == '[':
		p.pos++
		if depth > maxJSONDepth {
			return nil, &jsonError{kind: errDepth, offset: p.pos}
		}
		if c == '[' {
			return p.array(depth)
		}
		return p.object(depth)
	case c == '"':
		text, err := p.string()
		if err != nil {
			return nil, err
		}
		return &jsonValue{kind: kindString, text: text}, nil
	case c == '-' || '0' <= c && c <= '9':
		text, err := p.number()
		if err != nil {
			return nil, err
		}
		return &jsonValue{kind: kindNumber, text: text}, nil
	case c == 't':
		return &jsonValue{kind: kindBool, boolean: true}, p.literal("true")
	case c == 'f':
		return &jsonValue{kind: kindBool}, p.literal("false")
	case c == 'n':
		return &jsonValue{kind: kindNull}, p.literal("null")
	}
	return nil, p.unexpected("looking for beginning of value")
}

func (p *jsonParser) literal(word string) *jsonError {
	for i := 0; i < len(word); i++ {
		if p.pos >= len(p.data) {
			return &jsonError{kind: errEnd, offset: len(p.data)}
		}
		if p.data[p.pos] != word[i] {
			return p.unexpected("in literal " + word + " (expecting " + quoteChar(word[i]) + ")")
		}
		p.pos++
	}
	return nil
}

// number reads a number and returns its literal text.
func (p *jsonParser) number() (string, *jsonError) {
	start := p.pos
	digits := func() *jsonError {
		if p.pos >= len(p.data) {
			return &jsonError{kind: errEnd, offset: len(p.data)}
		}
		if c := p.data[p.pos]; c < '0' || c > '9' {
			return p.unexpected("in numeric literal")
		}
		for p.pos < len(p.data) && '0' <= p.data[p.pos] && p.data[p.pos] <= '9' {
			p.pos++
		}
		return nil
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.data) && p.data[p.pos] == '0' {
		p.pos++
	} else if err := digits(); err != nil {
		return "", err
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if err := digits(); err != nil {
			return "", err
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if err := digits(); err != nil {
			return "", err
		}
	}
	return string(p.data[start:p.pos]), nil
}

// string reads a string starting at its opening quote and returns it decoded.
func (p *jsonParser) string() (string, *jsonError) {
	p.pos++ // the opening quote
	start := p.pos
	plain := true // no escape and valid UTF-8: the bytes are the string
	for {
		if p.pos >= len(p.data) {
			return "", &jsonError{kind: errEnd, offset: len(p.data)}
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			raw := p.data[start:p.pos]
			p.pos++
			if plain && utf8.Valid(raw) {
				return string(raw), nil
			}
			return p.unescape(raw), nil
		case c == '\\':
			plain = false
			p.pos++
			if p.pos >= len(p.data) {
				return "", &jsonError{kind: errEnd, offset: len(p.data)}
			}
			switch p.data[p.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.pos++
			case 'u':
				p.pos++
				for i := 0; i < 4; i++ {
					if p.pos >= len(p.data) {
						return "", &jsonError{kind: errEnd, offset: len(p.data)}
					}
					if _, ok := netaddr.HexValue(p.data[p.pos]); !ok {
						return "", p.unexpected("in \\u hexadecimal character escape")
					}
					p.pos++
				}
			default:
				return "", p.unexpected("in string escape code")
			}
		case c < 0x20:
			return "", p.unexpected("in string literal")
		default:
			p.pos++
		}
	}
}

// unescape decodes the body of a string already checked by string: escapes resolved, surrogate
// pairs joined, and invalid UTF-8 and lone surrogates replaced by U+FFFD, as encoding/json does.
func (p *jsonParser) unescape(raw []byte) string {
	b := p.buf[:0]
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			switch raw[i+1] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(raw[i+2:])
				i += 6
				if 0xD800 <= r && r < 0xE000 {
					r2 := rune(-1)
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2 = hex4(raw[i+2:])
					}
					if r < 0xDC00 && 0xDC00 <= r2 && r2 < 0xE000 {
						r = (r-0xD800)<<10 | (r2 - 0xDC00) + 0x10000
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
				continue
			default: // '"', '\\', '/'
				b = append(b, raw[i+1])
			}
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, raw[i:i+size]...)
			}
			i += size
		}
	}
	p.buf = b
	return string(b)
}

// hex4 decodes four hex digits already checked by string.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		d, _ := netaddr.HexValue(c)
		r = r<<4 | rune(d)
	}
	return r
}

func (p *jsonParser) array(depth int) (*jsonValue, *jsonError) {
	array := &jsonValue{kind: kindArray}
	if p.skipSpaceAnd(']') {
		return array, nil
	}
	for {
		item, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		array.items = append(array.items, item)
		if closed, err := p.afterItem(']', "after array element"); closed || err != nil {
			return array, err
		}
	}
}

// afterItem reads what follows an array's element or an object's member: a comma, when another
// follows (false), or the closing bracket or brace (true); anything else is an error described
// by context.
func (p *jsonParser) afterItem(closing byte, context string) (closed bool, err *jsonError) {
	if p.skipSpaceAnd(',') {
		return false, nil
	}
	if p.skipSpaceAnd(closing) {
		return true, nil
	}
	return false, p.unexpected(context)
}

func (p *jsonParser) object(depth int) (*jsonValue, *jsonError) {
	object := &jsonValue{kind: kindObject}
	if p.skipSpaceAnd('}') {
		return object, nil
	}
	// Appearances per name; a scan of members would be quadratic on hostile input.
	seen := make(map[string]int)
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.unexpected("looking for beginning of object key string")
		}
		name, err := p.string()
		if err != nil {
			return nil, err
		}
		if !p.skipSpaceAnd(':') {
			return nil, p.unexpected("after object key")
		}
		value, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		seen[name]++
		switch seen[name] {
		case 1:
			object.members = append(object.members, jsonMember{name: name, value: value})
		case 2:
			object.repeated = append(object.repeated, name)
		}
		if closed, err := p.afterItem('}', "after object key:value pair"); closed || err != nil {
			return object, err
		}
	}
}

// position describes a byte offset as line, column and offset, all of
// which editors and jq understand.
func position(data []byte, offset int) string {
	if offset < 0 {
		offset = 0
	}
	if offset > len(data) {
		offset = len(data)
	}
	line := 1
	for _, c := range data[:offset] {
		if c == '\n' {
			line++
		}
	}
	column := offset - bytes.LastIndexByte(data[:offset], '\n')
	return "line " + strconv.Itoa(line) + ", column " + strconv.Itoa(column) +
		" (byte offset " + strconv.Itoa(offset) + ")"
}

// isJSONSpace reports the four whitespace bytes JSON allows between tokens.
func isJSONSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r'
}

func isJSONSpaceOnly(data []byte) bool {
	for _, b := range data {
		if !isJSONSpace(b) {
			return false
		}
	}
	return true
}
