package host

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A request the module holds under a root context with a timer waits for a tick that continues
// or answers it (envoy source/extensions/common/wasm/context.cc continueStream and
// sendLocalResponse, deferred until the tick returns; wasm.cc Wasm::tickHandler); a client that
// goes away first resets it (source/common/http/conn_manager_impl.cc doDeferredStreamDestroy:
// log, then the filters' onDestroy), after which the module's continue finds no such context.
func TestHeldStreamsSettleOnTicks(t *testing.T) {
	t.Run("continued", func(t *testing.T) {
		vm, h, _ := startProbe(t, "hold", nil)
		a, _, heldA, err := vm.OpenStream(getRoot)
		if err != nil || !heldA {
			t.Fatalf("held %v, err %v; want the request held", heldA, err)
		}
		b, _, heldB, _ := vm.OpenStream(getRoot)
		if !heldB || !a.Held() || !b.Held() {
			t.Fatal("both requests should be held")
		}
		if _, err := a.Settled(); !errors.Is(err, ErrStreamHeld) {
			t.Fatalf("settled before any tick: %v", err)
		}
		if err := h.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, s := range []*Stream{a, b} {
			d, err := s.Settled()
			if err != nil || !d.Continue || d.Reply != nil || s.Held() {
				t.Fatalf("after the tick: %+v %v, want the request continued", d, err)
			}
			if err := s.Finish(); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("answered", func(t *testing.T) {
		vm, h, _ := startProbe(t, "hold-answer", nil)
		s, _, held, _ := vm.OpenStream(getRoot)
		if !held {
			t.Fatal("not held")
		}
		if err := h.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		d, err := s.Settled()
		if err != nil || d.Continue || d.Reply == nil || d.Reply.Status != 429 || d.Reply.Header("x-held") != "answered" {
			t.Fatalf("got %+v %v, want the tick's 429 reply", d, err)
		}
	})
	t.Run("reset while held", func(t *testing.T) {
		vm, h, logs := startProbe(t, "hold", nil)
		s, _, held, _ := vm.OpenStream(getRoot)
		if !held {
			t.Fatal("not held")
		}
		if err := s.Reset(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Settled(); !errors.Is(err, ErrStreamReset) {
			t.Fatalf("after the reset: %v, want ErrStreamReset", err)
		}
		if err := h.Tick(context.Background()); err != nil {
			t.Fatalf("tick after the reset: %v", err)
		}
		if !logs.contains("probe: cannot resume stream") || !logs.contains("bad argument") {
			t.Fatal("proxy_set_effective_context for a stream that was reset should answer BadArgument")
		}
	})
	t.Run("continue without the stream's context", func(t *testing.T) {
		vm, h, _ := startProbe(t, "hold-no-context", nil)
		if _, _, held, _ := vm.OpenStream(getRoot); !held {
			t.Fatal("not held")
		}
		err := h.Tick(context.Background())
		if err == nil {
			// The misuse is reported to whoever settles the stream.
			t.Fatal("a continue from a tick without proxy_set_effective_context should be a misuse")
		}
		if !errors.Is(err, ErrMisuse) || !strings.Contains(err.Error(), "without a stream context") {
			t.Fatalf("got %v, want the misuse", err)
		}
	})
	t.Run("no timer, nothing can resume it", func(t *testing.T) {
		vm, _, _ := startProbe(t, "pause", nil)
		if _, _, _, err := vm.OpenStream(getRoot); !errors.Is(err, ErrStreamPaused) {
			t.Fatalf("got %v, want ErrStreamPaused", err)
		}
	})
}
