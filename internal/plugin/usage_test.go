package plugin

import (
	"strconv"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
)

// usageConfig is one rule with usage from source: 100 units an hour, reserve 10, unknown 50.
func usageConfig(usage string) string {
	return `{"rate_limit_headers": "x-ratelimit", "rules": [{"name": "llm", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 100, "refill_tokens": 100, "refill_interval": "1h"}],
	  "usage": ` + usage + `}]}`
}

const (
	openAIUsage = `{"source": "openai", "reserve": 10, "unknown": 50}`
	openAIJSON  = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],` +
		`"usage":{"prompt_tokens":5,"completion_tokens":25,"total_tokens":30}}`
	openAIStream = "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n" +
		"data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":40,\"total_tokens\":42}}\n\n" +
		"data: [DONE]\n\n"
)

// usageResponse is how a test request's response goes: its status and headers, its body in
// chunks, its trailers, and whether the stream ends before the body does.
type usageResponse struct {
	status   int
	headers  [][2]string
	chunks   []string
	trailers [][2]string
	// gone: the stream ends after the chunks, before the end of the response; none: it ends
	// before the response headers.
	gone, none bool
}

// chunked splits s into chunks of n bytes.
func chunked(s string, n int) []string {
	var out []string
	for len(s) > n {
		out, s = append(out, s[:n]), s[n:]
	}
	return append(out, s)
}

// A response's usage settles the request's charge: the probe that follows it (reserving 10)
// sees what is left, and the counters what was charged.
func TestUsageSettlesTheCharge(t *testing.T) {
	jsonType := [][2]string{{"content-type", "application/json"}}
	eventType := [][2]string{{"content-type", "text/event-stream"}}
	tests := []struct {
		name    string
		usage   string
		resp    usageResponse
		probe   string // the probe's outcome: its remaining, or its rejection
		charged uint64
		unread  uint64
	}{
		{"a JSON body", openAIUsage, usageResponse{status: 200, headers: jsonType, chunks: []string{openAIJSON}}, "remaining=60", 30, 0},
		{"a JSON body in 3-byte chunks", openAIUsage, usageResponse{status: 200, headers: jsonType, chunks: chunked(openAIJSON, 3)}, "remaining=60", 30, 0},
		{"a stream split at every byte", openAIUsage, usageResponse{status: 200, headers: eventType, chunks: chunked(openAIStream, 1)}, "remaining=48", 42, 0},
		{"input tokens only", `{"source": "openai", "count": "input", "reserve": 10, "unknown": 50}`,
			usageResponse{status: 200, headers: jsonType, chunks: []string{openAIJSON}}, "remaining=85", 5, 0},
		{"an Anthropic body", `{"source": "anthropic", "reserve": 10, "unknown": 50}`, usageResponse{status: 200, headers: jsonType,
			chunks: []string{`{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":12,"output_tokens":8}}`}}, "remaining=70", 20, 0},
		{"no usage in the body: unknown", openAIUsage, usageResponse{status: 200, headers: jsonType, chunks: []string{`{"id":"x"}`}}, "remaining=40", 50, 1},
		{"a compressed body: unknown", openAIUsage, usageResponse{status: 200,
			headers: [][2]string{{"content-type", "application/json"}, {"content-encoding", "gzip"}}, chunks: []string{openAIJSON}}, "remaining=40", 50, 1},
		{"a client gone mid-stream: unknown", openAIUsage, usageResponse{status: 200, headers: eventType,
			chunks: []string{openAIStream[:30]}, gone: true}, "remaining=40", 50, 1},
		{"no response at all: unknown", openAIUsage, usageResponse{none: true}, "remaining=40", 50, 1},
		{"an error without usage keeps the reserve", openAIUsage, usageResponse{status: 500, headers: jsonType,
			chunks: []string{`{"error":{"message":"overloaded"}}`}}, "remaining=80", 10, 0},
		{"a negative figure: unknown", openAIUsage, usageResponse{status: 200, headers: jsonType,
			chunks: []string{`{"usage":{"total_tokens":-30}}`}}, "remaining=40", 50, 1},
		{"usage beyond the level: a debt, and the exact wait", openAIUsage, usageResponse{status: 200, headers: jsonType,
			chunks: []string{`{"usage":{"prompt_tokens":50,"completion_tokens":100,"total_tokens":150}}`}}, "429 ra=2160", 150, 0},
		{"a usage header", `{"source": "header", "header": "x-usage-tokens", "reserve": 10, "unknown": 50}`,
			usageResponse{status: 200, headers: [][2]string{{"x-usage-tokens", "25"}}}, "remaining=65", 25, 0},
		{"a usage trailer", `{"source": "header", "header": "x-usage-tokens", "reserve": 10, "unknown": 50}`,
			usageResponse{status: 200, chunks: []string{"abc"}, trailers: [][2]string{{"x-usage-tokens", "20"}}}, "remaining=70", 20, 0},
		{"a usage header that is not a whole number: unknown", `{"source": "header", "header": "x-usage-tokens", "reserve": 10, "unknown": 50}`,
			usageResponse{status: 200, headers: [][2]string{{"x-usage-tokens", "2.5"}}}, "remaining=40", 50, 1},
		{"the body's bytes", `{"source": "response_bytes", "reserve": 10, "unknown": 0}`,
			usageResponse{status: 200, chunks: []string{strings.Repeat("x", 10), strings.Repeat("y", 10), "zzzzz"}}, "remaining=65", 25, 0},
		{"the bytes seen before the client went away", `{"source": "response_bytes", "reserve": 10, "unknown": 0}`,
			usageResponse{status: 200, chunks: []string{strings.Repeat("x", 15)}, gone: true}, "remaining=75", 15, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := rig(t, usageConfig(tt.usage))
			s, _ := host.Request(keyed("k", "/v1/chat/completions", [2]string{"accept-encoding", "gzip"}))
			if got := outcome(s); got != "continued" {
				t.Fatalf("request: %s, want continued", got)
			}
			source := tt.usage[strings.Index(tt.usage, `"source": "`)+11:]
			if readsBody := strings.HasPrefix(source, "openai") || strings.HasPrefix(source, "anthropic"); readsBody == hasHeader(s.Forwarded(), "accept-encoding") {
				t.Fatalf("accept-encoding forwarded: %v, want it removed only for a rule that reads the body", !readsBody)
			}
			playResponse(s, tt.resp)
			probe, _ := host.Request(keyed("k", "/v1/chat/completions"))
			got := outcome(probe)
			if got == "continued" {
				probe.ResponseHeaders(200, nil)
				got = "remaining=" + probe.ResponseHeader("x-ratelimit-remaining")
			}
			if got != tt.probe {
				t.Errorf("probe: %s, want %s", got, tt.probe)
			}
			checkCounters(t, host, map[string]uint64{"tollgate.rule.llm.usage": tt.charged, "tollgate.rule.llm.usage_unread": tt.unread})
			if state, ok := s.FilterState("tollgate_usage"); !ok || state != strconv.FormatUint(tt.charged, 10) {
				t.Errorf("filter state tollgate_usage = %q (set %v), want %d", state, ok, tt.charged)
			}
		})
	}
}

// playResponse sends resp through the stream s and ends the stream. A response without body
// chunks or trailers ends with its headers.
func playResponse(s *abitest.Stream, resp usageResponse) {
	if !resp.none {
		s.ResponseHeaders(resp.status, resp.headers)
		for i, c := range resp.chunks {
			s.ResponseBody([]byte(c), i == len(resp.chunks)-1 && !resp.gone && resp.trailers == nil)
		}
		if resp.trailers != nil && !resp.gone {
			s.ResponseTrailers(resp.trailers)
		}
	}
	s.End()
}

func hasHeader(headers [][2]string, name string) bool {
	for _, h := range headers {
		if h[0] == name {
			return true
		}
	}
	return false
}

// A rule with usage and a global limit asks the service for the reserve at admission, and sends
// what the response used beyond it as hits_addend when the response ends, in a call of the
// plugin's own that the stream's end does not cancel. Less than the reserve sends nothing.
func TestUsageReachesTheRateLimitService(t *testing.T) {
	cfg := `{"rules": [{"name": "g", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 100, "refill_tokens": 100, "refill_interval": "1h"}],
	  "global": {"cluster": "ratelimit", "domain": "dom", "timeout": "20ms"},
	  "usage": {"source": "openai", "reserve": 10, "unknown": 50}}]}`
	for _, tt := range []struct {
		name string
		body string
		hits []uint32 // hits_addend of the calls, in order
	}{
		{"more than the reserve", openAIJSON, []uint32{10, 20}},
		{"less than the reserve", `{"usage":{"total_tokens":4}}`, []uint32{10}},
		{"unreadable: unknown", `{}`, []uint32{10, 40}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			host := rig(t, cfg)
			s, _ := host.Request(keyed("secret-k", "/v1/chat/completions"))
			check := onlyCall(t, host, "secret-k", s.ID())
			if got := hitsAddend(t, check.Message); got != tt.hits[0] {
				t.Fatalf("the check's hits_addend = %d, want the reserve %d", got, tt.hits[0])
			}
			host.Answer(check.Token, rlsAnswer(rlsOK, 1000, unitMinute, 990, 60000))
			if got := outcome(s); got != "continued" {
				t.Fatalf("request: %s, want continued", got)
			}
			playResponse(s, usageResponse{status: 200, headers: [][2]string{{"content-type", "application/json"}}, chunks: []string{tt.body}})
			calls := host.Calls()
			if len(calls) != len(tt.hits)-1 {
				t.Fatalf("%d calls after the response, want %d", len(calls), len(tt.hits)-1)
			}
			for i, c := range calls {
				// Still pending after the stream ended: the plugin's own, not cancelled with it.
				if got := hitsAddend(t, c.Message); got != tt.hits[i+1] {
					t.Errorf("settlement call: hits_addend %d, want %d", got, tt.hits[i+1])
				}
				host.Answer(c.Token, rlsAnswer(rlsOK, 1000, unitMinute, 970, 60000))
			}
			checkCounters(t, host, map[string]uint64{"tollgate.rule.g.global_ok": uint64(len(tt.hits))})
		})
	}
}

// hitsAddend reads field 3 of a RateLimitRequest.
func hitsAddend(t *testing.T, msg []byte) uint32 {
	t.Helper()
	var req rlsv3.RateLimitRequest
	if err := proto.Unmarshal(msg, &req); err != nil {
		t.Fatalf("the call's message: %v", err)
	}
	return req.GetHitsAddend()
}

// A shadow rule with usage settles its own charge the same way and never rejects: over its
// budget, the request goes through marked.
func TestShadowUsage(t *testing.T) {
	host := rig(t, `{"rules": [{"name": "llm", "shadow": true, "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 100, "refill_tokens": 100, "refill_interval": "1h"}],
	  "usage": {"source": "openai", "reserve": 10, "unknown": 50}}]}`)
	s, _ := host.Request(keyed("k", "/"))
	playResponse(s, usageResponse{status: 200, chunks: []string{`{"usage":{"total_tokens":150}}`}})
	probe, _ := host.Request(keyed("k", "/"))
	if got := outcome(probe); got != "continued" || !hasHeader(probe.Forwarded(), ShadowHeader) {
		t.Fatalf("probe: %s, forwarded %v: want it continued, marked shadow-limited", got, probe.Forwarded())
	}
	checkCounters(t, host, map[string]uint64{"tollgate.rule.llm.usage": 150, "tollgate.rule.llm.shadow_limited": 1})
}
