package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// probeGateway serves the host's probe module in mode (its "body" modes note what the body and
// trailers callbacks read, and log it when the stream is done) in front of upstream, and returns
// the gateway's URL, the channel of those logs, one per stream, and the gateway's log lines.
func probeGateway(t *testing.T, mode string, upstream http.Handler) (string, <-chan string, <-chan string) {
	t.Helper()
	done, gatewayLog := make(chan string, 16), make(chan string, 64)
	ctx := context.Background()
	h, err := host.New(ctx, testbuild.Module(t, "./internal/host/testdata/probe"), host.Options{
		PluginConfig: []byte(mode),
		Log: func(e host.LogEntry) {
			if seen, ok := strings.CutPrefix(e.Message, "probe: stream done: "); ok {
				done <- seen
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	gw, err := New(ctx, h, 1, target, log.New(lineWriter(gatewayLog), "", 0))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(gw)
	t.Cleanup(front.Close)
	return front.URL, done, gatewayLog
}

// lineWriter sends each line logged to a channel, dropping it if nobody has read the channel's
// many earlier lines.
type lineWriter chan<- string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- strings.TrimSuffix(string(p), "\n"):
	default:
	}
	return len(p), nil
}

// chunkedUpstream writes each chunk and flushes it, waiting before each but the first until the
// test sends on next; it stops early when the request is cancelled, and says so on cancelled.
type chunkedUpstream struct {
	chunks    []string
	next      chan struct{}
	cancelled chan struct{}
	trailer   string // the x-usage trailer, "" for none
}

func (u *chunkedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u.trailer != "" {
		w.Header().Set("Trailer", "X-Usage")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i, chunk := range u.chunks {
		if i > 0 {
			select {
			case <-u.next:
			case <-r.Context().Done():
				close(u.cancelled)
				return
			}
		}
		io.WriteString(w, chunk)
		w.(http.Flusher).Flush()
	}
	if u.trailer != "" {
		w.Header().Set("X-Usage", u.trailer)
	}
}

func newChunkedUpstream(trailer string, chunks ...string) *chunkedUpstream {
	return &chunkedUpstream{chunks: chunks, next: make(chan struct{}), cancelled: make(chan struct{}), trailer: trailer}
}

// Each chunk reaches the client as soon as the upstream sent it, through the module: the
// client reads the first event before the upstream sends the second. The body ends with an
// empty last chunk (the end of a chunked response), or, with trailers, with the trailers
// callback; the client gets the trailers.
func TestBodyStreamsThroughTheModule(t *testing.T) {
	const noTrailer = "trailer error status returned by host: bad argument"
	a := `body 9 false "data: a\n\n" ok, ` + noTrailer + "; "
	tests := []struct {
		name, trailer string
		// seen is what the module may see: the end of the body comes with its last data, or
		// after it in an empty chunk, as the upstream's last chunk and the end arrive.
		seen []string
	}{
		{"without trailers", "", []string{
			a + `body 9 true "data: b\n\n" ok, ` + noTrailer,
			a + `body 9 false "data: b\n\n" ok, ` + noTrailer + `; body 0 true "" ok, ` + noTrailer}},
		{"with trailers", "42", []string{a + `body 9 false "data: b\n\n" ok, ` + noTrailer + `; trailers 1 "42" ok`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upstream := newChunkedUpstream(tt.trailer, "data: a\n\n", "data: b\n\n")
			front, done, gatewayLog := probeGateway(t, "body", upstream)
			resp, err := http.Get(front + "/stream")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			events := bufio.NewReader(resp.Body)
			if line, err := events.ReadString('\n'); err != nil || line != "data: a\n" {
				t.Fatalf("first event %q, %v", line, err)
			}
			upstream.next <- struct{}{} // only now may the second one go
			rest, err := io.ReadAll(events)
			if err != nil || string(rest) != "\ndata: b\n\n" {
				t.Fatalf("rest %q, %v", rest, err)
			}
			if got := resp.Trailer.Get("X-Usage"); got != tt.trailer {
				t.Errorf("trailer x-usage %q, want %q", got, tt.trailer)
			}
			seen := <-done
			if !slices.Contains(tt.seen, seen) {
				t.Errorf("the module saw\n%s\nwant one of\n%s", seen, strings.Join(tt.seen, "\n"))
			}
			// The usage the module set is logged once the stream ended.
			want := fmt.Sprintf("GET /stream: wasm.tollgate_usage=%d", strings.Count(seen, "; ")+1)
			if line := <-gatewayLog; line != want {
				t.Errorf("logged %q, want %q", line, want)
			}
		})
	}
}

// A client that goes away mid-body ends the stream: the upstream's request is cancelled, and the
// module gets no further body call (no last chunk), only the end of the stream.
func TestClientGoneMidBody(t *testing.T) {
	upstream := newChunkedUpstream("", "data: a\n\n", "data: b\n\n")
	front, done, _ := probeGateway(t, "body", upstream)
	resp, err := http.Get(front + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "data: a\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	resp.Body.Close() // before the end of the body: the connection is closed
	<-upstream.cancelled
	const want = `body 9 false "data: a\n\n" ok, trailer error status returned by host: bad argument`
	if seen := <-done; seen != want {
		t.Fatalf("the module saw\n%s\nwant\n%s", seen, want)
	}
}

// A module that holds the whole body is cut off at Envoy's buffer limit: the stream is reset,
// however much the upstream sends.
func TestHeldBodyIsBounded(t *testing.T) {
	front, done, _ := probeGateway(t, "hold-body-end", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 64 { // 4 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	resp, err := http.Get(front + "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if n, err := io.Copy(io.Discard, resp.Body); err == nil {
		t.Fatalf("the client got %d bytes and a complete response", n)
	}
	<-done
}
