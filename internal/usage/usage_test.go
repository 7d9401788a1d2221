package usage

import (
	"strings"
	"testing"
)

// unreadable in a want table: Tokens must report ok false.
const unreadable = -1

var counts = [...]Count{Total, Input, Output}

// scan reads body in the given chunks and returns what Tokens and Reason report.
func scan(src Source, count Count, stream bool, chunks ...[]byte) (int64, bool, string) {
	var s Scanner
	s.Reset(src, count, stream)
	for _, chunk := range chunks {
		s.Write(chunk)
	}
	n, ok := s.Tokens()
	return n, ok, s.Reason()
}

// sse builds an event stream from its lines, each ending with \n.
func sse(lines ...string) string {
	return strings.Join(lines, "\n") + "\n"
}

type bodyCase struct {
	name   string
	src    Source
	stream bool
	body   string
	want   [3]int64 // Total, Input, Output; unreadable when ok must be false
}

// checkCounts checks a body against its figure for each Count.
func checkCounts(t *testing.T, c bodyCase) {
	t.Helper()
	for i, count := range counts {
		n, ok, why := scan(c.src, count, c.stream, []byte(c.body))
		switch want := c.want[i]; {
		case want == unreadable && ok:
			t.Errorf("%s, count %d: read %d, want unreadable", c.name, count, n)
		case want != unreadable && (!ok || n != want):
			t.Errorf("%s, count %d: got %d, %v (%s), want %d", c.name, count, n, ok, why, want)
		case !ok && why == "":
			t.Errorf("%s, count %d: unreadable without a reason", c.name, count)
		}
	}
}

const openAIChat = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,` +
	`"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant",` +
	`"content":"The \"usage\": {\"prompt_tokens\": 1} is a {string}\\","refusal":null,"annotations":[]},` +
	`"logprobs":null,"finish_reason":"stop","usage":{"prompt_tokens":999999}}],` +
	`"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,` +
	`"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},` +
	`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},` +
	`"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}`

const openAIResponse = `{"id":"resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41","object":"response",` +
	`"created_at":1741476777,"status":"completed","error":null,"model":"gpt-4o-2024-08-06",` +
	`"output":[{"type":"message","id":"msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41","status":"completed",` +
	`"role":"assistant","content":[{"type":"output_text","text":"In a peaceful grove...","annotations":[]}]}],` +
	`"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":0},"output_tokens":52,` +
	`"output_tokens_details":{"reasoning_tokens":0},"total_tokens":380},"user":null,"metadata":{}}`

const chunkHead = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb",`

var openAIStream = sse(
	`data: `+chunkHead+`"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: `+chunkHead+`"choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: `+chunkHead+`"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
	``,
	`data: `+chunkHead+`"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,`+
		`"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
	``,
	`data: [DONE]`,
	``)

var openAIResponsesStream = sse(
	`event: response.created`,
	`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}`,
	``,
	`event: response.output_text.delta`,
	`data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","sequence_number":4}`,
	``,
	`event: response.completed`,
	`data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed",`+
		`"output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}],`+
		`"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}}`,
	``)

const anthropicMessage = `{"id":"msg_013Zva2CMHLNnXjNJJKqJ2EF","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
	`"content":[{"type":"text","text":"Hi! My name is Claude."}],"stop_reason":"end_turn","stop_sequence":null,` +
	`"usage":{"input_tokens":2095,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,` +
	`"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":503,"service_tier":"standard"}}`

var anthropicStream = sse(
	`event: message_start`,
	`data: {"type":"message_start","message":{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY","type":"message","role":"assistant",`+
		`"content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,`+
		`"usage":{"input_tokens":25,"cache_creation_input_tokens":40,"cache_read_input_tokens":100,"output_tokens":1}}}`,
	``,
	`event: content_block_start`,
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	``,
	`event: ping`,
	`data: {"type": "ping"}`,
	``,
	`event: content_block_delta`,
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, \"usage\""}}`,
	``,
	`event: content_block_stop`,
	`data: {"type":"content_block_stop","index":0}`,
	``,
	`event: message_delta`,
	`data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`,
	``,
	`event: message_delta`,
	`data: {"usage":{"output_tokens":15},"delta":{"stop_reason":"end_turn","stop_sequence":null},"type":"message_delta"}`,
	``,
	`event: message_stop`,
	`data: {"type":"message_stop"}`,
	``)

// realBodies are responses as the APIs send them.
var realBodies = []bodyCase{
	{"openai chat completion", OpenAI, false, openAIChat, [3]int64{1163, 1117, 46}},
	{"openai responses", OpenAI, false, openAIResponse, [3]int64{380, 328, 52}},
	{"openai chat stream with include_usage", OpenAI, true, openAIStream, [3]int64{21, 9, 12}},
	{"openai responses stream", OpenAI, true, openAIResponsesStream, [3]int64{48, 37, 11}},
	{"anthropic message", Anthropic, false, anthropicMessage, [3]int64{4398, 3895, 503}},
	{"anthropic stream", Anthropic, true, anthropicStream, [3]int64{180, 165, 15}},
	{"anthropic stream, crlf", Anthropic, true, strings.ReplaceAll(anthropicStream, "\n", "\r\n"), [3]int64{180, 165, 15}},
	{"anthropic stream, cr", Anthropic, true, strings.ReplaceAll(anthropicStream, "\n", "\r"), [3]int64{180, 165, 15}},
	{"openai stream, byte order mark", OpenAI, true, "\uFEFF" + openAIStream, [3]int64{21, 9, 12}},
	{"openai chat without total_tokens", OpenAI, false,
		`{"usage":{"completion_tokens":46,"prompt_tokens":1117}}`, [3]int64{1163, 1117, 46}},
	{"openai total_tokens only", OpenAI, false,
		`{"usage":{"total_tokens":7}}`, [3]int64{7, unreadable, unreadable}},
	{"anthropic without cache figures", Anthropic, false,
		`{"usage":{"output_tokens":3,"input_tokens":5}}`, [3]int64{8, 5, 3}},
	{"anthropic null cache figures", Anthropic, false,
		`{"usage":{"input_tokens":5,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"output_tokens":3}}`, [3]int64{8, 5, 3}},
	{"anthropic delta with cumulative input figures", Anthropic, true, sse(
		`data: {"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":7,"output_tokens":1}}}`, ``,
		`data: {"type":"message_delta","usage":{"input_tokens":12,"cache_creation_input_tokens":null,"output_tokens":30}}`, ``),
		[3]int64{49, 19, 30}},
	{"anthropic stream cut before message_delta", Anthropic, true, sse(
		`data: {"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`, ``),
		[3]int64{unreadable, 10, unreadable}},
	{"anthropic delta without message_start", Anthropic, true, sse(
		`data: {"type":"message_delta","usage":{"output_tokens":30}}`, ``),
		[3]int64{unreadable, unreadable, 30}},
	{"anthropic usage of other events", Anthropic, true, sse(
		`data: {"type":"message_start","usage":{"input_tokens":1,"output_tokens":1},"message":{"usage":{"input_tokens":10,"output_tokens":1}}}`, ``,
		`data: {"type":"message_delta","message":{"usage":{"input_tokens":99,"output_tokens":99}},"usage":{"output_tokens":4}}`, ``,
		`data: {"type":"ping","usage":{"input_tokens":99,"output_tokens":99}}`, ``,
		`data: {"usage":{"input_tokens":99,"output_tokens":99}}`, ``),
		[3]int64{14, 10, 4}},
	{"openai last usage counts", OpenAI, true, sse(
		`data: {"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, ``,
		`data: {"usage":{"prompt_tokens":5,"completion_tokens":6}}`, ``,
		`data: {"usage":null}`, ``),
		[3]int64{11, 5, 6}},
	{"figures at the limit", Anthropic, false,
		`{"usage":{"input_tokens":9007199254740992,"output_tokens":0}}`, [3]int64{MaxTokens, MaxTokens, 0}},
	{"sum above the limit", Anthropic, false,
		`{"usage":{"input_tokens":9007199254740992,"output_tokens":1}}`, [3]int64{unreadable, MaxTokens, 1}},
	{"input sum above the limit", Anthropic, false,
		`{"usage":{"input_tokens":9007199254740992,"cache_read_input_tokens":1,"output_tokens":1}}`, [3]int64{unreadable, unreadable, 1}},
	{"whitespace everywhere", OpenAI, false,
		" \t\r\n{ \"usage\" :\n{ \"prompt_tokens\" : 3 , \"completion_tokens\" :4 } } \n", [3]int64{7, 3, 4}},
	{"escaped key matches nothing", OpenAI, false,
		`{"us\u0061ge":{"prompt_tokens":3,"completion_tokens":4},"usage":{"prompt_tokens":1,"completion_tokens":1}}`, [3]int64{2, 1, 1}},
	{"deep noise before usage", OpenAI, false,
		`{"a":` + strings.Repeat(`[{"usage":1,"x":`, 200) + `"}]"` + strings.Repeat(`}]`, 200) +
			`,"usage":{"prompt_tokens":3,"completion_tokens":4}}`, [3]int64{7, 3, 4}},
	{"long keys are skipped", Anthropic, false,
		`{"` + strings.Repeat("usage", 100) + `":1,"usage":{"input_tokens_and_then_some_more_text":5,"input_tokens":1,"output_tokens":2}}`, [3]int64{3, 1, 2}},
	{"other value types in usage are ignored", OpenAI, false,
		`{"usage":{"prompt_tokens":1,"completion_tokens":2,"x":[true,false,null,-1.5e+3,"s"],"y":{}}}`, [3]int64{3, 1, 2}},
}

func TestRealBodies(t *testing.T) {
	for _, c := range realBodies {
		checkCounts(t, c)
	}
}

// badBodies are unreadable for every Count, for the reason given (a part of Reason's text).
var badBodies = []struct {
	name, body, why string
	src             Source
	stream          bool
}{
	{"negative figure", `{"usage":{"prompt_tokens":-1,"completion_tokens":2}}`, "negative", OpenAI, false},
	{"negative zero", `{"usage":{"input_tokens":-0,"output_tokens":2}}`, "negative", Anthropic, false},
	{"fraction", `{"usage":{"prompt_tokens":1.0,"completion_tokens":2}}`, "whole", OpenAI, false},
	{"exponent", `{"usage":{"input_tokens":1e3,"output_tokens":2}}`, "whole", Anthropic, false},
	{"capital exponent", `{"usage":{"input_tokens":1,"output_tokens":2E0}}`, "whole", Anthropic, false},
	{"above 2^53", `{"usage":{"prompt_tokens":9007199254740993,"completion_tokens":2}}`, "2^53", OpenAI, false},
	{"far above 2^53", `{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":123456789012345678901234567890}}`, "2^53", OpenAI, false},
	{"string figure", `{"usage":{"prompt_tokens":"1","completion_tokens":2}}`, "not a number", OpenAI, false},
	{"boolean figure", `{"usage":{"input_tokens":true,"output_tokens":2}}`, "not a number", Anthropic, false},
	{"object figure", `{"usage":{"input_tokens":{},"output_tokens":2}}`, "not a number", Anthropic, false},
	{"array figure", `{"usage":{"input_tokens":1,"output_tokens":[2]}}`, "not a number", Anthropic, false},
	{"bad cache figure", `{"usage":{"input_tokens":1,"cache_read_input_tokens":-3,"output_tokens":2}}`, "negative", Anthropic, false},
	{"bad total figure", `{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3.5}}`, "whole", OpenAI, false},
	{"repeated figure", `{"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens":0}}`, "repeated", OpenAI, false},
	{"repeated null figure", `{"usage":{"input_tokens":null,"output_tokens":2,"input_tokens":1}}`, "repeated", Anthropic, false},
	{"both names of one figure", `{"usage":{"prompt_tokens":1,"input_tokens":1,"completion_tokens":2}}`, "repeated", OpenAI, false},
	{"repeated usage", `{"usage":{"prompt_tokens":1,"completion_tokens":2},"usage":null}`, "repeated", OpenAI, false},
	{"usage is a number", `{"usage":12}`, "neither", OpenAI, false},
	{"usage is a string", `{"usage":"12"}`, "neither", Anthropic, false},
	{"usage is an array", `{"usage":[{"prompt_tokens":1}]}`, "neither", OpenAI, false},
	{"usage is null", `{"usage":null}`, "no usage", OpenAI, false},
	{"no usage", `{"id":"x","choices":[]}`, "no usage", OpenAI, false},
	{"null needed figures", `{"usage":{"prompt_tokens":null,"completion_tokens":null}}`, "has no", OpenAI, false},
	{"empty body", "", "empty", OpenAI, false},
	{"blank body", " \n", "empty", Anthropic, false},
	{"array body", `[{"usage":{"prompt_tokens":1,"completion_tokens":2}}]`, "not an object", OpenAI, false},
	{"string body", `"usage"`, "not an object", OpenAI, false},
	{"done in a JSON body", `[DONE]`, "not an object", OpenAI, false},
	{"truncated body", `{"usage":{"prompt_tokens":1,"completion_tokens":2}`, "ended inside", OpenAI, false},
	{"truncated in a figure", `{"usage":{"input_tokens":1,"output_tokens":2`, "ended inside", Anthropic, false},
	{"trailing data", `{"usage":{"prompt_tokens":1,"completion_tokens":2}} {}`, "not valid JSON", OpenAI, false},
	{"missing colon", `{"usage" {"prompt_tokens":1,"completion_tokens":2}}`, "not valid JSON", OpenAI, false},
	{"trailing comma", `{"usage":{"prompt_tokens":1,"completion_tokens":2,}}`, "not valid JSON", OpenAI, false},
	{"mismatched bracket", `{"usage":{"prompt_tokens":1,"completion_tokens":2},"x":[}}`, "not valid JSON", OpenAI, false},
	{"leading zero", `{"usage":{"prompt_tokens":01,"completion_tokens":2}}`, "not valid JSON", OpenAI, false},
	{"bad literal", `{"usage":{"prompt_tokens":1,"completion_tokens":2},"x":nul}`, "not valid JSON", OpenAI, false},
	{"bad escape", `{"x":"\q","usage":{"prompt_tokens":1,"completion_tokens":2}}`, "not valid JSON", OpenAI, false},
	{"bad unicode escape", `{"x":"\u12G4","usage":{"prompt_tokens":1,"completion_tokens":2}}`, "not valid JSON", OpenAI, false},
	{"control character in a string", "{\"x\":\"a\tb\",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}", "not valid JSON", OpenAI, false},
	{"bare minus", `{"x":-,"usage":{"prompt_tokens":1,"completion_tokens":2}}`, "not valid JSON", OpenAI, false},
	{"empty exponent", `{"x":1e,"usage":{"prompt_tokens":1,"completion_tokens":2}}`, "not valid JSON", OpenAI, false},
	{"key not a string", `{usage:{"prompt_tokens":1,"completion_tokens":2}}`, "not valid JSON", OpenAI, false},
	{"stream without usage", sse(`data: {"choices":[],"usage":null}`, ``, `data: [DONE]`, ``), "no usage", OpenAI, true},
	{"empty stream", "", "no usage", Anthropic, true},
	{"bad figure in an earlier event", sse(
		`data: {"usage":{"prompt_tokens":-1,"completion_tokens":2}}`, ``,
		`data: {"usage":{"prompt_tokens":1,"completion_tokens":2}}`, ``), "negative", OpenAI, true},
	{"bad figure in message_start", sse(
		`data: {"type":"message_start","message":{"usage":{"input_tokens":1.5,"output_tokens":1}}}`, ``,
		`data: {"type":"message_delta","usage":{"output_tokens":2}}`, ``), "whole", Anthropic, true},
	{"bad figure in an ignored event", sse(
		`data: {"type":"message_start","message":{"usage":{"input_tokens":1,"output_tokens":1}}}`, ``,
		`data: {"type":"message_delta","usage":{"output_tokens":2}}`, ``,
		`data: {"type":"ping","usage":{"output_tokens":"2"}}`, ``), "not a number", Anthropic, true},
	{"repeated type", sse(`data: {"type":"message_delta","type":"ping","usage":{"output_tokens":2}}`, ``), "repeated", Anthropic, true},
	{"repeated message", sse(`data: {"type":"message_start","message":{},"message":{"usage":{"input_tokens":1}}}`, ``), "repeated", Anthropic, true},
	{"repeated message usage", sse(`data: {"type":"message_start","message":{"usage":null,"usage":{"input_tokens":1}}}`, ``), "repeated", Anthropic, true},
	{"dispatched truncated event", sse(`data: {"usage":{"prompt_tokens":1,"completion_tokens":2}`, ``), "event's data ended", OpenAI, true},
	{"malformed event", sse(`data: {"usage":{"prompt_tokens":1,"completion_tokens":2}}}`, ``), "not valid JSON", OpenAI, true},
	{"event that is not an object", sse(`data: 12`, ``, `data: {"usage":{"prompt_tokens":1,"completion_tokens":2}}`, ``), "not an object", OpenAI, true},
	{"event with two objects", sse(`data: {}`, `data: {"usage":{"prompt_tokens":1,"completion_tokens":2}}`, ``), "not valid JSON", OpenAI, true},
	{"done with more", sse(`data: [DONE]]`, ``, `data: {"usage":{"prompt_tokens":1,"completion_tokens":2}}`, ``), "not valid JSON", OpenAI, true},
	{"last event not dispatched", sse(`data: {"usage":{"prompt_tokens":1,"completion_tokens":2}}`), "no usage", OpenAI, true},
	{"a string split by a data line", sse(`data: {"x":"a`, `data: b","usage":{"prompt_tokens":1,"completion_tokens":2}}`, ``), "not valid JSON", OpenAI, true},
}

func TestBadBodiesAreUnreadable(t *testing.T) {
	for _, c := range badBodies {
		for _, count := range counts {
			n, ok, why := scan(c.src, count, c.stream, []byte(c.body))
			if ok || !strings.Contains(why, c.why) {
				t.Errorf("%s, count %d: got %d, %v (%q), want unreadable because %q", c.name, count, n, ok, why, c.why)
			}
		}
	}
}

const openAIUsage = `{"usage":{"prompt_tokens":3,"completion_tokens":4}}`

// framingBodies all hold the usage event openAIUsage, framed in the ways an event stream may be.
var framingBodies = []bodyCase{
	{name: "no space after data:", body: "data:" + openAIUsage + "\n\n"},
	{name: "two spaces: one is data", body: "data:  " + openAIUsage + "\n\n"},
	{name: "data lines joined", body: "data: {\"usage\":\ndata: {\"prompt_tokens\":3,\ndata:\ndata\ndata: \"completion_tokens\":4}}\n\n"},
	{name: "comments and other fields", body: ": keep-alive\nevent: usage\nid: 7\nretry: 100\n" +
		"data: " + openAIUsage + "\n: between\n\n"},
	{name: "field names that are not data", body: "dat: {}\ndata2: {}\nDATA: {}\ndatum: {}\nd\nevent\ndata : {}\n" +
		"data: " + openAIUsage + "\n\n"},
	{name: "blank data ignored", body: "data:\n\ndata:  \t\n\n" + "data: " + openAIUsage + "\n\n"},
	{name: "events without data", body: "event: a\n\n\n\nid: 1\n\ndata: " + openAIUsage + "\r\n\r\n\r\n"},
	{name: "mixed line ends", body: "data: " + openAIUsage + "\r\r\ndata: [DONE]\n\r"},
	{name: "byte order mark", body: "\xEF\xBB\xBFdata: " + openAIUsage + "\n\n"},
	{name: "half a byte order mark", body: "\xEF\xBBdata: {}\n\ndata: " + openAIUsage + "\n\n"},
	{name: "byte order mark not first", body: "\n\xEF\xBB\xBFdata: {}\n\ndata: " + openAIUsage + "\n\n"},
	{name: "usage after done", body: "data: [DONE]\n\ndata: " + openAIUsage + "\n\n"},
	{name: "done event blank after", body: "data: " + openAIUsage + "\n\ndata: [DONE]  \n\n"},
	{name: "final event undispatched", body: "data: " + openAIUsage + "\n\ndata: {\"usage\":{\"prompt_tokens\":-1"},
}

func TestEventStreamFraming(t *testing.T) {
	for _, c := range framingBodies {
		c.src, c.stream, c.want = OpenAI, true, [3]int64{7, 3, 4}
		checkCounts(t, c)
	}
}

func TestWholeNumber(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64 // unreadable: ok false
	}{
		{"0", 0}, {"42", 42}, {" \t 42\t ", 42}, {"007", 7}, {"9007199254740992", MaxTokens},
		{"00000000000000000000000000009007199254740992", MaxTokens},
		{"9007199254740993", unreadable}, {"99999999999999999999999", unreadable},
		{"", unreadable}, {" \t", unreadable}, {"-1", unreadable}, {"+1", unreadable}, {"1.0", unreadable},
		{"1e3", unreadable}, {"1 2", unreadable}, {"0x10", unreadable}, {"12\n", unreadable}, {"١", unreadable},
	} {
		n, ok := WholeNumber(c.in)
		if c.want == unreadable && ok || c.want != unreadable && (!ok || n != c.want) {
			t.Errorf("WholeNumber(%q) = %d, %v; want %d", c.in, n, ok, c.want)
		}
	}
}

func TestUnusableUntilReset(t *testing.T) {
	var s Scanner
	s.Write([]byte(openAIUsage))
	if _, ok := s.Tokens(); ok || s.Reason() == "" {
		t.Fatal("a zero Scanner read a usage")
	}
	for _, bad := range []struct {
		src   Source
		count Count
	}{{0, Total}, {Anthropic + 1, Total}, {OpenAI, Output + 1}} {
		s.Reset(bad.src, bad.count, false)
		s.Write([]byte(openAIUsage))
		if _, ok := s.Tokens(); ok {
			t.Errorf("Reset(%d, %d) read a usage", bad.src, bad.count)
		}
	}
}

// A Scanner is reused from one response to the next: nothing of the last one remains.
func TestResetForgetsTheLastBody(t *testing.T) {
	var s Scanner
	s.Reset(OpenAI, Total, true)
	s.Write([]byte("data: " + openAIUsage + "\n\ndata: {\"x\":[1,{\"y\":\"\\u12"))
	s.Reset(OpenAI, Total, true)
	s.Write([]byte("data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n"))
	if n, ok := s.Tokens(); !ok || n != 2 {
		t.Fatalf("got %d, %v (%s), want 2", n, ok, s.Reason())
	}
}
