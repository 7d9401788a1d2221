package e2e

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// usageRuleConfig is one rule charging OpenAI usage: 1,000 tokens an hour, each request
// reserving 100, an unreadable usage charged 400.
const usageRuleConfig = `{"rate_limit_headers": "x-ratelimit", "rules": [{"name": "llm", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 1000, "refill_tokens": 1000, "refill_interval": "1h"}],
  "usage": {"source": "openai", "reserve": 100, "unknown": 400}}]}`

// streamedUsage is an event stream whose first event carries a string of size bytes and whose
// last one before [DONE] reports total tokens.
func streamedUsage(size int, total int) []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"choices":[{"delta":{"content":"`)
	b.Write(bytes.Repeat([]byte("a"), size))
	b.WriteString(`"}}],"usage":null}` + "\n\n")
	b.WriteString(`data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":` + strconv.Itoa(total-1) +
		`,"total_tokens":` + strconv.Itoa(total) + `}}` + "\n\ndata: [DONE]\n\n")
	return b.Bytes()
}

// The real module reads a streamed response's usage chunk by chunk as it passes, whatever the
// size of an event: a 16 MiB event split into 64 KiB chunks goes through unchanged, the VM's
// memory does not grow with it, and the charge is settled to the usage of the last event. The
// next request of the key sees what is left; a stream cut before its end is charged unknown.
func TestUsageOfAStreamReadInBoundedMemory(t *testing.T) {
	for _, profile := range profiles {
		t.Run(profile.String(), func(t *testing.T) {
			g := newRig(t, profile, usageRuleConfig, 1)
			vm := g.vms[0]
			post := host.Request{Headers: [][2]string{{":method", "POST"}, {":path", "/v1/chat/completions"},
				{":authority", "api.test"}, {":scheme", "http"}, {"x-api-key", "team-a"}, {"accept-encoding", "gzip, br"}},
				SourceAddress: "192.0.2.10:40000", EndOfStream: true}
			body := streamedUsage(16<<20, 250)
			s, d, err := vm.StartStream(post)
			if err != nil || !d.Continue {
				t.Fatalf("start: %+v %v", d, err)
			}
			for _, h := range d.RequestHeaders {
				if h[0] == "accept-encoding" {
					t.Fatalf("accept-encoding %q forwarded: a rule reading the body asks for it uncompressed", h[1])
				}
			}
			if _, err := s.ResponseHeaders(200, [][2]string{{"content-type", "text/event-stream"}}, false); err != nil {
				t.Fatal(err)
			}
			pages := vm.Stats().MemoryPages
			var sent []byte
			for off := 0; off < len(body); off += 64 << 10 {
				chunk := body[off:min(off+64<<10, len(body))]
				out, err := s.ForwardResponseBody(chunk, off+len(chunk) == len(body))
				if err != nil {
					t.Fatalf("chunk at %d: %v\n%s", off, err, g.logText())
				}
				sent = append(sent, out...)
			}
			if grown := vm.Stats().MemoryPages - pages; grown > 2 {
				t.Errorf("the VM's memory grew by %d pages over a 16 MiB event: the stream must be read in bounded memory", grown)
			}
			if !bytes.Equal(sent, body) {
				t.Fatalf("the body went on changed: %d bytes of %d", len(sent), len(body))
			}
			if err := s.Finish(); err != nil {
				t.Fatal(err)
			}
			if got := g.counter("tollgate.rule.llm.usage"); got != 250 {
				t.Errorf("usage counted %d, want 250", got)
			}
			// 1000 - 250 - the probe's reserve of 100.
			if resp := g.send(vm, post, nil); resp.Status != 200 || resp.Header("x-ratelimit-remaining") != "650" {
				t.Fatalf("probe: %d remaining %q, want 200 and 650", resp.Status, resp.Header("x-ratelimit-remaining"))
			}

			// A stream cut after its first chunk: unknown (400), on top of the probe's settled
			// usage (the ok upstream reports none: 400 too).
			s, _, err = vm.StartStream(post)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.ResponseHeaders(200, [][2]string{{"content-type", "text/event-stream"}}, false); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ForwardResponseBody(body[:1000], false); err != nil {
				t.Fatal(err)
			}
			if err := s.Finish(); err != nil {
				t.Fatal(err)
			}
			if got := g.counter("tollgate.rule.llm.usage_unread"); got != 2 {
				t.Errorf("usage_unread %d, want 2 (the probe without usage, the cut stream)", got)
			}
			resp := g.send(vm, post, nil)
			if resp.Status != 429 || !strings.HasPrefix(resp.Header("retry-after"), "") || resp.Header("x-ratelimit-remaining") != "0" {
				t.Fatalf("after 250 + 400 + 400 tokens: %d, want 429", resp.Status)
			}
			// 1000 - 1050 = -50: 150 tokens to the reserve, at 1000 an hour.
			if got := resp.Header("retry-after"); got != "540" {
				t.Errorf("Retry-After %s, want 540 (the debt of 50 repaid, then the reserve of 100)", got)
			}
		})
	}
}
