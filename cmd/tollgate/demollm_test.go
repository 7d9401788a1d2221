package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
)

// flushRecorder keeps what the handler wrote between flushes: each flushed segment reaches the
// client on its own.
type flushRecorder struct {
	*httptest.ResponseRecorder
	segments []string
	pending  bytes.Buffer
}

func (f *flushRecorder) Write(p []byte) (int, error) {
	f.pending.Write(p)
	return f.ResponseRecorder.Write(p)
}

func (f *flushRecorder) Flush() {
	f.segments = append(f.segments, f.pending.String())
	f.pending.Reset()
	f.ResponseRecorder.Flush()
}

func TestDemoLLMEndpoints(t *testing.T) {
	const (
		chat     = "/v1/chat/completions"
		messages = "/v1/messages"
	)
	tests := []struct {
		name, path, body string
		headers          map[string]string
		status           int
		// want are pieces of the body, in order; segments is how many flushed parts it came in
		// (0: one JSON document); header and trailer are x-usage-tokens.
		want            []string
		segments        int
		header, trailer string
	}{
		{"chat completion, default usage", chat, `{"model":"m"}`, nil, 200,
			[]string{`"content":"Hello from the demo upstream."`, `"object":"chat.completion"`,
				`"usage":{"completion_tokens":20,"prompt_tokens":10,"total_tokens":30}`}, 0, "", ""},
		{"chat completion, max_tokens is the completion", chat, `{"max_tokens":7}`, nil, 200,
			[]string{`"model":"demo"`, `"usage":{"completion_tokens":7,"prompt_tokens":10,"total_tokens":17}`}, 0, "", ""},
		{"chat completion, usage chosen, in a header and a trailer", chat, `{"max_tokens":7}`,
			map[string]string{"x-demo-prompt-tokens": "5", "x-demo-completion-tokens": "3",
				"x-demo-usage-header": "true", "x-demo-usage-trailer": "true"}, 200,
			[]string{`"usage":{"completion_tokens":3,"prompt_tokens":5,"total_tokens":8}`}, 0, "8", "8"},
		{"chat completion streamed with usage", chat, `{"stream":true,"stream_options":{"include_usage":true}}`,
			map[string]string{"x-demo-completion-tokens": "4"}, 200,
			[]string{`data: {"choices":[{"delta":{"content":"Hello","role":"assistant"},"finish_reason":null,"index":0}],`,
				`"object":"chat.completion.chunk","usage":null}`, `{"content":" upstream."}`, `"finish_reason":"stop"`,
				"data: {\"choices\":[],", `"usage":{"completion_tokens":4,"prompt_tokens":10,"total_tokens":14}}` + "\n\n",
				"data: [DONE]\n\n"}, 8, "", ""},
		{"chat completion streamed without usage", chat, `{"stream":true}`, nil, 200,
			[]string{`"finish_reason":"stop"`, "data: [DONE]\n\n"}, 7, "", ""},
		{"message", messages, `{"max_tokens":12}`, nil, 200,
			[]string{`"content":[{"text":"Hello from the demo upstream.","type":"text"}]`, `"type":"message"`,
				`"usage":{"input_tokens":10,"output_tokens":12}`}, 0, "", ""},
		{"message streamed", messages, `{"stream":true}`, map[string]string{"x-demo-prompt-tokens": "3",
			"x-demo-usage-trailer": "1"}, 200,
			[]string{"event: message_start\n", `"usage":{"input_tokens":3,"output_tokens":1}`,
				"event: content_block_start\n", "event: content_block_delta\n", `"text":"Hello"`,
				"event: content_block_stop\n", "event: message_delta\n", `"usage":{"output_tokens":20}`,
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"}, 10, "", "23"},
		{"a bad prompt token count", chat, "", map[string]string{"x-demo-prompt-tokens": "many"}, 400,
			[]string{`x-demo-prompt-tokens "many" is not a token count: use a whole number from 0 to 1000000000`}, 0, "", ""},
		{"a negative completion token count", messages, "", map[string]string{"x-demo-completion-tokens": "-1"}, 400,
			[]string{`x-demo-completion-tokens "-1" is not a token count`}, 0, "", ""},
		{"a bad switch", chat, "", map[string]string{"x-demo-usage-header": "yes"}, 400,
			[]string{`x-demo-usage-header "yes" is not a switch: use true or false`}, 0, "", ""},
		{"a body that is not JSON", chat, "stream", nil, 400,
			[]string{"the request body is not the JSON object this endpoint takes"}, 0, "", ""},
		{"a field of the wrong type", messages, `{"max_tokens":"many"}`, nil, 400,
			[]string{"the request body's max_tokens is a JSON string: it takes a whole number"}, 0, "", ""},
		{"a nested field of the wrong type", chat, `{"stream_options":{"include_usage":1}}`, nil, 400,
			[]string{"the request body's stream_options.include_usage is a JSON number: it takes true or false"}, 0, "", ""},
		{"max_tokens out of range", messages, `{"max_tokens":-5}`, nil, 400,
			[]string{"max_tokens -5 is out of range: use 0 to 1000000000"}, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", tt.path, strings.NewReader(tt.body))
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder()}
			demoHandler().ServeHTTP(rec, req)
			resp := rec.Result()
			body := rec.Body.String()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tt.status, body)
			}
			rest := body
			for _, piece := range tt.want {
				i := strings.Index(rest, piece)
				if i < 0 {
					t.Fatalf("body %q\nlacks, in order, %q", body, piece)
				}
				rest = rest[i+len(piece):]
			}
			if len(rec.segments) != tt.segments {
				t.Errorf("%d flushed segments %q, want %d", len(rec.segments), rec.segments, tt.segments)
			}
			if got := resp.Header.Get("x-usage-tokens"); got != tt.header {
				t.Errorf("header x-usage-tokens %q, want %q", got, tt.header)
			}
			if got := resp.Trailer.Get("x-usage-tokens"); got != tt.trailer {
				t.Errorf("trailer x-usage-tokens %q, want %q", got, tt.trailer)
			}
		})
	}
}

// Other methods and paths get the line naming the request.
func TestDemoOtherRequests(t *testing.T) {
	rec := httptest.NewRecorder()
	demoHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/chat/completions?status=404", nil))
	if rec.Code != 404 || rec.Body.String() != "hello from the demo upstream: GET /v1/chat/completions?status=404\n" {
		t.Fatalf("%d %q", rec.Code, rec.Body)
	}
}

// Through tollgate serve and the real module, a streamed completion reaches the client event by
// event with its usage trailer.
func TestServeStreamsTheDemoLLM(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(demoHandler())
	t.Cleanup(upstream.Close)
	stop := make(chan os.Signal, 1)
	file := writeFile(t, "llm.json", outcomeServeConfig)
	addr, _, exit := startServe(t, []string{"--config", file, "--wasm", builtModule(t), "--upstream", upstream.URL}, stop)
	defer func() {
		stop <- syscall.SIGTERM
		if code := <-exit; code != 0 {
			t.Errorf("exit %d after a clean stop", code)
		}
	}()
	req, err := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions",
		strings.NewReader(`{"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", "k1")
	req.Header.Set("x-demo-usage-trailer", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		if line, ok := strings.CutPrefix(scanner.Text(), "data: "); ok {
			events = append(events, line)
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || len(events) != 8 || events[7] != "[DONE]" || !strings.Contains(events[6], `"total_tokens":30`) {
		t.Fatalf("status %d, events %q", resp.StatusCode, events)
	}
	if got := resp.Trailer.Get("x-usage-tokens"); got != "30" {
		t.Fatalf("trailer x-usage-tokens %q, want 30", got)
	}
}
