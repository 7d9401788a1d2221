package hostcore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// Each step delivers a chunk, notes the buffer the callback would read, and settles it with the
// callback's action.
func TestResponseBody(t *testing.T) {
	type step struct {
		chunk  string
		action uint32
		end    bool
		// seen is the buffer during the callback, forward what goes on to the client.
		seen, forward string
		err           error
	}
	big := string(bytes.Repeat([]byte("x"), ResponseBufferLimit))
	tests := []struct {
		name  string
		steps []step
	}{
		{"each chunk continues on its own", []step{
			{"a", DataContinue, false, "a", "a", nil},
			{"b", DataContinue, true, "b", "b", nil},
		}},
		{"held chunks are seen together, then go on together", []step{
			{"a", DataStopIterationAndBuffer, false, "a", "", nil},
			{"b", DataStopIterationAndWatermark, false, "ab", "", nil},
			{"c", DataContinue, true, "abc", "abc", nil},
			{"d", DataContinue, false, "d", "d", nil},
		}},
		{"no buffer drops the chunk and keeps what was held", []step{
			{"a", DataStopIterationAndBuffer, false, "a", "", nil},
			{"b", DataStopIterationNoBuffer, false, "ab", "", nil},
			{"c", DataContinue, false, "ac", "ac", nil},
		}},
		{"stopped on the last chunk, the response waits", []step{
			{"a", DataStopIterationAndBuffer, true, "a", "", ErrResponseStoppedAtEnd},
		}},
		{"held past the limit, the stream is reset", []step{
			{big, DataStopIterationAndBuffer, false, big, "", nil},
			{"x", DataStopIterationAndBuffer, false, big + "x", "", ErrResponseHeldTooMuch},
		}},
	}
	for _, tt := range tests {
		var b ResponseBody
		for i, s := range tt.steps {
			where := fmt.Sprintf("%s, step %d", tt.name, i)
			if n := b.Deliver([]byte(s.chunk)); n != len(s.seen) || string(b.Buffer()) != s.seen {
				t.Errorf("%s: the callback saw %d bytes, want %q", where, n, shorten(s.seen))
			}
			forward, err := b.Settle(s.action, s.end)
			if string(forward) != s.forward || !errors.Is(err, s.err) {
				t.Errorf("%s: forwarded %q, %v; want %q, %v", where, shorten(string(forward)), err, s.forward, s.err)
			}
			if b.Buffer() != nil {
				t.Errorf("%s: the buffer is readable after the callback", where)
			}
		}
	}
}

func shorten(s string) string {
	if len(s) > 20 {
		return fmt.Sprintf("%s… (%d bytes)", s[:20], len(s))
	}
	return s
}

// Held data goes on when the trailers continue.
func TestResponseBodyReleasedByTrailers(t *testing.T) {
	var b ResponseBody
	b.Deliver([]byte("a"))
	if _, err := b.Settle(DataStopIterationAndBuffer, false); err != nil {
		t.Fatal(err)
	}
	if got := b.Release(); string(got) != "a" {
		t.Fatalf("released %q", got)
	}
	b.Deliver([]byte("b"))
	if got := b.Buffer(); string(got) != "b" {
		t.Fatalf("after the release the callback saw %q, want only the new chunk", got)
	}
}

func TestFilterState(t *testing.T) {
	var f FilterState
	if _, ok := f.Property("tollgate_usage"); ok {
		t.Fatal("an empty filter state has a property")
	}
	f.SetProperty("tollgate_usage", []byte("1"))
	f.SetProperty("tollgate_usage", []byte("2"))
	if v, ok := f.Property("tollgate_usage"); !ok || v != "2" || f["wasm.tollgate_usage"] != "2" {
		t.Fatalf("property %q %v, state %v; want the last write under wasm.tollgate_usage", v, ok, f)
	}
}
