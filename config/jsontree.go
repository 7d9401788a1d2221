package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
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

// errTooDeep is returned by readJSONValue when nesting exceeds maxJSONDepth.
var errTooDeep = errors.New("nesting too deep")

// decodeDocument decodes data into a jsonValue tree. On failure it returns
// a single document-level Problem: when the syntax is broken nothing after
// that point can be trusted, so there is nothing more to report.
func decodeDocument(data []byte) (*jsonValue, *Problem) {
	if isJSONSpaceOnly(data) {
		return nil, &Problem{Message: "the configuration is empty: provide a JSON object such as " + minimalExample}
	}
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	root, err := readJSONValue(decoder, 1)
	if err != nil {
		return nil, syntaxProblem(data, decoder, err)
	}
	// json.Decoder reads a stream of values; a configuration is exactly one.
	end := int(decoder.InputOffset())
	for end < len(data) && isJSONSpace(data[end]) {
		end++
	}
	if end < len(data) {
		return nil, &Problem{Message: "unexpected data after the end of the JSON document at " + position(data, end) +
			": the configuration is a single JSON object; remove everything after its closing }"}
	}
	return root, nil
}

// readJSONValue reads one complete value; depth is the nesting level of
// the value being read (the document is level 1).
func readJSONValue(decoder *json.Decoder, depth int) (*jsonValue, error) {
	token, err := decoder.Token()
	if err != nil {
		return nil, err
	}
	switch token := token.(type) {
	case nil:
		return &jsonValue{kind: kindNull}, nil
	case bool:
		return &jsonValue{kind: kindBool, boolean: token}, nil
	case json.Number:
		return &jsonValue{kind: kindNumber, text: string(token)}, nil
	case string:
		return &jsonValue{kind: kindString, text: token}, nil
	case json.Delim:
		if depth > maxJSONDepth {
			return nil, errTooDeep
		}
		if token == '[' {
			return readJSONArray(decoder, depth)
		}
		if token == '{' {
			return readJSONObject(decoder, depth)
		}
	}
	// Token never yields anything else at a value position; this guards
	// against a decoder change rather than handling real input.
	return nil, errors.New("unexpected JSON token")
}

func readJSONArray(decoder *json.Decoder, depth int) (*jsonValue, error) {
	array := &jsonValue{kind: kindArray}
	for decoder.More() {
		item, err := readJSONValue(decoder, depth+1)
		if err != nil {
			return nil, err
		}
		array.items = append(array.items, item)
	}
	return array, readClosingDelim(decoder)
}

func readJSONObject(decoder *json.Decoder, depth int) (*jsonValue, error) {
	object := &jsonValue{kind: kindObject}
	// Appearances per name; a scan of members would be quadratic on hostile input.
	seen := make(map[string]int)
	for decoder.More() {
		token, err := decoder.Token()
		if err != nil {
			return nil, err
		}
		name, ok := token.(string)
		if !ok {
			return nil, errors.New("object member name is not a string")
		}
		value, err := readJSONValue(decoder, depth+1)
		if err != nil {
			return nil, err
		}
		seen[name]++
		if seen[name] > 1 {
			if seen[name] == 2 {
				object.repeated = append(object.repeated, name)
			}
			continue
		}
		object.members = append(object.members, jsonMember{name: name, value: value})
	}
	return object, readClosingDelim(decoder)
}

// readClosingDelim consumes the ] or } that ends the current container.
// More reports false both at the delimiter and at end of input, so a
// truncated document surfaces here as an error from Token.
func readClosingDelim(decoder *json.Decoder) error {
	token, err := decoder.Token()
	if err != nil {
		return err
	}
	if delim, ok := token.(json.Delim); !ok || (delim != ']' && delim != '}') {
		return errors.New("expected the end of an array or object")
	}
	return nil
}

// syntaxProblem turns a decoding error into a Problem that points at the
// place in the input where decoding stopped.
func syntaxProblem(data []byte, decoder *json.Decoder, err error) *Problem {
	var syntaxErr *json.SyntaxError
	isSyntaxErr := errors.As(err, &syntaxErr)
	switch {
	// The decoder reports a truncated document as io.EOF or
	// io.ErrUnexpectedEOF, or (when built on encoding/json/v2) as a
	// syntax error at the end of the input.
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		isSyntaxErr && syntaxErr.Offset >= int64(len(data)):
		return &Problem{Message: "the JSON ends early at " + position(data, len(data)) +
			": close every open string, [ and {"}
	case errors.Is(err, errTooDeep):
		return &Problem{Message: "the JSON nests deeper than " + strconv.Itoa(maxJSONDepth) + " levels at " +
			position(data, int(decoder.InputOffset())) +
			": a configuration nests at most 7 levels; remove the extra [ and {"}
	case isSyntaxErr:
		// For an error inside a value, encoding/json's Offset can lag behind
		// the offending byte, so take the later of the two offsets and step
		// over whitespace to land on the byte itself.
		offset := max(int(syntaxErr.Offset), int(decoder.InputOffset()))
		for offset < len(data) && isJSONSpace(data[offset]) {
			offset++
		}
		return &Problem{Message: "invalid JSON at " + position(data, offset) + ": " + syntaxErr.Error() +
			" (look for a missing or extra comma, quote or bracket at or just before that point)"}
	default:
		return &Problem{Message: "invalid JSON at " + position(data, int(decoder.InputOffset())) + ": " + err.Error()}
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
	line := 1 + bytes.Count(data[:offset], []byte{'\n'})
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
