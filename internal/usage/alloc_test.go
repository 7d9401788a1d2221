package usage

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The module links the package, so it stays lean (docs/development.md): it imports nothing (no
// encoding/json, fmt or reflection) and declares no map.
func TestLinksNothingIntoTheModule(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range file.Imports {
			t.Errorf("%s imports %s", name, spec.Path.Value)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if _, isMap := n.(*ast.MapType); isMap {
				t.Errorf("%s: a map at %s", name, fset.Position(n.Pos()))
			}
			return true
		})
	}
}

// Scanning allocates nothing: not per chunk, not per response with a reused Scanner.
func TestScanningAllocatesNothing(t *testing.T) {
	var s Scanner
	for _, c := range samples() {
		body := []byte(c.body)
		allocs := testing.AllocsPerRun(20, func() {
			s.Reset(c.src, Total, c.stream)
			for i := 0; i < len(body); i += 5 {
				s.Write(body[i:min(i+5, len(body))])
			}
			s.Tokens()
			_ = s.Reason()
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations", c.name, allocs)
		}
	}
}

// hugeChunk is 64 KiB of string content: text, escapes, quotes and brackets that are not JSON's
// (64 bytes, repeated).
var hugeChunk = bytes.Repeat([]byte(`{ipsum} [dolor] \"usage\": {\"prompt_tokens\": 1}, \\ \u00e9 \n `), 1024)

// hugeChunks is how many hugeChunks make 100 MB.
const hugeChunks = 100_000_000/(64<<10) + 1

// A 100 MB string, key, event or nesting passes through the fixed-size Scanner: every Write of
// its chunks allocates nothing, and the usage after it is read (or the truncation is seen).
func TestHugeInputsPassInBoundedMemory(t *testing.T) {
	chunks := hugeChunks
	if testing.Short() {
		chunks = 16 // 1 MB: -short runs under the race detector, 40 times slower
	}
	usageEvent := "\n\ndata: " + openAIUsage + "\n\n"
	for _, c := range []struct {
		name        string
		stream      bool
		head, tail  string
		chunk       []byte
		wantN       int64
		wantOK      bool
		wantReasons string
	}{
		{"string in a JSON body", false, `{"choices":[{"message":{"content":"`, `"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`, hugeChunk, 7, true, ""},
		{"key in the usage object", false, `{"usage":{"prompt_tokens":3,"`, `":0,"completion_tokens":4}}`, hugeChunk, 7, true, ""},
		{"string in an event", true, `data: {"choices":[{"delta":{"content":"`, `"}}]}` + usageEvent, hugeChunk, 7, true, ""},
		{"event of data lines", true, `data: {"choices":[`, `0]}` + usageEvent, bytes.Repeat([]byte("\ndata: 1,"), 8<<10), 7, true, ""},
		{"comment", true, `: `, usageEvent, hugeChunk, 7, true, ""},
		{"nesting", false, `{"x":`, ``, bytes.Repeat([]byte(`[{"a":`), 64<<10/6), 0, false, "ended inside"},
		{"truncated string", false, `{"usage":{"prompt_tokens":3,"completion_tokens":4},"x":"`, ``, hugeChunk, 0, false, "ended inside"},
	} {
		var s Scanner
		s.Reset(OpenAI, Total, c.stream)
		s.Write([]byte(c.head))
		if allocs := testing.AllocsPerRun(chunks, func() { s.Write(c.chunk) }); allocs != 0 {
			t.Errorf("%s: %.1f allocations per chunk", c.name, allocs)
		}
		s.Write([]byte(c.tail))
		if n, ok := s.Tokens(); n != c.wantN || ok != c.wantOK || !strings.Contains(s.Reason(), c.wantReasons) {
			t.Errorf("%s: got %d, %v (%s), want %d, %v (%s)", c.name, n, ok, s.Reason(), c.wantN, c.wantOK, c.wantReasons)
		}
	}
}

// A nesting far deeper than maxDepth is counted down again, and the usage after it is read.
func TestDeepNestingIsCounted(t *testing.T) {
	const depth = 1 << 20
	var s Scanner
	s.Reset(Anthropic, Total, false)
	s.Write([]byte(`{"x":`))
	s.Write(bytes.Repeat([]byte(`[{"usage":"]",`+"\n"+`"y":`), depth))
	s.Write([]byte(`0`))
	s.Write(bytes.Repeat([]byte(`}]`), depth))
	s.Write([]byte(`,"usage":{"input_tokens":5,"output_tokens":6}}`))
	if n, ok := s.Tokens(); !ok || n != 11 {
		t.Fatalf("got %d, %v (%s), want 11", n, ok, s.Reason())
	}
}

// benchmarkStream is a 64 KiB chat completion stream: content chunks, then the usage chunk.
func benchmarkStream() []byte {
	var b bytes.Buffer
	for b.Len() < 64<<10 {
		b.WriteString("data: " + chunkHead + `"choices":[{"index":0,"delta":{"content":" a token or two, \"quoted\""},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	}
	b.WriteString("data: " + chunkHead + `"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1200,"total_tokens":1209}}` + "\n\ndata: [DONE]\n\n")
	return b.Bytes()
}

// benchmarkJSON is a 64 KiB chat completion: one long message, then its usage.
func benchmarkJSON() []byte {
	content := strings.Repeat(`Lorem ipsum dolor sit amet, {consectetur} [adipiscing] \"elit\"\n`, 1000)
	return []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		content + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1200,"total_tokens":1209}}`)
}

func benchmarkScan(b *testing.B, body []byte, stream bool) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var s Scanner
	for b.Loop() {
		s.Reset(OpenAI, Total, stream)
		for i := 0; i < len(body); i += 16 << 10 {
			s.Write(body[i:min(i+16<<10, len(body))])
		}
		if n, ok := s.Tokens(); !ok || n != 1209 {
			b.Fatalf("got %d, %v (%s)", n, ok, s.Reason())
		}
	}
}

// BenchmarkScanEventStream: a 64 KiB event stream in 16 KiB chunks.
func BenchmarkScanEventStream(b *testing.B) {
	benchmarkScan(b, benchmarkStream(), true)
}

// BenchmarkScanJSON: a 64 KiB JSON body in 16 KiB chunks.
func BenchmarkScanJSON(b *testing.B) {
	benchmarkScan(b, benchmarkJSON(), false)
}
