package plugin

import (
	"slices"
	"strconv"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
)

// heldVM starts the plugin with streams that hold every request for a scripted waiter: the held
// set is tested on its own, whatever feature uses it.
type heldVM struct {
	types.DefaultVMContext
	plugin *pluginContext
	script map[string]*scriptedWaiter // by the request's x-id header
}

func (v *heldVM) NewPluginContext(id uint32) types.PluginContext {
	v.plugin = &pluginContext{}
	return &holdingPlugin{pluginContext: v.plugin, vm: v}
}

type holdingPlugin struct {
	*pluginContext
	vm *heldVM
}

func (p *holdingPlugin) NewHttpContext(id uint32) types.HttpContext {
	return &holdingStream{httpContext: &httpContext{plugin: p.pluginContext, id: id}, vm: p.vm}
}

type holdingStream struct {
	*httpContext
	vm *heldVM
}

// OnHttpRequestHeaders holds the request until its waiter's first due instant, or continues it
// when the held set is full.
func (s *holdingStream) OnHttpRequestHeaders(int, bool) types.Action {
	name, _ := abi.GetHttpRequestHeader("x-id")
	w := s.vm.script[name]
	if !s.plugin.hold(s.httpContext, w.due[0], w) {
		w.refused = true
		return types.ActionContinue
	}
	return types.ActionPause
}

// scriptedWaiter stays held until its last due instant, then goes on (or answers, if told to).
type scriptedWaiter struct {
	due     []int64
	answer  bool
	woken   []int64
	headers []string // the x-id header read at each wake: the effective context was the stream's
	goneAt  []int64
	refused bool
	// then is held in its place on its last wake, as a request that waited for a slot is held
	// for its tokens; order records the wakes of every waiter sharing it.
	then  *scriptedWaiter
	name  string
	order *[]string
}

func (w *scriptedWaiter) wake(h *httpContext, now int64) (wakeResult, int64) {
	w.woken = append(w.woken, now)
	id, _ := abi.GetHttpRequestHeader("x-id")
	w.headers = append(w.headers, id)
	if len(w.woken) < len(w.due) {
		return stillHeld, w.due[len(w.woken)]
	}
	if w.order != nil {
		*w.order = append(*w.order, w.name)
	}
	if w.then != nil && !h.plugin.hold(h, w.then.due[0], w.then) {
		w.then.refused = true
	}
	if w.answer {
		_ = abi.SendLocalReply(429, "test", nil, nil, -1)
		return answered, 0
	}
	return goOn, 0
}

func (w *scriptedWaiter) gone(h *httpContext, now int64) { w.goneAt = append(w.goneAt, now) }

func startHeld(t *testing.T, script map[string]*scriptedWaiter) (*abitest.Host, *heldVM) {
	t.Helper()
	vm := &heldVM{script: script}
	host, st := abitest.Start(t, abitest.Options{VMContext: vm, Configuration: []byte(testConfig), PluginName: "test"})
	if st != types.OnPluginStartStatusOK {
		t.Fatalf("plugin start: %v", st)
	}
	return host, vm
}

// holdRequest delivers the request headers of a new stream with the given x-id.
func holdRequest(host *abitest.Host, name string) (*abitest.Stream, types.Action) {
	return host.Request(abitest.Request{Headers: [][2]string{{"x-id", name}}, EndOfStream: true})
}

func TestHeldRequestsWakeInOrderAtTheirInstants(t *testing.T) {
	a := &scriptedWaiter{due: []int64{100}}
	b := &scriptedWaiter{due: []int64{50}}
	c := &scriptedWaiter{due: []int64{60, 90, 120}} // stays held twice, then goes on
	d := &scriptedWaiter{due: []int64{70}, answer: true}
	e := &scriptedWaiter{due: []int64{300}} // its client goes away first
	script := map[string]*scriptedWaiter{"a": a, "b": b, "c": c, "d": d, "e": e}
	host, vm := startHeld(t, script)
	streams := map[string]*abitest.Stream{}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		var got types.Action
		if streams[name], got = holdRequest(host, name); got != types.ActionPause {
			t.Fatalf("%s: action %v, want the request held", name, got)
		}
	}
	p := vm.plugin
	steps := []struct {
		now      int64
		reset    string   // a client that goes away before the tick
		resumed  []string // the requests that are not held any more after the tick
		held     int
		answered string
	}{
		{now: 40, held: 5},
		{now: 60, resumed: []string{"b"}, held: 4},
		{now: 80, resumed: []string{"b", "d"}, held: 3, answered: "d"},
		{now: 100, resumed: []string{"a", "b", "d"}, held: 2},
		{now: 110, reset: "e", resumed: []string{"a", "b", "d", "e"}, held: 1},
		{now: 120, resumed: []string{"a", "b", "c", "d", "e"}, held: 0},
	}
	for i, s := range steps {
		if s.reset != "" {
			streams[s.reset].End()
		}
		host.CallAsRoot(func() { p.wakeHeld(s.now) })
		if got := p.heldCount(); got != s.held {
			t.Fatalf("step %d (t=%d): %d held, want %d", i, s.now, got, s.held)
		}
		for _, name := range s.resumed {
			if name == "e" || name == s.answered || script[name].answer {
				continue // gone, or answered rather than continued
			}
			if !streams[name].Continued() {
				t.Fatalf("step %d: %s is still stopped, want continued", i, name)
			}
		}
		if s.answered != "" {
			if r := streams[s.answered].Reply(); r == nil || r.Status != 429 || streams[s.answered].Continued() {
				t.Fatalf("step %d: %s answered %+v, want its waiter's 429", i, s.answered, r)
			}
		}
	}
	for name, w := range script {
		for _, got := range w.headers {
			if got != name {
				t.Fatalf("%s was woken with the effective context of %q", name, got)
			}
		}
	}
	if want := []int64{60, 100, 120}; !slices.Equal(c.woken, want) { // the first tick at or after each instant
		t.Fatalf("c woken at %v, want %v (the first tick at or after each instant it asked for)", c.woken, want)
	}
	if len(e.woken) != 0 || len(e.goneAt) != 1 {
		t.Fatalf("e: woken %v, gone %v; want never woken and told once that its client went away", e.woken, e.goneAt)
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		if len(script[name].goneAt) != 0 {
			t.Fatalf("%s was told its client went away after it left the held set", name)
		}
		streams[name].End()
		if len(script[name].goneAt) != 0 {
			t.Fatalf("%s: its stream's end after it went on was taken for a client gone while held", name)
		}
	}
}

func TestHeldSetIsBounded(t *testing.T) {
	script := map[string]*scriptedWaiter{}
	for i := 0; i <= maxHeld; i++ {
		script[strconv.Itoa(i)] = &scriptedWaiter{due: []int64{10}}
	}
	host, vm := startHeld(t, script)
	for i := 0; i <= maxHeld; i++ {
		name := strconv.Itoa(i)
		want := types.ActionPause
		if i == maxHeld {
			want = types.ActionContinue // the test's stream lets a refused request go on
		}
		if _, got := holdRequest(host, name); got != want {
			t.Fatalf("request %d: %v, want %v", i, got, want)
		}
	}
	if !script[strconv.Itoa(maxHeld)].refused || vm.plugin.heldCount() != maxHeld {
		t.Fatalf("held %d; the request past the bound refused: %v", vm.plugin.heldCount(), script[strconv.Itoa(maxHeld)].refused)
	}
	host.CallAsRoot(func() { vm.plugin.wakeHeld(10) })
	if vm.plugin.heldCount() != 0 {
		t.Fatalf("%d still held after their instant", vm.plugin.heldCount())
	}
}

// A waiter that holds its request again (for another waiter) keeps the request's place in the
// held set, even when the set is full, and the first waiter is not told that its client went
// away.
func TestHeldAgainKeepsItsPlace(t *testing.T) {
	var order []string
	script := map[string]*scriptedWaiter{}
	for i := 0; i < maxHeld; i++ {
		name := strconv.Itoa(i)
		script[name] = &scriptedWaiter{due: []int64{20}, name: name, order: &order}
	}
	again := &scriptedWaiter{due: []int64{20}, name: "0 again", order: &order}
	script["0"].due[0], script["0"].then = 10, again
	host, vm := startHeld(t, script)
	streams := make([]*abitest.Stream, maxHeld)
	for i := range streams {
		var got types.Action
		if streams[i], got = holdRequest(host, strconv.Itoa(i)); got != types.ActionPause {
			t.Fatalf("request %d: %v, want held", i, got)
		}
	}
	p := vm.plugin
	host.CallAsRoot(func() { p.wakeHeld(10) })
	if again.refused || p.heldCount() != maxHeld || len(script["0"].goneAt) != 0 {
		t.Fatalf("held again: refused %v, %d held, gone %v; want held in its place", again.refused, p.heldCount(), script["0"].goneAt)
	}
	if streams[0].Continued() {
		t.Fatal("request 0 went on while held again")
	}
	order = nil
	host.CallAsRoot(func() { p.wakeHeld(20) })
	if p.heldCount() != 0 || len(order) != maxHeld || order[0] != "0 again" || order[1] != "1" {
		t.Fatalf("%d still held, woken first %v; want all gone on, request 0 first", p.heldCount(), order[:min(len(order), 2)])
	}
	for i, s := range streams {
		if !s.Continued() {
			t.Fatalf("request %d is still stopped, want continued", i)
		}
	}
}

func TestTickPeriodIsFastOnlyWhenRequestsMayBeHeld(t *testing.T) {
	for _, c := range []struct {
		mayHold bool
		period  uint32
	}{{false, tickPeriod}, {true, heldTickPeriod}} {
		p := &pluginContext{mayHold: c.mayHold}
		if got := p.tickPeriodMilliseconds(); got != c.period {
			t.Fatalf("mayHold %v: period %d ms, want %d", c.mayHold, got, c.period)
		}
	}
}
