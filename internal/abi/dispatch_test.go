package abi

import (
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

type namedStream struct {
	types.DefaultHttpContext
	name string
}

// Streams in sequence use the slot, interleaved ones the map; either way every stream is found
// until it is removed, and removed only once.
func TestStreamTable(t *testing.T) {
	table := streamTable{spilled: map[uint32]types.HttpContext{}}
	a, b, c := &namedStream{name: "a"}, &namedStream{name: "b"}, &namedStream{name: "c"}
	table.add(1, a)
	if got, ok := table.get(1); !ok || got != a || len(table.spilled) != 0 {
		t.Fatalf("get(1) = %v, %v; spilled %d", got, ok, len(table.spilled))
	}
	table.add(2, b) // 1 is still alive: it moves to the map
	table.add(3, c)
	for id, want := range map[uint32]*namedStream{1: a, 2: b, 3: c} {
		if got, ok := table.get(id); !ok || got != want {
			t.Errorf("get(%d) = %v, %v; want %s", id, got, ok, want.name)
		}
	}
	for _, id := range []uint32{2, 3, 1} {
		if _, ok := table.remove(id); !ok {
			t.Errorf("remove(%d) found nothing", id)
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
