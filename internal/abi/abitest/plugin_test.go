package abitest_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
)

// probe is a plugin that does what each request's x-mode header says, through internal/abi, so
// that the tests below see the host answer each host call.
type probe struct {
	types.DefaultVMContext
	plugin *probePlugin
}

func (v *probe) NewPluginContext(id uint32) types.PluginContext {
	v.plugin = &probePlugin{id: id, paused: map[uint32]bool{}}
	return v.plugin
}

type probePlugin struct {
	types.DefaultPluginContext
	id         uint32
	config     string
	name       string
	configErr  error // reading the configuration after the start
	paused     map[uint32]bool
	grpcAnswer map[uint32]string // by stream: what its call's callback saw
	done       []uint32
	// made are the streams NewHttpContext made a context for, served the contexts each request
	// headers callback ran on, kept what each ReleaseStream returned, and responded the streams
	// whose response headers reached the plugin.
	made      []uint32
	served    []*probeStream
	kept      []bool
	responded []uint32
	requests  abi.Counter
	inFlight  abi.Gauge
	loseNext  bool // the next NewHttpContext panics
	// propertyErr is what setting a property in the root context (at the start) returned.
	propertyErr error
	// lateRead is what reading a request header in the last response headers' callback gave.
	lateRead error
}

func (p *probePlugin) OnPluginStart(int) types.OnPluginStartStatus {
	abi.ReadResponseBodies() // the body and trailer modes read them
	config, err := abi.GetPluginConfiguration()
	if err != nil || string(config) == "refuse" {
		return types.OnPluginStartStatusFailed
	}
	if string(config) != "no-response-headers" {
		abi.ReadResponseHeaders()
	}
	name, _ := abi.GetProperty("plugin_name")
	p.config, p.name = string(config), string(name)
	p.requests, _ = abi.DefineCounter("probe.requests")
	p.inFlight, _ = abi.DefineGauge("probe.in_flight")
	p.grpcAnswer = map[uint32]string{}
	p.propertyErr = abi.SetProperty("probe_start", []byte("no stream"))
	return types.OnPluginStartStatus(abi.SetTickPeriod(10) == nil)
}

// OnTick continues every paused request, or answers it 504 when it asked for that.
func (p *probePlugin) OnTick() {
	_, p.configErr = abi.GetPluginConfiguration()
	for id := range p.paused {
		if abi.SetEffectiveContext(id) != nil {
			continue
		}
		delete(p.paused, id)
		if mode, _ := abi.GetHttpRequestHeader("x-mode"); mode == "pause-reply" {
			_ = abi.SendLocalReply(504, "held too long", nil, []byte("late"), -1)
			continue
		}
		_ = abi.ResumeHttpRequest()
	}
}

func (p *probePlugin) NewHttpContext(id uint32) types.HttpContext {
	if p.loseNext {
		p.loseNext = false
		panic("no context for you")
	}
	p.made = append(p.made, id)
	return &probeStream{plugin: p, id: id}
}

func (p *probePlugin) OnHttpStreamLost() types.Action {
	_ = abi.SendLocalReply(503, "lost", nil, nil, -1)
	return types.ActionPause
}

type probeStream struct {
	types.DefaultHttpContext
	plugin *probePlugin
	id     uint32
	mode   string
	// seen is what each response body and trailers callback read, in order.
	seen []string
}

func (s *probeStream) OnHttpRequestHeaders(int, bool) types.Action {
	s.id = abi.RequestStreamID() // a context kept by ReleaseStream serves another stream
	s.plugin.served = append(s.plugin.served, s)
	_ = s.plugin.requests.Increment(1)
	_ = s.plugin.inFlight.Set(uint64(s.id))
	mode, _ := abi.GetHttpRequestHeader("x-mode")
	s.mode = strings.Clone(mode)
	switch mode {
	case "reply":
		_ = abi.SendLocalReply(429, "rate limited", [][2]string{{"Retry-After", "3"}}, []byte("slow down"), -1)
		return types.ActionPause
	case "pause", "pause-reply":
		s.plugin.paused[s.id] = true
		return types.ActionPause
	case "grpc":
		return s.callOut()
	case "panic":
		panic(errors.New("boom"))
	case "misuse":
		_ = abi.ResumeHttpRequest()
		return types.ActionPause
	case "release":
		released, kept := abi.ReleaseStream()
		if !released {
			panic("ReleaseStream in a request headers callback did nothing")
		}
		s.plugin.kept = append(s.plugin.kept, kept)
		return types.ActionContinue
	case "self":
		// Its own context made effective again: the headers stay the callback's to change.
		_ = abi.SetEffectiveContext(s.id)
	}
	source, _ := abi.GetProperty("source", "address")
	_ = abi.AddHttpRequestHeader("x-source", string(source))
	_ = abi.RemoveHttpRequestHeader("x-drop")
	return types.ActionContinue
}

func (s *probeStream) callOut() types.Action {
	cluster, _ := abi.GetHttpRequestHeader("x-cluster")
	_, err := abi.DispatchGrpcCall(s.id, cluster, "svc.S", "M", nil, []byte("ask"), 100,
		func(status uint32, message string, response []byte) {
			s.plugin.grpcAnswer[s.id] = strconv.Itoa(int(status)) + " " + message + string(response)
			switch status {
			case abi.GrpcStatusOK:
				_ = abi.ResumeHttpRequest()
			case abi.GrpcStatusStreamEnded:
			default:
				_ = abi.SendLocalReply(503, "", nil, []byte(message), -1)
			}
		})
	if err != nil {
		_ = abi.SendLocalReply(500, "no call", nil, []byte(err.Error()), -1)
	}
	return types.ActionPause
}

func (s *probeStream) OnHttpRequestHeadersPanic() types.Action {
	_ = abi.SendLocalReply(500, "panic", nil, nil, -1)
	return types.ActionPause
}

func (s *probeStream) OnHttpResponseHeaders(int, bool) types.Action {
	s.plugin.responded = append(s.plugin.responded, s.id)
	_, s.plugin.lateRead = abi.GetHttpRequestHeader("x-mode")
	status, err := abi.GetHttpResponseStatus()
	if err == nil {
		_ = abi.ReplaceHttpResponseHeader("x-status-seen", strconv.Itoa(status))
	}
	return types.ActionContinue
}

func (s *probeStream) OnHttpStreamDone() { s.plugin.done = append(s.plugin.done, s.id) }

// OnHttpResponseBody notes the body buffer and whether the trailers are readable; "hold-body"
// holds every chunk but the last, "panic-body" panics. The last callback sets the probe_body
// property to everything noted.
func (s *probeStream) OnHttpResponseBody(size int, end bool) types.Action {
	body, err := abi.GetHttpResponseBody(0, size)
	_, trailerErr := abi.GetHttpResponseTrailer("x-usage")
	s.seen = append(s.seen, fmt.Sprintf("body %d %v %q %v, trailer %v", size, end, body, err, trailerErr))
	if s.mode == "panic-body" {
		panic("body boom")
	}
	if end {
		_ = abi.SetProperty("probe_body", []byte(strings.Join(s.seen, "; ")))
	}
	if s.mode == "hold-body" && !end {
		return types.ActionPause
	}
	return types.ActionContinue
}

// OnHttpResponseTrailers notes the x-usage trailer and sets the probe_body property.
func (s *probeStream) OnHttpResponseTrailers(n int) types.Action {
	usage, err := abi.GetHttpResponseTrailer("X-Usage")
	_, bodyErr := abi.GetHttpResponseBody(0, 10)
	s.seen = append(s.seen, fmt.Sprintf("trailers %d %q %v, body %v", n, usage, err, bodyErr))
	_ = abi.SetProperty("probe_body", []byte(strings.Join(s.seen, "; ")))
	return types.ActionContinue
}
