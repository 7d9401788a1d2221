package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// Gateway is an http.Handler that runs every request through the module.
type Gateway struct {
	host     *host.Host
	vms      []*host.VM
	next     atomic.Uint64
	upstream *url.URL
	proxy    *httputil.ReverseProxy
	errorLog *log.Logger
	// upstreamTimeout bounds the wait for the upstream's whole response (0: none), like Envoy's
	// route timeout; when it fires the client gets 504.
	upstreamTimeout time.Duration
}

// SetUpstreamTimeout bounds how long a request waits for the upstream's response, from when it is
// sent until the response is complete, as Envoy's route timeout does (15 s there by default):
// a response not begun by then is answered 504 Gateway Timeout, one cut short is reset. 0 waits
// for ever. Call it before serving.
func (g *Gateway) SetUpstreamTimeout(d time.Duration) { g.upstreamTimeout = d }

// New starts workers VMs of the host and returns a gateway in front of upstream.
func New(ctx context.Context, h *host.Host, workers int, upstream *url.URL, errorLog *log.Logger) (*Gateway, error) {
	if workers < 1 {
		return nil, fmt.Errorf("workers must be at least 1, got %d", workers)
	}
	g := newGateway(upstream, errorLog)
	g.host = h
	g.proxy.ModifyResponse = g.responseHeaders
	for i := 0; i < workers; i++ {
		vm, err := h.NewVM(ctx)
		if err != nil {
			return nil, err
		}
		g.vms = append(g.vms, vm)
	}
	return g, nil
}

// NewPassThrough returns a gateway that forwards every request to upstream through the same
// reverse proxy without any filter: the baseline that load tests compare the filter against
// (`tollgate serve --no-filter`).
func NewPassThrough(upstream *url.URL, errorLog *log.Logger) *Gateway {
	return newGateway(upstream, errorLog)
}

func newGateway(upstream *url.URL, errorLog *log.Logger) *Gateway {
	g := &Gateway{upstream: upstream, errorLog: errorLog}
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.logf("upstream %s: %v", upstream, err)
			if errors.Is(err, context.DeadlineExceeded) && g.upstreamTimeout > 0 {
				http.Error(w, "Gateway Timeout: the upstream did not answer within "+g.upstreamTimeout.String(), http.StatusGatewayTimeout)
				return
			}
			http.Error(w, "Bad Gateway: the upstream did not answer", http.StatusBadGateway)
		},
		ErrorLog: errorLog,
		// Each chunk goes to the client as soon as it is read (and through the module): a
		// server-sent event is not held back for the next.
		FlushInterval: -1,
		// As Envoy's router: the request goes with the accept-encoding the filters left it
		// (Go's transport would add gzip to a request without one, and decompress the answer).
		Transport: transportWithoutCompression(),
	}
	return g
}

type streamKey struct{}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(g.vms) == 0 {
		g.forward(w, r) // pass-through: no filter
		return
	}
	vm := g.vms[g.next.Add(1)%uint64(len(g.vms))]
	// The module may hold the request while it asks a rate limit service; a client that goes
	// away meanwhile resets the stream.
	stream, decision, err := vm.StartStreamContext(r.Context(), toHostRequest(r))
	if stream != nil {
		defer g.endStream(r, stream)
	}
	if errors.Is(err, host.ErrStreamReset) {
		return // nobody is left to answer
	}
	if err != nil {
		g.fail(w, err)
		return
	}
	if reply := decision.Reply; reply != nil {
		for _, h := range reply.Headers {
			w.Header().Add(h[0], h[1])
		}
		if w.Header().Get("content-length") == "" {
			w.Header().Set("content-length", strconv.Itoa(len(reply.Body)))
		}
		w.WriteHeader(reply.Status)
		_, _ = w.Write(reply.Body)
		return
	}
	// The module may have changed the request headers; the upstream gets them as it left them.
	out := r.Clone(context.WithValue(r.Context(), streamKey{}, stream))
	out.Header = http.Header{}
	for _, h := range decision.RequestHeaders {
		if !strings.HasPrefix(h[0], ":") {
			out.Header.Add(h[0], h[1])
		}
	}
	g.forward(w, out)
}

// UsageFilterState is the filter state the gateway logs when a stream ends, if the module set
// it (proxy_set_property): what an Envoy access log prints with
// %FILTER_STATE(wasm.tollgate_usage:PLAIN)%.
const UsageFilterState = "tollgate_usage"

// endStream ends the stream however it went (Finish), then logs the usage the module set for it.
func (g *Gateway) endStream(r *http.Request, stream *host.Stream) {
	_ = stream.Finish()
	if usage, ok := stream.FilterState(UsageFilterState); ok {
		g.logf("%s %s: wasm.%s=%s", r.Method, r.URL.RequestURI(), UsageFilterState, usage)
	}
}

// forward proxies r to the upstream, within the upstream timeout.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request) {
	if g.upstreamTimeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), g.upstreamTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	g.proxy.ServeHTTP(w, r)
}

// responseHeaders passes the upstream's response headers through the module.
func (g *Gateway) responseHeaders(resp *http.Response) error {
	stream, _ := resp.Request.Context().Value(streamKey{}).(*host.Stream)
	if stream == nil {
		return errors.New("response without its stream")
	}
	headers := appendHeaders(nil, resp.Header)
	noBody := resp.Body == http.NoBody || resp.ContentLength == 0
	final, err := stream.ResponseHeaders(resp.StatusCode, headers, noBody)
	if errors.Is(err, host.ErrReplacedResponse) {
		reply := stream.LocalReply()
		resp.StatusCode, resp.Status = reply.Status, strconv.Itoa(reply.Status)+" "+http.StatusText(reply.Status)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(reply.Body))
		resp.ContentLength = int64(len(reply.Body))
		final = reply.Headers
		err = nil
	}
	if err != nil {
		return err
	}
	resp.Header = http.Header{}
	for _, h := range final {
		resp.Header.Add(h[0], h[1])
	}
	if !noBody {
		resp.Body = newModuleBody(stream, resp)
	}
	return nil
}

func (g *Gateway) fail(w http.ResponseWriter, err error) {
	g.logf("%v", err)
	if errors.Is(err, host.ErrVMFailed) {
		http.Error(w, "Service Unavailable: the rate limit filter failed", http.StatusServiceUnavailable)
		return
	}
	http.Error(w, "Internal Server Error: "+err.Error(), http.StatusInternalServerError)
}

func (g *Gateway) logf(format string, args ...any) {
	if g.errorLog != nil {
		g.errorLog.Printf(format, args...)
	}
}

// toHostRequest turns a Go request into the header list Envoy gives the filter chain: the
// pseudo-headers first, then every header value as its own entry, names lower-cased.
func toHostRequest(r *http.Request) host.Request {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	headers := appendHeaders([][2]string{
		{":method", r.Method}, {":path", r.URL.RequestURI()}, {":authority", r.Host}, {":scheme", scheme},
	}, r.Header)
	return host.Request{
		Headers:       headers,
		SourceAddress: r.RemoteAddr,
		EndOfStream:   r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0,
	}
}

// transportWithoutCompression is Go's default transport, which sends a request's
// accept-encoding as it is.
func transportWithoutCompression() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	return t
}

// appendHeaders appends every value of h to dst as Envoy's header maps hold them: a pair per
// value, the name lower-cased.
func appendHeaders(dst [][2]string, h http.Header) [][2]string {
	for name, values := range h {
		for _, v := range values {
			dst = append(dst, [2]string{strings.ToLower(name), v})
		}
	}
	return dst
}
