package abi

import (
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

type namedStream struct {
	types.DefaultHttpContext
	name string
}

// Streams in sequence use the slot, interleaved ones the map; either way every stream is found,
// with its plugin and its context once set, until it is removed, and removed only once.
func TestStreamTable(t *testing.T) {
	table := streamTable{spilled: map[uint32]streamEntry{}}
	a, b := &namedStream{name: "a"}, &namedStream{name: "b"}
	table.add(1, 7, nil)
	if got, ok := table.get(1); !ok || got != (streamEntry{parent: 7}) || len(table.spilled) != 0 {
		t.Fatalf("get(1) = %+v, %v; spilled %d", got, ok, len(table.spilled))
	}
	table.set(1, streamEntry{parent: 7, ctx: a})
	table.add(2, 7, nil) // 1 is still alive: it moves to the map
	table.add(3, 8, a)
	table.set(2, streamEntry{parent: 7, ctx: b})
	if got, _ := table.get(3); got != (streamEntry{parent: 8, ctx: a}) {
		t.Errorf("get(3) = %+v, want the context it was added with", got)
	}
	table.set(3, streamEntry{done: true})
	table.set(4, streamEntry{parent: 7, ctx: a}) // unknown: not added
	want := map[uint32]streamEntry{1: {parent: 7, ctx: a}, 2: {parent: 7, ctx: b}, 3: {done: true}}
	for id, w := range want {
		if got, ok := table.get(id); !ok || got != w {
			t.Errorf("get(%d) = %+v, %v; want %+v", id, got, ok, w)
		}
	}
	if _, ok := table.get(4); ok {
		t.Error("set added stream 4")
	}
	for _, id := range []uint32{2, 3, 1} {
		if got, ok := table.remove(id); !ok || got != want[id] {
			t.Errorf("remove(%d) = %+v, %v; want %+v", id, got, ok, want[id])
		}
		if _, ok := table.remove(id); ok {
			t.Errorf("remove(%d) found it twice", id)
		}
		if _, ok := table.get(id); ok {
			t.Errorf("get(%d) after remove found it", id)
		}
	}
	if table.id != 0 || len(table.spilled) != 0 {
		t.Errorf("table not empty: slot %d, %d spilled", table.id, len(table.spilled))
	}
	if _, ok := table.get(0); ok {
		t.Error("id 0 found in an empty table")
	}
}
