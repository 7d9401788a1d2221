package gateway

import (
	"errors"
	"io"
	"net/http"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// moduleBody passes the upstream's response body through the module as the reverse proxy reads
// it, a chunk per read (proxy_on_response_body), and the trailers once the body has ended
// (proxy_on_response_trailers), as Envoy's encoder chain passes them. What goes on to the client
// is what the module lets go: each chunk when it continues, or all it held when it continues
// later. A stream holds the proxy's copy buffer and at most what the module holds (Envoy's
// buffer limit, hostcore.ResponseBufferLimit), whatever the upstream sends. An upstream read
// that fails (the client went away and cancelled it, the upstream reset) makes no body call:
// the stream then just ends (Finish), as a reset stream does in Envoy.
type moduleBody struct {
	stream   *host.Stream
	upstream io.ReadCloser
	resp     *http.Response
	// remaining is what is left of a Content-Length, -1 when the length is unknown.
	remaining int64
	// pending is what the module let go and the reader has not taken yet.
	pending []byte
	// ended: the module has seen the end of the response; err is what the reader gets then.
	ended bool
	err   error
}

func newModuleBody(stream *host.Stream, resp *http.Response) *moduleBody {
	return &moduleBody{stream: stream, upstream: resp.Body, resp: resp, remaining: resp.ContentLength}
}

// Read implements io.Reader.
func (b *moduleBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.ended {
			return 0, b.err
		}
		n, err := b.upstream.Read(p)
		if err != nil && !errors.Is(err, io.EOF) {
			b.ended, b.err = true, err
			return 0, err
		}
		if b.remaining > 0 {
			b.remaining -= int64(n)
		}
		if err := b.pass(p[:n], errors.Is(err, io.EOF)); err != nil {
			b.ended, b.err = true, err
			return 0, err
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

// pass hands one chunk read from the upstream to the module; upstreamEnded is true when the
// upstream has nothing more. The last chunk ends the stream unless trailers follow, which then
// go through the module; an empty chunk ends a response whose end came with no data, as an
// HTTP/1.1 chunked response's last chunk does in Envoy.
func (b *moduleBody) pass(chunk []byte, upstreamEnded bool) error {
	ended := upstreamEnded || (b.remaining == 0 && b.resp.Trailer == nil)
	trailers := b.trailers(ended)
	if len(chunk) > 0 || (ended && trailers == nil) {
		out, err := b.stream.ForwardResponseBody(chunk, ended && trailers == nil)
		if err != nil {
			return err
		}
		b.pending = out
	}
	if ended {
		b.ended, b.err = true, io.EOF
	}
	if trailers == nil {
		return nil
	}
	held, final, err := b.stream.ForwardResponseTrailers(trailers)
	if err != nil {
		return err
	}
	b.pending = append(b.pending, held...)
	clear(b.resp.Trailer)
	for _, t := range final {
		b.resp.Trailer.Add(t[0], t[1])
	}
	return nil
}

// trailers are the upstream's trailers once its body has ended (the client fills them in at the
// end of the body), nil when none came.
func (b *moduleBody) trailers(ended bool) [][2]string {
	if !ended {
		return nil
	}
	return appendHeaders(nil, b.resp.Trailer)
}

// Close implements io.Closer.
func (b *moduleBody) Close() error { return b.upstream.Close() }
