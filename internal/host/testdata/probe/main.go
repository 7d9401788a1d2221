// Command probe is a test module for the host: its plugin configuration names a misbehaviour,
// so each host rule can be exercised by a real upstream-Go module.
package main

import (
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

func main() {}

func init() {
	// A proxy_* call other than proxy_log during _initialize is restricted in Envoy.
	if os.Getenv("PROBE_CALL_IN_INIT") != "" {
		_, _, _ = abi.GetSharedData("init")
	}
	abi.SetVMContext(&vmContext{})
}

type vmContext struct{ types.DefaultVMContext }

func (*vmContext) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct {
	types.DefaultPluginContext
	mode string
	held []uint32 // the streams held until the next tick ("hold" modes)
}

func (p *plugin) OnPluginStart(int) types.OnPluginStartStatus {
	abi.ReadResponseBodies()  // the body and trailer modes read them
	abi.ReadResponseHeaders() // and every mode sees the response headers
	cfg, err := abi.GetPluginConfiguration()
	if err != nil || string(cfg) == "reject" {
		abi.Log(abi.LogLevelCritical, "probe: rejecting configuration")
		return types.OnPluginStartStatusFailed
	}
	p.mode = string(cfg)
	if strings.HasPrefix(p.mode, "hold") {
		_ = abi.SetTickPeriod(10)
	}
	if p.mode == "property-in-configure" {
		// A root context has no stream to keep a property in: NotFound.
		if err := abi.SetProperty("probe", []byte("x")); err != nil {
			abi.Log(abi.LogLevelInfo, "probe: set property: "+err.Error())
		}
	}
	if p.mode == "reply-in-configure" {
		// A root context has no stream: Envoy answers Ok and sends nothing.
		_ = abi.SendHttpResponse(418, nil, nil, -1)
	}
	return types.OnPluginStartStatusOK
}

func (p *plugin) NewHttpContext(id uint32) types.HttpContext {
	return &stream{mode: p.mode, id: id, plugin: p}
}

// OnTick lets the held requests go on ("hold"), answers them ("hold-answer"), or continues
// without making any of them the effective context first ("hold-no-context", a misuse).
func (p *plugin) OnTick() {
	for _, id := range p.held {
		if p.mode != "hold-no-context" {
			if err := abi.SetEffectiveContext(id); err != nil {
				abi.Log(abi.LogLevelInfo, "probe: cannot resume stream "+strconv.Itoa(int(id))+": "+err.Error())
				continue
			}
		}
		if p.mode == "hold-answer" {
			_ = abi.SendHttpResponse(429, [][2]string{{"x-held", "answered"}}, nil, -1)
			continue
		}
		_ = abi.ResumeHttpRequest()
	}
	p.held = p.held[:0]
}

type stream struct {
	types.DefaultHttpContext
	mode   string
	id     uint32
	plugin *plugin
	// seen is what each response body and trailers callback read ("body" modes).
	seen []string
}

func (s *stream) OnHttpRequestHeaders(int, bool) types.Action {
	if strings.HasPrefix(s.mode, "grpc") && strings.Contains(s.mode, ":") {
		return s.grpc()
	}
	if code, ok := strings.CutPrefix(s.mode, "reply-grpc:"); ok {
		n, _ := strconv.Atoi(code)
		_ = abi.SendLocalReply(429, "x", [][2]string{{"retry-after", "1"}, {"content-type", "text/plain"}},
			[]byte("Too Many Requests: wait 100%\n"), int32(n))
		return types.ActionPause
	}
	switch s.mode {
	case "hold", "hold-answer", "hold-no-context":
		s.plugin.held = append(s.plugin.held, s.id)
		return types.ActionPause
	case "continue-in-headers":
		// Envoy continues the chain after this callback, which then continues it again.
		_ = abi.ResumeHttpRequest()
	case "reply-twice":
		_ = abi.SendHttpResponse(418, nil, []byte("one"), -1)
		_ = abi.SendHttpResponse(418, nil, []byte("two"), -1)
		return types.ActionPause
	case "details":
		_ = abi.SendLocalReply(418, " a\tb  c\n", nil, nil, -1)
		return types.ActionPause
	case "count-or-trap":
		return s.countOrTrap()
	case "gc":
		// A timer initializes the runtime's netpoller; from then on every collection polls it
		// (poll_oneoff) when it restarts the world.
		time.AfterFunc(time.Hour, func() {})
		runtime.GC()
	case "panic":
		panic("probe panic")
	case "reply-continue":
		// The reply must win even though the callback says Continue.
		_ = abi.SendHttpResponse(418, [][2]string{{"X-Probe", "yes"}}, []byte("teapot"), -1)
	case "pause":
		return types.ActionPause
	case "metric-ids":
		// Envoy's ids: the type in the low two bits, a step of 4 per type.
		var ids []string
		for _, m := range []struct {
			kind abi.MetricType
			name string
		}{{abi.MetricCounter, "a"}, {abi.MetricGauge, "b"}, {abi.MetricCounter, "c"}, {abi.MetricHistogram, "d"}} {
			id, err := abi.DefineMetric(m.kind, m.name)
			if err != nil {
				ids = append(ids, err.Error())
				continue
			}
			ids = append(ids, strconv.Itoa(int(id)))
		}
		port, _ := abi.GetProperty("source", "port")
		_ = abi.SendHttpResponse(200, [][2]string{{"x-ids", strings.Join(ids, ",")}, {"x-port", strconv.Itoa(int(binary.LittleEndian.Uint64(append(port, make([]byte, 8)...))))}}, nil, -1)
	case "echo-source":
		addr, err := abi.GetProperty("source", "address")
		if err != nil {
			addr = []byte("error: " + err.Error())
		}
		_ = abi.SendHttpResponse(200, [][2]string{{"x-source", string(addr)}}, nil, -1)
	}
	return types.ActionContinue
}

func (s *stream) OnHttpResponseHeaders(int, bool) types.Action {
	if s.mode == "continue-late" {
		// The request went on long ago: nothing is stopped.
		_ = abi.ResumeHttpRequest()
	}
	if s.mode == "late-request-read" {
		// Envoy drops the request header map after the request phase: BadArgument from
		// proxy_get_header_map_value (proxy_get_header_map_pairs, which abi's reads use, gives
		// an empty map instead), so this asks the host directly.
		if st := lateRequestHeaderRead(":path"); st != wire.StatusOK {
			_ = abi.AddHttpResponseHeader("x-late-read", abi.StatusError(st).Error())
		}
	}
	return types.ActionContinue
}

// grpc calls the method named by the mode ("grpc:METHOD[:TIMEOUT_MS[:CLUSTER]]") of the test
// service with the request's path as the message, and holds the request. On success the
// response is added to the request as x-echo and the request continues; on failure the status
// and its message are the reply. The token of the call and of the call before are in x-token.
// Variants change what the success callback does: "grpc-late" continues first and then adds
// x-echo (which Envoy refuses), "grpc-continue-reply" continues and then answers 418,
// "grpc-reply-continue" answers 418 and then continues. "grpc-pair:M1:M2" makes two calls:
// the first one answered continues the request, a failure answers 502.
func (s *stream) grpc() types.Action {
	parts := strings.Split(s.mode, ":")
	variant, method, timeout, cluster := parts[0], parts[1], uint32(1000), "rls"
	if variant == "grpc-pair" {
		return s.grpcPair(parts[1], parts[2])
	}
	if len(parts) > 2 {
		n, _ := strconv.Atoi(parts[2])
		timeout = uint32(n)
	}
	if len(parts) > 3 {
		cluster = parts[3]
	}
	path, _ := abi.GetHttpRequestHeader(":path")
	token, err := abi.DispatchGrpcCall(s.id, cluster, "test.Echo", method, [][2]string{{"x-probe", "yes"}}, []byte(path), timeout,
		func(status uint32, message string, response []byte) {
			if status != abi.GrpcStatusOK {
				_ = abi.SendHttpResponse(502, [][2]string{{"x-status", strconv.Itoa(int(status))}, {"x-message", message}}, nil, -1)
				return
			}
			switch variant {
			case "grpc-late":
				_ = abi.ResumeHttpRequest()
				if err := abi.AddHttpRequestHeader("x-echo", string(response)); err != nil {
					abi.Log(abi.LogLevelInfo, "probe: late x-echo: "+err.Error())
				}
			case "grpc-continue-reply":
				_ = abi.ResumeHttpRequest()
				_ = abi.SendHttpResponse(418, nil, []byte("teapot"), -1)
			case "grpc-reply-continue":
				_ = abi.SendHttpResponse(418, nil, []byte("teapot"), -1)
				_ = abi.ResumeHttpRequest()
			default:
				// The held request's headers are still there.
				_ = abi.AddHttpRequestHeader("x-echo", string(response))
				_ = abi.ResumeHttpRequest()
			}
		})
	if err != nil {
		_ = abi.SendHttpResponse(500, [][2]string{{"x-error", err.Error()}}, nil, -1)
		return types.ActionPause
	}
	if method == "Cancel" {
		_ = abi.CancelGrpcCall(token)
		_ = abi.SendHttpResponse(200, [][2]string{{"x-pending", strconv.Itoa(abi.PendingGrpcCalls())}}, nil, -1)
		return types.ActionPause
	}
	_ = abi.AddHttpRequestHeader("x-token", strconv.Itoa(int(token)))
	return types.ActionPause
}

func (s *stream) grpcPair(first, second string) types.Action {
	for _, method := range []string{first, second} {
		_, err := abi.DispatchGrpcCall(s.id, "rls", "test.Echo", method, nil, nil, 5000,
			func(status uint32, message string, response []byte) {
				if status != abi.GrpcStatusOK {
					_ = abi.SendHttpResponse(502, nil, nil, -1)
					return
				}
				_ = abi.ResumeHttpRequest()
			})
		if err != nil {
			_ = abi.SendHttpResponse(500, [][2]string{{"x-error", err.Error()}}, nil, -1)
			return types.ActionPause
		}
	}
	return types.ActionPause
}

// countOrTrap counts the requests in shared data ("hits", a decimal number) and answers the
// count in x-hits; a request for /trap aborts the VM with a fatal error of Go's runtime, which no
// recover catches.
func (s *stream) countOrTrap() types.Action {
	if path, _ := abi.GetHttpRequestHeader(":path"); path == "/trap" {
		var mu sync.Mutex
		mu.Unlock()
	}
	value, cas, st := abi.GetSharedData("hits")
	n := 0
	if st == wire.StatusOK {
		n, _ = strconv.Atoi(string(value))
	}
	n++
	_ = abi.SetSharedData("hits", []byte(strconv.Itoa(n)), cas)
	_ = abi.SendHttpResponse(200, [][2]string{{"x-hits", strconv.Itoa(n)}}, nil, -1)
	return types.ActionPause
}

// OnHttpResponseBody, in the "body" modes, notes the body buffer it reads and whether the
// trailers are readable, and on the last chunk sets the properties (setSeen).
// "hold-body" holds every chunk but the last, "hold-body-end" every chunk, "panic-body" panics.
func (s *stream) OnHttpResponseBody(size int, end bool) types.Action {
	if !strings.Contains(s.mode, "body") {
		return types.ActionContinue
	}
	body, err := abi.GetHttpResponseBody(0, size)
	_, trailerErr := abi.GetHttpResponseTrailer("x-usage")
	s.seen = append(s.seen, "body "+strconv.Itoa(size)+" "+strconv.FormatBool(end)+" "+strconv.Quote(string(body))+
		" "+errText(err)+", trailer "+errText(trailerErr))
	switch {
	case s.mode == "panic-body":
		panic("probe body panic")
	case end:
		s.setSeen()
	}
	if s.mode == "hold-body-end" || (s.mode == "hold-body" && !end) {
		return types.ActionPause
	}
	return types.ActionContinue
}

// OnHttpResponseTrailers, in the "body" modes, notes the x-usage trailer and sets the properties
// (setSeen).
func (s *stream) OnHttpResponseTrailers(n int) types.Action {
	if !strings.Contains(s.mode, "body") {
		return types.ActionContinue
	}
	usage, err := abi.GetHttpResponseTrailer("X-Usage")
	s.seen = append(s.seen, "trailers "+strconv.Itoa(n)+" "+strconv.Quote(usage)+" "+errText(err))
	s.setSeen()
	return types.ActionContinue
}

// setSeen sets the probe_body property to what the callbacks noted, and tollgate_usage (which
// tollgate serve logs) to how many they were.
func (s *stream) setSeen() {
	_ = abi.SetProperty("probe_body", []byte(strings.Join(s.seen, "; ")))
	_ = abi.SetProperty("tollgate_usage", []byte(strconv.Itoa(len(s.seen))))
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// OnHttpStreamDone, in the "body" modes, logs what the body and trailers callbacks read.
func (s *stream) OnHttpStreamDone() {
	if strings.Contains(s.mode, "body") {
		abi.Log(abi.LogLevelInfo, "probe: stream done: "+strings.Join(s.seen, "; "))
	}
}

//go:wasmimport env proxy_get_header_map_value
func proxyGetHeaderMapValue(m abi.MapType, key unsafe.Pointer, keySize uint32, dataPtr, sizePtr unsafe.Pointer) wire.Status

// lateRequestHeaderRead is proxy_get_header_map_value on the request headers, for its status.
func lateRequestHeaderRead(name string) wire.Status {
	var addr, size uint32
	return proxyGetHeaderMapValue(abi.MapRequestHeaders, unsafe.Pointer(unsafe.StringData(name)), uint32(len(name)),
		unsafe.Pointer(&addr), unsafe.Pointer(&size))
}
