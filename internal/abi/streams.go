package abi

import "github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

// streamTable maps stream context ids to their contexts. Envoy usually runs a stream's callbacks
// one after the other (create, request headers, response headers, delete), so the newest stream
// sits in a slot of its own and costs no map operation; when another stream is created while it
// is alive, it moves to the map.
type streamTable struct {
	id      uint32 // 0: the slot is empty (context ids start at 1)
	ctx     types.HttpContext
	spilled map[uint32]types.HttpContext
}

func (t *streamTable) add(id uint32, ctx types.HttpContext) {
	if t.id != 0 {
		t.spilled[t.id] = t.ctx
	}
	t.id, t.ctx = id, ctx
}

func (t *streamTable) get(id uint32) (types.HttpContext, bool) {
	if id != 0 && id == t.id {
		return t.ctx, true
	}
	ctx, ok := t.spilled[id]
	return ctx, ok
}

// remove deletes a stream and returns its context.
func (t *streamTable) remove(id uint32) (types.HttpContext, bool) {
	if id != 0 && id == t.id {
		ctx := t.ctx
		t.id, t.ctx = 0, nil
		return ctx, true
	}
	ctx, ok := t.spilled[id]
	if ok {
		delete(t.spilled, id)
	}
	return ctx, ok
}
