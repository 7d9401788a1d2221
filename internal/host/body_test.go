package host

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/hostcore"
)

// The response body and trailers through the probe module, built from internal/abi like the
// filter (envoy source/extensions/common/wasm/context.cc encodeData, encodeTrailers, getBuffer):
// each body callback reads its chunk, or everything held since StopIterationAndBuffer; the
// trailers map is readable from its own callback on; the module's property is the stream's
// filter state.
func TestResponseBodyAndTrailers(t *testing.T) {
	const noTrailers = "trailer error status returned by host: bad argument"
	tests := []struct {
		name     string
		mode     string
		chunks   []string
		trailers [][2]string // nil: the last chunk ends the stream
		seen     string      // the probe_body filter state
		sent     string      // what went on to the client after each chunk, and with the trailers
		critical bool
	}{
		{"chunks go on one by one", "body", []string{"ab", "c"}, nil,
			`body 2 false "ab" ok, ` + noTrailers + `; body 1 true "c" ok, ` + noTrailers, `["ab" "c"]`, false},
		{"held chunks are read together and go on together", "hold-body", []string{"ab", "c", "d"}, nil,
			`body 2 false "ab" ok, ` + noTrailers + `; body 3 false "abc" ok, ` + noTrailers +
				`; body 4 true "abcd" ok, ` + noTrailers, `["" "" "abcd"]`, false},
		{"trailers follow the last chunk", "body", []string{"ab"}, [][2]string{{"X-Usage", "42"}},
			`body 2 false "ab" ok, ` + noTrailers + `; trailers 1 "42" ok`, `["ab" ""]`, false},
		{"held data goes on with the trailers", "hold-body", []string{"ab"}, [][2]string{{"x-usage", "7"}},
			`body 2 false "ab" ok, ` + noTrailers + `; trailers 1 "7" ok`, `["" "ab"]`, false},
		{"a panic is logged and the body goes on", "panic-body", []string{"ab", "c"}, nil, "", `["ab" "c"]`, true},
		{"a module without the callbacks' use continues", "", []string{"ab"}, nil, "", `["ab"]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm, _, logs := startProbe(t, tt.mode, nil)
			s, d, err := vm.StartStream(getRoot)
			if err != nil || !d.Continue {
				t.Fatalf("request: %+v %v", d, err)
			}
			if _, err := s.ResponseHeaders(200, nil, false); err != nil {
				t.Fatal(err)
			}
			var sent []string
			for i, chunk := range tt.chunks {
				out, err := s.ForwardResponseBody([]byte(chunk), tt.trailers == nil && i == len(tt.chunks)-1)
				if err != nil {
					t.Fatalf("chunk %d: %v", i, err)
				}
				sent = append(sent, string(out))
			}
			if tt.trailers != nil {
				held, final, err := s.ForwardResponseTrailers(tt.trailers)
				if err != nil || fmt.Sprint(final) != fmt.Sprint(hostcore.LowerKeys(tt.trailers)) {
					t.Fatalf("trailers %v, %v", final, err)
				}
				sent = append(sent, string(held))
			}
			if err := s.Finish(); err != nil {
				t.Fatal(err)
			}
			seen, _ := s.FilterState("probe_body")
			if seen != tt.seen || fmt.Sprintf("%q", sent) != tt.sent {
				t.Errorf("seen %q, sent %v\nwant %q, %s", seen, sent, tt.seen, tt.sent)
			}
			if got := logs.contains("recovered panic in proxy_on_response_body: probe body panic"); got != tt.critical {
				t.Errorf("panic logged: %v, want %v", got, tt.critical)
			}
		})
	}
}

// Do passes the upstream's body in one chunk, and its trailers, through the module.
func TestDoPassesBodyAndTrailers(t *testing.T) {
	vm, _, _ := startProbe(t, "body", nil)
	resp, err := vm.Do(getRoot, func([][2]string) (*Response, error) {
		return &Response{Status: 200, Body: []byte("hello"), Trailers: [][2]string{{"X-Usage", "5"}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != "hello" || fmt.Sprint(resp.Trailers) != "[[x-usage 5]]" {
		t.Fatalf("body %q, trailers %v", resp.Body, resp.Trailers)
	}
}

// What cannot be completed is an error: a module that stops the last chunk (Envoy waits for a
// proxy_continue_stream the host does not serve), a body after the stream ended (Envoy calls
// nothing more; a client that went away mid-body ends the stream this way).
func TestResponseBodyErrors(t *testing.T) {
	t.Run("stopped at the end", func(t *testing.T) {
		vm, _, _ := startProbe(t, "hold-body-end", nil)
		s, _, _ := vm.StartStream(getRoot)
		defer s.Finish()
		if _, err := s.ResponseHeaders(200, nil, false); err != nil {
			t.Fatal(err)
		}
		if out, err := s.ForwardResponseBody([]byte("a"), false); err != nil || len(out) != 0 {
			t.Fatalf("a held chunk: %q, %v", out, err)
		}
		if _, err := s.ForwardResponseBody([]byte("b"), true); !errors.Is(err, hostcore.ErrResponseStoppedAtEnd) {
			t.Fatalf("got %v, want ErrResponseStoppedAtEnd", err)
		}
	})
	t.Run("after the end", func(t *testing.T) {
		vm, _, _ := startProbe(t, "body", nil)
		s, _, _ := vm.StartStream(getRoot)
		if _, err := s.ResponseHeaders(200, nil, false); err != nil {
			t.Fatal(err)
		}
		if err := s.ResponseBody([]byte("a"), false); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := s.ResponseBody([]byte("b"), true); err == nil || !strings.Contains(err.Error(), "has ended") {
			t.Fatalf("a body after the end: %v", err)
		}
		if seen, ok := s.FilterState("probe_body"); ok {
			t.Fatalf("the module saw a last chunk: %q", seen)
		}
	})
}

// envoy context.cc setProperty keeps a property in the stream's info: a root context has none,
// and gets NotFound.
func TestSetPropertyWithoutAStream(t *testing.T) {
	_, _, logs := startProbe(t, "property-in-configure", nil)
	if !logs.contains("probe: set property: error status returned by host: not found") {
		t.Fatalf("logs %v", logs.entries)
	}
}
