package usage

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// The reference: the rules of the package doc, applied to documents decoded by encoding/json.

// refFigures are a usage object's figures by name, as the reference read them.
type refFigures struct {
	object bool // usage was an object
	bad    bool // a figure, or usage itself, is unreadable
	val    map[string]int64
}

// refNames are the figure names of each source; OpenAI's two names of one figure share a slot.
var refNames = map[Source]map[string]string{
	OpenAI: {"prompt_tokens": "in", "input_tokens": "in", "completion_tokens": "out", "output_tokens": "out", "total_tokens": "total"},
	Anthropic: {"input_tokens": "in", "output_tokens": "out", "cache_creation_input_tokens": "create",
		"cache_read_input_tokens": "read"},
}

func refUsage(src Source, v any, present bool) refFigures {
	f := refFigures{val: map[string]int64{}}
	switch v := v.(type) {
	case nil:
		return f
	case map[string]any:
		f.object = true
		for name, slot := range refNames[src] {
			figure, ok := v[name]
			if !ok || figure == nil {
				continue
			}
			number, isNumber := figure.(json.Number)
			n, err := strconv.ParseInt(string(number), 10, 64)
			if !isNumber || err != nil || n < 0 || n > MaxTokens || strings.HasPrefix(string(number), "-") {
				f.bad = true
			}
			f.val[slot] = n
		}
		_, prompt := v["prompt_tokens"]
		_, input := v["input_tokens"]
		_, completion := v["completion_tokens"]
		_, output := v["output_tokens"]
		f.bad = f.bad || src == OpenAI && (prompt && input || completion && output)
		return f
	}
	f.bad = present
	return f
}

// refDocument is what one JSON document reports: ok false when it is not a JSON object or one of
// its usage objects is unreadable.
type refDocument struct {
	ok       bool
	top, msg refFigures
	kind     string
}

func refDecode(src Source, stream bool, text string) refDocument {
	if stream && strings.TrimSpace(text) == "" {
		return refDocument{ok: true} // an event of blank data reports nothing
	}
	var doc map[string]any
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	if !json.Valid([]byte(text)) || d.Decode(&doc) != nil || doc == nil {
		return refDocument{}
	}
	usage, present := doc["usage"]
	r := refDocument{top: refUsage(src, usage, present), msg: refFigures{val: map[string]int64{}}}
	holder := map[Source]string{OpenAI: "response", Anthropic: "message"}[src]
	if message, isObject := doc[holder].(map[string]any); stream && isObject {
		usage, present := message["usage"]
		r.msg = refUsage(src, usage, present)
	}
	r.kind, _ = doc["type"].(string)
	r.ok = !r.top.bad && !r.msg.bad
	return r
}

// refTokens is the Count of the figures the documents reported, or unreadable.
func refTokens(src Source, count Count, stream bool, docs []refDocument) int64 {
	got, has := map[string]int64{}, false
	for _, d := range docs {
		if !d.ok {
			return unreadable
		}
		switch {
		case d.top.object && (src == OpenAI || !stream):
			got, has = d.top.val, true
		case src == OpenAI && d.msg.object:
			got, has = d.msg.val, true
		case src == Anthropic && d.kind == "message_start" && d.msg.object:
			for _, slot := range []string{"in", "create", "read"} {
				if n, ok := d.msg.val[slot]; ok {
					got[slot] = n
				}
			}
			has = true
		case src == Anthropic && d.kind == "message_delta" && d.top.object:
			for slot, n := range d.top.val {
				got[slot] = n
			}
			has = true
		}
	}
	in, inOK := got["in"]
	out, outOK := got["out"]
	if src == Anthropic {
		in += got["create"] + got["read"]
	}
	total, totalOK := got["total"]
	switch {
	case !has:
		return unreadable
	case count == Total && src == OpenAI && totalOK:
		return total
	case count != Output && !inOK, count != Input && !outOK:
		return unreadable
	case count == Input:
		out = 0
	case count == Output:
		in = 0
	}
	if in+out > MaxTokens {
		return unreadable
	}
	return in + out
}

// generator writes random documents: members that count placed among noise.
type generator struct {
	rng    *rand.Rand
	src    Source
	stream bool
	deep   bool // a nesting beyond maxDepth was written (skimmed: its corruption may pass)
	b      strings.Builder
}

func (g *generator) space() {
	g.b.WriteString([...]string{"", "", "", " ", "\n", "\t", "\r\n  "}[g.rng.IntN(7)])
}

// text writes a string: quotes, escapes, brackets, control characters, non-ASCII.
func (g *generator) text() {
	g.b.WriteByte('"')
	for range g.rng.IntN(12) {
		chars := []rune(`ab"\/{}[]:,é😀` + "\x00\n\t")
		r := chars[g.rng.IntN(len(chars))]
		switch {
		case r == '"' || r == '\\':
			g.b.WriteString(`\` + string(r))
		case r < 0x20 || r < 0x10000 && g.rng.IntN(8) == 0:
			g.b.WriteString(`\u` + strconv.FormatInt(0x10000+int64(r), 16)[1:])
		case r == '/' && g.rng.IntN(2) == 0:
			g.b.WriteString(`\/`)
		default:
			g.b.WriteRune(r)
		}
	}
	g.b.WriteByte('"')
}

var noiseNumbers = []string{"0", "-12", "3.25", "1e-7", "-0.5E+3", "123456789012345678901234567890", "7"}

// noise writes any value; depth bounds its nesting.
func (g *generator) noise(depth int) {
	g.space()
	switch k := g.rng.IntN(10); {
	case k < 3 || depth == 0 && k >= 7:
		g.text()
	case k < 5:
		g.b.WriteString(noiseNumbers[g.rng.IntN(len(noiseNumbers))])
	case k < 7:
		g.b.WriteString([...]string{"true", "false", "null"}[g.rng.IntN(3)])
	case k < 8:
		g.array(depth, func() { g.noise(depth - 1) })
	default:
		g.object(depth, nil)
	}
	g.space()
}

func (g *generator) array(depth int, item func()) {
	g.b.WriteByte('[')
	for i := range g.rng.IntN(4) {
		if i > 0 {
			g.b.WriteByte(',')
		}
		item()
	}
	g.space()
	g.b.WriteByte(']')
}

// noiseKeys name noise members, where any key is noise: also keys that count elsewhere.
var noiseKeys = []string{"usage", "id", "choices", "content", "prompt_tokens", "input_tokens", "type", "us\\u0061ge", "x\\\"y", "{"}

// object writes an object of noise members and the members given, in a random order.
func (g *generator) object(depth int, members map[string]func()) {
	type member struct {
		key   string
		value func()
	}
	var all []member
	for key, value := range members {
		all = append(all, member{key, value})
	}
	for range g.rng.IntN(4) {
		key := noiseKeys[g.rng.IntN(len(noiseKeys))]
		if members != nil {
			key = []string{"id", "model", "choices", "created", "details", "service_tier"}[g.rng.IntN(6)] + strconv.Itoa(len(all))
		}
		all = append(all, member{key, func() { g.noise(depth - 1) }})
	}
	g.rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	g.b.WriteByte('{')
	for i, m := range all {
		if i > 0 {
			g.b.WriteByte(',')
		}
		g.space()
		g.b.WriteString(`"` + m.key + `"`)
		g.space()
		g.b.WriteByte(':')
		m.value()
	}
	g.space()
	g.b.WriteByte('}')
}

// figure writes a usage figure: mostly a whole number, sometimes one of every unreadable kind.
func (g *generator) figure() {
	g.space()
	if g.rng.IntN(25) > 0 {
		g.b.WriteString(strconv.FormatInt([]int64{0, 1, 17, 4096, 99999, 123456, MaxTokens / 3, MaxTokens}[g.rng.IntN(8)], 10))
	} else {
		g.b.WriteString([]string{"null", "-3", "2.5", "1e3", `"12"`, "true", "9007199254740993", "[]", "{}", "-0"}[g.rng.IntN(10)])
	}
	g.space()
}

// usage writes a usage member's value: mostly an object of some figures among noise. Each figure
// has two names (OpenAI's chat completions and Responses API): mostly one of them is written.
func (g *generator) usage() {
	switch g.rng.IntN(40) {
	case 0, 1, 2, 3:
		g.space()
		g.b.WriteString("null")
		return
	case 4:
		g.noise(1)
		return
	}
	members := map[string]func(){}
	for _, names := range [][]string{{"prompt_tokens", "input_tokens"}, {"completion_tokens", "output_tokens"}} {
		switch k := g.rng.IntN(10); {
		case k < 8:
			members[names[k%2]] = g.figure
		case k == 8:
			members[names[0]], members[names[1]] = g.figure, g.figure
		}
	}
	for _, name := range []string{"total_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "prompt_tokens_details", "server_tool_use"} {
		if g.rng.IntN(2) == 0 {
			members[name] = g.figure
		}
	}
	g.space()
	g.object(2, members)
	g.space()
}

// document writes one JSON object with, at random, a usage, a type, a message or response holding
// a usage, and noise (deep at times).
func (g *generator) document() {
	members := map[string]func(){}
	if g.rng.IntN(4) > 0 {
		members["usage"] = g.usage
	}
	if g.rng.IntN(4) > 0 {
		members["type"] = func() {
			g.b.WriteString(`"` + []string{"message_start", "message_delta", "message_start", "message_delta", "ping", "message"}[g.rng.IntN(6)] + `"`)
		}
	}
	for _, holder := range []string{"message", "response"} {
		if g.rng.IntN(2) == 0 {
			members[holder] = func() { g.object(3, map[string]func(){"usage": g.usage}) }
		}
	}
	if g.rng.IntN(8) == 0 {
		g.deep = true
		depth := maxDepth + g.rng.IntN(2*maxDepth)
		members["choices"] = func() {
			g.b.WriteString(strings.Repeat(`[{"usage":`, depth) + "1" + strings.Repeat("}]", depth))
		}
	}
	g.space()
	g.object(4, members)
	g.space()
}

// corrupt cuts text short or changes one of its bytes, at times.
func (g *generator) corrupt(text string) string {
	if g.deep || len(text) == 0 || g.rng.IntN(6) > 0 {
		return text
	}
	i := g.rng.IntN(len(text))
	if g.rng.IntN(2) == 0 {
		return text[:i]
	}
	return text[:i] + string(`{}[]":,0a \`[g.rng.IntN(11)]) + text[i+1:]
}

// Random documents read as encoding/json and the package doc's rules read them: JSON bodies, and
// event streams of several documents.
func TestReadsAsTheReference(t *testing.T) {
	for seed := range uint64(3000) {
		g := &generator{rng: rand.New(rand.NewPCG(seed, 7)), src: Source(1 + seed%2), stream: seed%4 >= 2}
		var body strings.Builder
		var docs []refDocument
		events := 1
		if g.stream {
			events += g.rng.IntN(4)
		}
		for range events {
			g.b.Reset()
			g.deep = false
			g.document()
			text := g.corrupt(g.b.String())
			docs = append(docs, refDecode(g.src, g.stream, text))
			if g.stream {
				g.event(&body, text)
			} else {
				body.WriteString(text)
			}
		}
		for _, count := range counts {
			want := refTokens(g.src, count, g.stream, docs)
			n, ok, why := scan(g.src, count, g.stream, []byte(body.String()))
			if want == unreadable && ok || want != unreadable && (!ok || n != want) {
				t.Fatalf("seed %d, source %d, count %d, stream %v: got %d, %v (%s), want %d\n%s",
					seed, g.src, count, g.stream, n, ok, why, want, body.String())
			}
		}
	}
}

// event writes text as an event: a data line per line of it, among comments and other fields,
// with lines ending in \n, \r\n or \r.
func (g *generator) event(body *strings.Builder, text string) {
	end := []string{"\n", "\r\n", "\r"}[g.rng.IntN(3)]
	if g.rng.IntN(3) == 0 {
		body.WriteString(": keep-alive" + end + "event: x" + end)
	}
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	for _, line := range strings.Split(text, "\n") {
		body.WriteString("data: " + line + end)
	}
	body.WriteString(end)
}
