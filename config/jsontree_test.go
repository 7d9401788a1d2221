package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeMatchesEncodingJSON checks the package's own JSON parser against encoding/json, which
// it replaced (to keep reflection and fmt out of the Wasm module): on every input both accept or
// both refuse; accepted documents give the same tree (members in order, repeated names, numbers as
// written, strings decoded the same, invalid UTF-8 included); refusals are of the same kind (the
// input ends early, nests too deep, or has an invalid character, the same one).
func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"rules": [{"name": "a", "limits": [{"capacity": 3e0}]}]}`,
		`{"a": 1, "a": 2, "b": [true, false, null, -0.5e+3, "x\u00e9\ud83d\ude00\\\"\/\b\f\n\r\t"]}`,
		`{"bad": "\ud800 lone \udc00 \ud800\u0041"}`, "{\"raw\": \"\xff\xfe valid \xc3\xa9\"}",
		"{\n  \"rules\": [}\n}", `{"rules": [1, x]}`, `{"rules": [{"na`, `{"a": tru}`, `{"a": 01}`,
		`{"a": -}`, `{"a": 1.}`, `{"a": 1e}`, `{"a" 1}`, `{"a": 1 "b": 2}`, `[1 2]`, `{,}`, `[1,]`,
		`{"a":1,}`, `"\x"`, "\"\x01\"", `"\u12g4"`, `{"rules": []} {}`, "{}\n x",
		strings.Repeat("[", 40) + strings.Repeat("]", 40), `123`, `"s"`, ``, ` `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if isJSONSpaceOnly(data) {
			return
		}
		got, gotProblem := decodeDocument(data)
		want, wantKind, wantChar := referenceDecode(data)
		switch {
		case wantKind == "" && gotProblem != nil:
			t.Fatalf("encoding/json accepts %q, the parser refuses it: %s", data, gotProblem.Message)
		case wantKind != "" && gotProblem == nil:
			t.Fatalf("encoding/json refuses %q (%s), the parser accepts it", data, wantKind)
		case wantKind == "":
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("trees differ for %q:\n got  %s\n want %s", data, dump(got), dump(want))
			}
		default:
			if !strings.Contains(gotProblem.Message, wantKind) || !strings.Contains(gotProblem.Message, wantChar) {
				t.Fatalf("for %q the parser says %q; encoding/json's kind of error is %q %s", data, gotProblem.Message, wantKind, wantChar)
			}
		}
	})
}

// referenceDecode is the decoder this package used before, on encoding/json's tokens. It returns
// the tree, or the kind of refusal as the parser words it and, for an invalid character, the
// character as encoding/json quotes it.
func referenceDecode(data []byte) (*jsonValue, string, string) {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	root, err := referenceValue(decoder, 1)
	if err == nil {
		end := int(decoder.InputOffset())
		for end < len(data) && isJSONSpace(data[end]) {
			end++
		}
		if end < len(data) {
			return nil, "unexpected data after the end", ""
		}
		return root, "", ""
	}
	var syntaxErr *json.SyntaxError
	isSyntax := errors.As(err, &syntaxErr)
	// The old decoder called an invalid last byte "ends early" (encoding/json's offset is then
	// the input's length); the parser names the character, so invalid characters come first.
	switch {
	case errors.Is(err, errReferenceTooDeep):
		return nil, "nests deeper", ""
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		isSyntax && syntaxErr.Offset >= int64(len(data)) && !strings.HasPrefix(syntaxErr.Error(), "invalid character "):
		return nil, "ends early", ""
	case isSyntax && strings.HasPrefix(syntaxErr.Error(), "invalid character "):
		msg := strings.TrimPrefix(syntaxErr.Error(), "invalid character ")
		// after top-level value: the parser reports the rest as data after the document
		if strings.HasSuffix(msg, "after top-level value") {
			return nil, "unexpected data after the end", ""
		}
		return nil, "invalid JSON", msg[:strings.LastIndex(msg, "'")+1]
	}
	return nil, "invalid JSON", ""
}

var errReferenceTooDeep = errors.New("too deep")

func referenceValue(decoder *json.Decoder, depth int) (*jsonValue, error) {
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
			return nil, errReferenceTooDeep
		}
		v := &jsonValue{kind: kindArray}
		if token == '{' {
			v.kind = kindObject
		}
		seen := map[string]int{}
		for decoder.More() {
			var name string
			if v.kind == kindObject {
				t, err := decoder.Token()
				if err != nil {
					return nil, err
				}
				name, _ = t.(string)
			}
			item, err := referenceValue(decoder, depth+1)
			if err != nil {
				return nil, err
			}
			if v.kind == kindArray {
				v.items = append(v.items, item)
				continue
			}
			seen[name]++
			switch seen[name] {
			case 1:
				v.members = append(v.members, jsonMember{name: name, value: item})
			case 2:
				v.repeated = append(v.repeated, name)
			}
		}
		if _, err := decoder.Token(); err != nil {
			return nil, err
		}
		return v, nil
	}
	return nil, errors.New("unexpected token")
}

func dump(v *jsonValue) string {
	b, _ := json.Marshal(toAny(v))
	return string(b)
}

func toAny(v *jsonValue) any {
	if v == nil {
		return nil
	}
	switch v.kind {
	case kindArray:
		out := []any{}
		for _, item := range v.items {
			out = append(out, toAny(item))
		}
		return out
	case kindObject:
		out := [][2]any{}
		for _, m := range v.members {
			out = append(out, [2]any{m.name, toAny(m.value)})
		}
		return map[string]any{"members": out, "repeated": v.repeated}
	case kindString, kindNumber:
		return v.text
	case kindBool:
		return v.boolean
	}
	return nil
}
