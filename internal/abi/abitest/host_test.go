package abitest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

func start(t *testing.T, opts abitest.Options) (*abitest.Host, *probe) {
	t.Helper()
	vm := &probe{}
	opts.VMContext = vm
	if opts.Configuration == nil {
		opts.Configuration = []byte("cfg")
	}
	host, st := abitest.Start(t, opts)
	if st != types.OnPluginStartStatusOK {
		t.Fatalf("plugin start: %v", st)
	}
	return host, vm
}

func mode(m string, more ...[2]string) abitest.Request {
	return abitest.Request{Headers: append([][2]string{{":method", "GET"}, {"X-Mode", m}}, more...),
		SourceAddress: "192.0.2.1:5000", EndOfStream: true}
}

// The plugin reads its configuration during the start only, and its name as Envoy serves it.
func TestStartPlugin(t *testing.T) {
	host, vm := start(t, abitest.Options{PluginName: "probe"})
	if vm.plugin.config != "cfg" || vm.plugin.name != "probe" || host.TickPeriod() != 10 {
		t.Fatalf("config %q, name %q, tick period %d", vm.plugin.config, vm.plugin.name, host.TickPeriod())
	}
	host.Tick()
	if vm.plugin.configErr == nil {
		t.Error("the configuration was readable after the start")
	}
}

func TestRefusedConfiguration(t *testing.T) {
	if _, st := abitest.Start(t, abitest.Options{VMContext: &probe{}, Configuration: []byte("refuse")}); st {
		t.Error("a refused configuration started")
	}
}

// What the host observes of each way a request's headers can end.
func TestRequestHeaders(t *testing.T) {
	tests := []struct {
		name      string
		req       abitest.Request
		action    types.Action
		continued bool
		reply     string // status, headers and body of the local reply; "" for none
		forwarded string
		critical  int
	}{
		{"continue, headers changed", mode("go", [2]string{"x-drop", "1"}), types.ActionContinue, true, "",
			"[[:method GET] [x-mode go] [x-source 192.0.2.1:5000]]", 0},
		{"its own context made effective again, headers changed", mode("self", [2]string{"x-drop", "1"}),
			types.ActionContinue, true, "", "[[:method GET] [x-mode self] [x-source 192.0.2.1:5000]]", 0},
		{"a local reply, shaped, through the response phase", mode("reply"), types.ActionPause, false,
			"429 [[retry-after 3] [content-length 9] [content-type text/plain] [x-status-seen 429]] slow down", "", 0},
		{"paused", mode("pause"), types.ActionPause, false, "", "", 0},
		{"a panic, logged and answered by the stream's handler", mode("panic"), types.ActionPause, false,
			"500 [[x-status-seen 500]] ", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, _ := start(t, abitest.Options{})
			s, action := host.Request(tt.req)
			reply := ""
			if r := s.Reply(); r != nil {
				reply = fmt.Sprintf("%d %v %s", r.Status, r.Headers, r.Body)
			}
			forwarded := ""
			if s.Forwarded() != nil {
				forwarded = fmt.Sprint(s.Forwarded())
			}
			if action != tt.action || s.Continued() != tt.continued || reply != tt.reply || forwarded != tt.forwarded {
				t.Errorf("action %v, continued %v, reply %q, forwarded %q\nwant %v, %v, %q, %q",
					action, s.Continued(), reply, forwarded, tt.action, tt.continued, tt.reply, tt.forwarded)
			}
			if got := host.LogsAt(abi.LogLevelCritical); len(got) != tt.critical {
				t.Errorf("critical logs %q, want %d", got, tt.critical)
			}
		})
	}
}

// A panic is logged as the wasip1 build logs it.
func TestPanicIsLogged(t *testing.T) {
	host, _ := start(t, abitest.Options{})
	host.Request(mode("panic"))
	if got := host.LogsAt(abi.LogLevelCritical); len(got) != 1 || got[0] != "tollgate: recovered panic in proxy_on_request_headers: boom" {
		t.Fatalf("critical logs %q", got)
	}
}

// A stream whose context could not be created is answered by the plugin's StreamLossHandler.
func TestStreamLost(t *testing.T) {
	host, vm := start(t, abitest.Options{})
	vm.plugin.loseNext = true
	s, action := host.Request(mode("go"))
	if r := s.Reply(); action != types.ActionPause || r == nil || r.Status != 503 || r.Details != "lost" {
		t.Fatalf("action %v, reply %+v; want the plugin's 503", action, r)
	}
}

// A stream's context is made when its request headers arrive, not when the stream is created; a
// stream whose context could not be made gets no callback of the plugin's after that.
func TestStreamContextMadeWhenReached(t *testing.T) {
	host, vm := start(t, abitest.Options{})
	s := host.NewStream()
	if len(vm.plugin.made) != 0 {
		t.Fatalf("contexts made at the stream's creation: %v", vm.plugin.made)
	}
	s.RequestHeaders(mode("go"))
	s.ResponseHeaders(200, nil)
	s.End()
	want := fmt.Sprint([]uint32{s.ID()})
	if got := fmt.Sprint(vm.plugin.made, vm.plugin.responded, vm.plugin.done); got != want+" "+want+" "+want {
		t.Errorf("made, responded, done: %s; want the stream in each", got)
	}
	vm.plugin.loseNext = true
	lost, _ := host.Request(mode("go"))
	lost.ResponseHeaders(200, nil)
	lost.End()
	if len(vm.plugin.made) != 1 || len(vm.plugin.responded) != 1 || len(vm.plugin.done) != 1 {
		t.Errorf("the lost stream reached the plugin: made %v, responded %v, done %v",
			vm.plugin.made, vm.plugin.responded, vm.plugin.done)
	}
}

// A stream let go (ReleaseStream) gets no more callbacks: neither its response headers nor its
// end reach the plugin. Its context serves the next stream, with no NewHttpContext, and learns
// that stream's id; that stream is the plugin's as any other.
func TestReleasedStream(t *testing.T) {
	host, vm := start(t, abitest.Options{})
	first, _ := host.Request(mode("release"))
	first.ResponseHeaders(200, nil)
	first.End()
	if fmt.Sprint(vm.plugin.kept) != "[true]" || len(vm.plugin.responded) != 0 || len(vm.plugin.done) != 0 {
		t.Fatalf("kept %v, responded %v, done %v; want the context kept, and nothing after", vm.plugin.kept,
			vm.plugin.responded, vm.plugin.done)
	}
	next, _ := host.Request(mode("go"))
	next.ResponseHeaders(200, nil)
	next.End()
	if len(vm.plugin.made) != 1 || vm.plugin.served[1] != vm.plugin.served[0] {
		t.Errorf("made %v; the next stream must get the first one's context", vm.plugin.made)
	}
	want := fmt.Sprint([]uint32{next.ID()})
	if got := fmt.Sprint(vm.plugin.responded, vm.plugin.done); got != want+" "+want {
		t.Errorf("responded, done: %s; want the next stream in each", got)
	}
	if !next.Continued() || next.ID() == first.ID() {
		t.Errorf("next stream %d continued %v", next.ID(), next.Continued())
	}
}

// With streams interleaved, one context is kept for the next stream and the other given back to
// the plugin (ReleaseStream false); a stream created while the kept one waits takes it.
func TestReleasedStreamsInterleaved(t *testing.T) {
	host, vm := start(t, abitest.Options{})
	a, b := host.NewStream(), host.NewStream()
	a.RequestHeaders(mode("release"))
	b.RequestHeaders(mode("release"))
	c := host.NewStream()
	c.RequestHeaders(mode("go"))
	for _, s := range []*abitest.Stream{a, b, c} {
		s.End()
	}
	if got := fmt.Sprint(vm.plugin.kept); got != "[true false]" {
		t.Errorf("kept %s, want the first context only", got)
	}
	if got, want := fmt.Sprint(vm.plugin.made), fmt.Sprint([]uint32{a.ID(), b.ID()}); got != want {
		t.Errorf("made %s, want %s: c takes a's context", got, want)
	}
	if vm.plugin.served[2] != vm.plugin.served[0] || vm.plugin.served[2].id != c.ID() {
		t.Errorf("c ran on another context than a's, or with id %d", vm.plugin.served[2].id)
	}
	if got := fmt.Sprint(vm.plugin.done); got != fmt.Sprint([]uint32{c.ID()}) {
		t.Errorf("done %s, want c only", got)
	}
}

// ReleaseStream does nothing outside a request headers callback.
func TestReleaseStreamOnlyInRequestHeaders(t *testing.T) {
	host, vm := start(t, abitest.Options{})
	var released, kept bool
	host.CallAsRoot(func() { released, kept = abi.ReleaseStream() })
	s, _ := host.Request(mode("go"))
	s.End()
	if released || kept || fmt.Sprint(vm.plugin.done) != fmt.Sprint([]uint32{s.ID()}) {
		t.Errorf("released %v, kept %v, done %v: the stream after must not be let go", released, kept, vm.plugin.done)
	}
}

// A paused request goes on, or is answered, on a later tick, at the clock of that tick; one
// whose client went away is told it ended.
func TestTickResumesPausedRequests(t *testing.T) {
	host, vm := start(t, abitest.Options{})
	goOn, _ := host.Request(mode("pause"))
	late, _ := host.Request(mode("pause-reply"))
	gone, _ := host.Request(mode("pause"))
	gone.End()
	host.Advance(25e6)
	host.Tick()
	if !goOn.Continued() || goOn.ContinuedAt() != abitest.DefaultMonotonic+25e6 || goOn.Reply() != nil {
		t.Errorf("go on: continued %v at %d, reply %+v", goOn.Continued(), goOn.ContinuedAt(), goOn.Reply())
	}
	if r := late.Reply(); late.Continued() || r == nil || r.Status != 504 || string(r.Body) != "late" || r.Details != "held_too_long" {
		t.Errorf("late: continued %v, reply %+v; want a 504", late.Continued(), r)
	}
	if fmt.Sprint(vm.plugin.done) != fmt.Sprint([]uint32{gone.ID()}) || !gone.Ended() {
		t.Errorf("done %v, want the stream that went away only", vm.plugin.done)
	}
}

// gRPC calls: answered, failed, timed out, to a cluster Envoy does not know, or outlived by
// their stream.
func TestGrpcCalls(t *testing.T) {
	tests := []struct {
		name    string
		cluster string
		settle  func(h *abitest.Host, c *abitest.Call, s *abitest.Stream)
		seen    string // what the callback saw
		outcome string
	}{
		{"answered", "svc", func(h *abitest.Host, c *abitest.Call, _ *abitest.Stream) { h.Answer(c.Token, []byte("yes")) },
			"0 yes", "continued"},
		{"failed", "svc", func(h *abitest.Host, c *abitest.Call, _ *abitest.Stream) { h.Fail(c.Token, 8, "exhausted") },
			"8 exhausted", "503 exhausted"},
		{"timed out", "svc", func(h *abitest.Host, c *abitest.Call, _ *abitest.Stream) { h.TimeOut(c.Token) },
			"14 upstream request timeout", "503 upstream request timeout"},
		{"the stream ended first", "svc", func(_ *abitest.Host, _ *abitest.Call, s *abitest.Stream) { s.End() },
			"4294967295 the request ended before the call was answered", "ended"},
		{"an unknown cluster", "elsewhere", nil, "", "500 " + types.ErrorInternalFailure.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, vm := start(t, abitest.Options{GrpcClusters: []string{"svc"}})
			s, action := host.Request(mode("grpc", [2]string{"x-cluster", tt.cluster}))
			if action != types.ActionPause {
				t.Fatalf("action %v", action)
			}
			if tt.settle != nil {
				calls := host.Calls()
				if len(calls) != 1 || calls[0].Cluster != "svc" || calls[0].Service != "svc.S" || string(calls[0].Message) != "ask" ||
					calls[0].TimeoutMilliseconds != 100 || calls[0].Context != s.ID() {
					t.Fatalf("calls %+v", calls)
				}
				tt.settle(host, calls[0], s)
			}
			outcome := "paused"
			switch r := s.Reply(); {
			case r != nil:
				outcome = fmt.Sprintf("%d %s", r.Status, r.Body)
			case s.Continued():
				outcome = "continued"
			case s.Ended():
				outcome = "ended"
			}
			if got := vm.plugin.grpcAnswer[s.ID()]; got != tt.seen || outcome != tt.outcome {
				t.Errorf("the callback saw %q, the stream %q; want %q, %q", got, outcome, tt.seen, tt.outcome)
			}
			if len(host.Calls()) != 0 || abi.PendingGrpcCalls() != 0 {
				t.Errorf("%d calls still pending (%d in the plugin)", len(host.Calls()), abi.PendingGrpcCalls())
			}
		})
	}
}

// Response headers carry :status, and the plugin's changes are what the client gets.
func TestResponseHeaders(t *testing.T) {
	host, vm := start(t, abitest.Options{})
	s, _ := host.Request(mode("go"))
	s.ResponseHeaders(201, [][2]string{{"Content-Type", "text/plain"}})
	if got := fmt.Sprint(s.ResponseHeadersSent()); got != "[[:status 201] [content-type text/plain] [x-status-seen 201]]" {
		t.Fatalf("response headers %s", got)
	}
	// The request's headers are gone after the request phase: Envoy gives no pairs (Ok), so a
	// request header read there is not found (a value read would be BadArgument).
	if err := vm.plugin.lateRead; err != types.ErrorStatusNotFound {
		t.Errorf("a request header read in the response phase: %v, want not found", err)
	}
}

// Until a plugin asks for them (abi.ReadResponseHeaders), response headers go out without a call
// to its streams: the callback answers Continue at once. The stream still ends as usual.
func TestResponseHeadersUnread(t *testing.T) {
	host, vm := start(t, abitest.Options{Configuration: []byte("no-response-headers")})
	s, _ := host.Request(mode("go"))
	s.ResponseHeaders(201, [][2]string{{"Content-Type", "text/plain"}})
	if got := fmt.Sprint(s.ResponseHeadersSent()); got != "[[:status 201] [content-type text/plain]]" {
		t.Fatalf("response headers %s, want them as the upstream sent them", got)
	}
	s.End()
	if len(vm.plugin.done) != 1 {
		t.Errorf("streams done: %v, want the one", vm.plugin.done)
	}
}

// Counters and gauges by name, and logs by level.
func TestMetricsAndLogs(t *testing.T) {
	host, _ := start(t, abitest.Options{LogLevel: abi.LogLevelWarn})
	host.Request(mode("go"))
	s, _ := host.Request(mode("go"))
	if host.Counter("probe.requests") != 2 || !host.Defined("probe.requests") || host.Defined("probe.other") {
		t.Errorf("probe.requests = %d", host.Counter("probe.requests"))
	}
	if v, ok := host.Gauge("probe.in_flight"); !ok || v != int64(s.ID()) {
		t.Errorf("probe.in_flight = %d, %v; want %d", v, ok, s.ID())
	}
	host.CallAsRoot(func() {
		abi.Log(abi.LogLevelInfo, "dropped")
		abi.Log(abi.LogLevelError, "kept")
		if level, _ := abi.GetLogLevel(); level != abi.LogLevelWarn {
			t.Errorf("log level %d", level)
		}
	})
	host.SetLogLevel(abi.LogLevelTrace)
	host.CallAsRoot(func() { abi.Log(abi.LogLevelDebug, "now kept") })
	var lines []string
	for _, l := range host.Logs() {
		lines = append(lines, l.Message)
	}
	if got := strings.Join(lines, "|"); got != "kept|now kept" {
		t.Errorf("logs %q", got)
	}
}

// Continuing a request inside its own request-headers callback is a misuse Envoy mishandles.
func TestMisuseIsReported(t *testing.T) {
	host, _ := start(t, abitest.Options{})
	host.Request(mode("misuse"))
	if m := host.TakeMisuses(); len(m) != 1 || !strings.Contains(m[0], "own proxy_on_request_headers") {
		t.Fatalf("misuses %q", m)
	}
}

// The plugin's shared data is the host's store, with Envoy's CAS rules, in its vm_id.
func TestSharedData(t *testing.T) {
	host, _ := start(t, abitest.Options{VMID: "v"})
	host.CallAsRoot(func() {
		if st := abi.SetSharedData("k", []byte("a"), 0); st != wire.StatusOK {
			t.Fatal(st)
		}
		_, cas, _ := abi.GetSharedData("k")
		if st := abi.SetSharedData("k", []byte("b"), cas+1); st != wire.StatusCasMismatch {
			t.Errorf("a stale CAS: %v", st)
		}
		if st := abi.SetSharedData("k", []byte("c"), 0); st != wire.StatusOK {
			t.Errorf("CAS 0 on an existing key: %v, want it overwritten", st)
		}
	})
	if e := host.SharedData().Entries("v"); string(e["k"]) != "c" {
		t.Fatalf("entries %q", e)
	}
}

// The clocks are the host's, moved by hand.
func TestClocks(t *testing.T) {
	host, _ := start(t, abitest.Options{Monotonic: 5, Wall: 7})
	host.Advance(10)
	host.SetWall(100)
	host.CallAsRoot(func() {
		mono, _ := abi.MonotonicNanos()
		wall, _ := abi.WallNanos()
		if mono != 15 || wall != 100 {
			t.Errorf("monotonic %d, wall %d", mono, wall)
		}
	})
}

// What the plugin reads in the response body and trailers callbacks, and what goes on to the
// client (envoy source/extensions/common/wasm/context.cc encodeData, encodeTrailers, getBuffer):
// each body callback sees its chunk, or everything held since it answered
// StopIterationAndBuffer; the trailers are readable from their own callback on.
func TestResponseBodyAndTrailers(t *testing.T) {
	const noTrailers = "trailer error status returned by host: bad argument"
	tests := []struct {
		name     string
		mode     string
		chunks   []string
		trailers [][2]string // nil: the last chunk ends the stream
		actions  []types.Action
		seen     string // the probe_body property
		sent     string
		critical int
	}{
		{"chunks continue one by one", "go", []string{"ab", "c"}, nil,
			[]types.Action{types.ActionContinue, types.ActionContinue},
			`body 2 false "ab" <nil>, ` + noTrailers + `; body 1 true "c" <nil>, ` + noTrailers, "abc", 0},
		{"held chunks are read together", "hold-body", []string{"ab", "c", "d"}, nil,
			[]types.Action{types.ActionPause, types.ActionPause, types.ActionContinue},
			`body 2 false "ab" <nil>, ` + noTrailers + `; body 3 false "abc" <nil>, ` + noTrailers +
				`; body 4 true "abcd" <nil>, ` + noTrailers, "abcd", 0},
		{"trailers follow the last chunk", "go", []string{"ab"}, [][2]string{{"X-Usage", "42"}},
			[]types.Action{types.ActionContinue, types.ActionContinue},
			`body 2 false "ab" <nil>, ` + noTrailers + `; trailers 1 "42" <nil>, body <nil>`, "ab", 0},
		{"held data goes on after the trailers", "hold-body", []string{"ab"}, [][2]string{{"x-usage", "7"}},
			[]types.Action{types.ActionPause, types.ActionContinue},
			`body 2 false "ab" <nil>, ` + noTrailers + `; trailers 1 "7" <nil>, body <nil>`, "ab", 0},
		{"a panic is logged and the stream continues", "panic-body", []string{"ab", "c"}, nil,
			[]types.Action{types.ActionContinue, types.ActionContinue}, "", "abc", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, _ := start(t, abitest.Options{})
			s, _ := host.Request(mode(tt.mode))
			s.ResponseHeaders(200, nil)
			var actions []types.Action
			for i, chunk := range tt.chunks {
				actions = append(actions, s.ResponseBody([]byte(chunk), tt.trailers == nil && i == len(tt.chunks)-1))
			}
			if tt.trailers != nil {
				actions = append(actions, s.ResponseTrailers(tt.trailers))
			}
			seen, _ := s.FilterState("probe_body")
			if fmt.Sprint(actions) != fmt.Sprint(tt.actions) || seen != tt.seen || string(s.ResponseBodySent()) != tt.sent {
				t.Errorf("actions %v, seen %q, sent %q\nwant %v, %q, %q", actions, seen, s.ResponseBodySent(), tt.actions, tt.seen, tt.sent)
			}
			if got := host.LogsAt(abi.LogLevelCritical); len(got) != tt.critical ||
				(tt.critical > 0 && got[0] != "tollgate: recovered panic in proxy_on_response_body: body boom") {
				t.Errorf("critical logs %q, want %d", got, tt.critical)
			}
			s.End()
		})
	}
}

// A property set outside a stream is NotFound (Envoy keeps it in the stream's info); a stream
// that ended keeps what was set, as Envoy's access log reads it after the stream.
func TestSetProperty(t *testing.T) {
	host, vm := start(t, abitest.Options{})
	if !errors.Is(vm.plugin.propertyErr, types.ErrorStatusNotFound) {
		t.Errorf("a property set at the plugin's start: %v, want NotFound", vm.plugin.propertyErr)
	}
	s, _ := host.Request(mode("go"))
	s.ResponseHeaders(200, nil)
	s.ResponseBody([]byte("x"), true)
	s.End()
	if v, ok := s.FilterState("probe_body"); !ok || !strings.HasPrefix(v, "body 1 true") {
		t.Errorf("filter state %q %v after the stream ended", v, ok)
	}
	if _, ok := s.FilterState("wasm.probe_body"); ok {
		t.Error("the filter state is named with its prefix twice")
	}
}

// A stream reset mid-body (the client went away) gets no last body call: its context is
// deleted, and the plugin's OnHttpStreamDone runs (envoy context.cc onDestroy).
func TestStreamResetMidBody(t *testing.T) {
	host, vm := start(t, abitest.Options{})
	s, _ := host.Request(mode("go"))
	s.ResponseHeaders(200, nil)
	s.ResponseBody([]byte("part"), false)
	s.End()
	if _, ok := s.FilterState("probe_body"); ok || len(vm.plugin.done) != 1 || vm.plugin.done[0] != s.ID() {
		t.Fatalf("done %v, and the plugin saw the end of the body: %v", vm.plugin.done, ok)
	}
}
