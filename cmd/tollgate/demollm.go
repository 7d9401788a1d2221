package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// The demo upstream's LLM endpoints: OpenAI's chat completions and Anthropic's messages, as JSON
// or as server-sent events, reporting the token usage the client chose, so usage-based charging
// can be tried without a model. The text is always the same few words.

// demoReply is the assistant's text, sent a word per event when streamed.
var demoReply = []string{"Hello", " from", " the", " demo", " upstream."}

// maxDemoTokens bounds the token counts a client may choose.
const maxDemoTokens = 1_000_000_000

// llmRequest is what the demo reads of a request's JSON body.
type llmRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	MaxTokens     *int64 `json:"max_tokens"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// The usage the client chose, and where to report it beside the body.
	prompt, completion        int64
	usageHeader, usageTrailer bool
}

// parseLLMRequest reads the body and the x-demo-* headers; the error names what is wrong.
func parseLLMRequest(r *http.Request) (llmRequest, error) {
	var req llmRequest
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err != nil {
		return req, fmt.Errorf("cannot read the request body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return req, bodyError(err)
		}
	}
	if req.MaxTokens != nil && (*req.MaxTokens < 0 || *req.MaxTokens > maxDemoTokens) {
		return req, fmt.Errorf("max_tokens %d is out of range: use 0 to %d", *req.MaxTokens, maxDemoTokens)
	}
	if req.Model == "" {
		req.Model = "demo"
	}
	completionDefault := int64(20)
	if req.MaxTokens != nil {
		completionDefault = *req.MaxTokens
	}
	var errs []error
	req.prompt = demoTokens(r, "x-demo-prompt-tokens", 10, &errs)
	req.completion = demoTokens(r, "x-demo-completion-tokens", completionDefault, &errs)
	req.usageHeader = demoSwitch(r, "x-demo-usage-header", &errs)
	req.usageTrailer = demoSwitch(r, "x-demo-usage-trailer", &errs)
	return req, errors.Join(errs...)
}

// bodyError says what is wrong with a body json.Unmarshal refused: the field of the wrong type
// and what it takes, or why it is not JSON.
func bodyError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) || typeErr.Field == "" {
		return fmt.Errorf("the request body is not the JSON object this endpoint takes: %v", err)
	}
	want := map[reflect.Kind]string{reflect.Bool: "true or false", reflect.Int64: "a whole number",
		reflect.String: "a string", reflect.Struct: "an object"}[typeErr.Type.Kind()]
	return fmt.Errorf("the request body's %s is a JSON %s: it takes %s", typeErr.Field, typeErr.Value, want)
}

// demoTokens reads a token count header, def when absent.
func demoTokens(r *http.Request, name string, def int64, errs *[]error) int64 {
	v := r.Header.Get(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxDemoTokens {
		*errs = append(*errs, fmt.Errorf("%s %q is not a token count: use a whole number from 0 to %d", name, v, maxDemoTokens))
	}
	return n
}

// demoSwitch reads a true/false header, false when absent.
func demoSwitch(r *http.Request, name string, errs *[]error) bool {
	v := r.Header.Get(name)
	if v == "" {
		return false
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s %q is not a switch: use true or false", name, v))
	}
	return on
}

// serveLLM answers an LLM request with events (the streamed form) or one JSON document.
func serveLLM(events func(llmRequest) []sseEvent, document func(llmRequest) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, err := parseLLMRequest(r)
		if err != nil {
			http.Error(w, "Bad Request: "+err.Error(), http.StatusBadRequest)
			return
		}
		total := strconv.FormatInt(req.prompt+req.completion, 10)
		if req.usageHeader {
			w.Header().Set("x-usage-tokens", total)
		}
		if req.usageTrailer {
			w.Header().Set("Trailer", "X-Usage-Tokens")
		}
		if req.Stream {
			w.Header().Set("content-type", "text/event-stream")
			w.Header().Set("cache-control", "no-cache")
			flusher := http.NewResponseController(w)
			for _, e := range events(req) {
				_, _ = io.WriteString(w, e.String())
				_ = flusher.Flush() // each event on its own, as a model streams them
			}
		} else {
			w.Header().Set("content-type", "application/json")
			data, _ := json.Marshal(document(req))
			_, _ = w.Write(append(data, '\n'))
		}
		if req.usageTrailer {
			w.Header().Set("X-Usage-Tokens", total)
		}
	}
}

// sseEvent is one server-sent event: an optional event name and its data line.
type sseEvent struct {
	name string
	data any // JSON-encoded, or a string sent as it is
}

func (e sseEvent) String() string {
	data, ok := e.data.(string)
	if !ok {
		b, _ := json.Marshal(e.data)
		data = string(b)
	}
	if e.name != "" {
		return "event: " + e.name + "\ndata: " + data + "\n\n"
	}
	return "data: " + data + "\n\n"
}

type object = map[string]any

// openAIUsage is the usage object of the chat completions API.
func openAIUsage(req llmRequest) object {
	return object{"prompt_tokens": req.prompt, "completion_tokens": req.completion, "total_tokens": req.prompt + req.completion}
}

// openAIDocument is a chat completion (POST /v1/chat/completions without "stream": true).
func openAIDocument(req llmRequest) any {
	return object{"id": "chatcmpl-demo", "object": "chat.completion", "model": req.Model,
		"choices": []object{{"index": 0, "message": object{"role": "assistant", "content": strings.Join(demoReply, "")},
			"finish_reason": "stop"}},
		"usage": openAIUsage(req)}
}

// openAIEvents are the chunks of a streamed chat completion: the role and a word per chunk, the
// finish reason, with stream_options.include_usage a last chunk with no choices and the usage,
// then [DONE].
func openAIEvents(req llmRequest) []sseEvent {
	chunk := func(delta object, finish any) sseEvent {
		c := object{"id": "chatcmpl-demo", "object": "chat.completion.chunk", "model": req.Model,
			"choices": []object{{"index": 0, "delta": delta, "finish_reason": finish}}}
		if req.StreamOptions.IncludeUsage {
			c["usage"] = nil
		}
		return sseEvent{data: c}
	}
	var events []sseEvent
	for i, word := range demoReply {
		delta := object{"content": word}
		if i == 0 {
			delta["role"] = "assistant"
		}
		events = append(events, chunk(delta, nil))
	}
	events = append(events, chunk(object{}, "stop"))
	if req.StreamOptions.IncludeUsage {
		events = append(events, sseEvent{data: object{"id": "chatcmpl-demo", "object": "chat.completion.chunk",
			"model": req.Model, "choices": []object{}, "usage": openAIUsage(req)}})
	}
	return append(events, sseEvent{data: "[DONE]"})
}

// anthropicDocument is a message (POST /v1/messages without "stream": true).
func anthropicDocument(req llmRequest) any {
	return object{"id": "msg_demo", "type": "message", "role": "assistant", "model": req.Model,
		"content":     []object{{"type": "text", "text": strings.Join(demoReply, "")}},
		"stop_reason": "end_turn", "stop_sequence": nil,
		"usage": object{"input_tokens": req.prompt, "output_tokens": req.completion}}
}

// anthropicEvents are a streamed message: message_start with the input tokens (and, as
// Anthropic's API does, the first output token), a content block of a delta per word,
// message_delta with the output tokens, message_stop.
func anthropicEvents(req llmRequest) []sseEvent {
	events := []sseEvent{
		{"message_start", object{"type": "message_start", "message": object{"id": "msg_demo", "type": "message",
			"role": "assistant", "model": req.Model, "content": []object{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": object{"input_tokens": req.prompt, "output_tokens": min(req.completion, 1)}}}},
		{"content_block_start", object{"type": "content_block_start", "index": 0,
			"content_block": object{"type": "text", "text": ""}}},
	}
	for _, word := range demoReply {
		events = append(events, sseEvent{"content_block_delta", object{"type": "content_block_delta", "index": 0,
			"delta": object{"type": "text_delta", "text": word}}})
	}
	return append(events,
		sseEvent{"content_block_stop", object{"type": "content_block_stop", "index": 0}},
		sseEvent{"message_delta", object{"type": "message_delta",
			"delta": object{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": object{"output_tokens": req.completion}}},
		sseEvent{"message_stop", object{"type": "message_stop"}})
}
