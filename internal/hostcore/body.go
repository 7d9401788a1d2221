package hostcore

import "errors"

// The response body as a filter sees it (envoy source/extensions/common/wasm/context.cc
// encodeData and getBuffer). Envoy calls proxy_on_response_body once per chunk it encodes, with
// end_of_stream true on the last one unless trailers follow (then proxy_on_response_trailers
// comes instead). During the callback proxy_get_buffer_bytes(HTTP_RESPONSE_BODY) reads the chunk
// just delivered; once the callback answered StopIterationAndBuffer (or AndWatermark), Envoy
// holds the data and each later chunk is added to it (encodeData's addEncodedData), so the
// buffer is everything held. Outside the callback the buffer is empty (getBuffer serves a null
// buffer: Ok, no bytes). A stream reset mid-body gets no further body call, only the end of the
// stream (Context::onDestroy: proxy_on_done, proxy_on_delete).

// ResponseBufferLimit is Envoy's default per_connection_buffer_limit_bytes, 1 MiB: the most
// response data a filter may hold before Envoy gives up on the stream (its headers have gone to
// the client by then, so it is reset).
const ResponseBufferLimit = 1 << 20

// Actions of proxy_on_response_body (proxy-wasm's FilterDataStatus).
const (
	DataContinue                  uint32 = 0
	DataStopIterationAndBuffer    uint32 = 1
	DataStopIterationAndWatermark uint32 = 2
	DataStopIterationNoBuffer     uint32 = 3
)

var (
	// ErrResponseHeldTooMuch: the filter held more of the response than ResponseBufferLimit.
	ErrResponseHeldTooMuch = errors.New("the module held more of the response body than Envoy's buffer limit (1 MiB): Envoy resets the stream")
	// ErrResponseStoppedAtEnd: the filter stopped the response's last chunk or its trailers, and
	// only proxy_continue_stream(HTTP_RESPONSE) would let it go on, which the hosts do not serve.
	ErrResponseStoppedAtEnd = errors.New("the module stopped the response at its end: Envoy waits for proxy_continue_stream(HTTP_RESPONSE), which the hosts do not serve")
)

// ResponseBody is a stream's response body between the upstream and the client.
type ResponseBody struct {
	held    []byte
	holding bool
	// heldBefore is len(held) before the chunk being delivered was added to it.
	heldBefore int
	visible    []byte // what proxy_get_buffer_bytes reads; nil outside the body callback
}

// Deliver starts proxy_on_response_body for a chunk from the upstream and returns the buffer's
// length, the callback's body_buffer_length. The chunk is not kept after Settle unless held.
func (b *ResponseBody) Deliver(chunk []byte) int {
	if b.holding {
		b.heldBefore = len(b.held)
		b.held = append(b.held, chunk...)
		b.visible = b.held
	} else {
		b.visible = chunk
	}
	return len(b.visible)
}

// Buffer is what proxy_get_buffer_bytes(HTTP_RESPONSE_BODY) reads now.
func (b *ResponseBody) Buffer() []byte { return b.visible }

// Settle ends the body callback with its action and returns what goes on to the client now: the
// buffer on Continue, nothing when the filter holds it. StopIterationNoBuffer drops the chunk and
// keeps what was held (Envoy leaves it to the filter to inject the chunk again, which the hosts
// do not serve).
func (b *ResponseBody) Settle(action uint32, endOfStream bool) ([]byte, error) {
	visible := b.visible
	b.visible = nil
	switch action {
	case DataContinue:
		b.held, b.holding = nil, false
		return visible, nil
	case DataStopIterationAndBuffer, DataStopIterationAndWatermark:
		if !b.holding {
			b.held, b.holding = append([]byte(nil), visible...), true
		}
		if len(b.held) > ResponseBufferLimit {
			return nil, ErrResponseHeldTooMuch
		}
	default:
		if b.holding {
			b.held = b.held[:b.heldBefore]
		}
	}
	if endOfStream {
		return nil, ErrResponseStoppedAtEnd
	}
	return nil, nil
}

// Release lets the held data go on, as Envoy does when the trailers callback continues.
func (b *ResponseBody) Release() []byte {
	held := b.held
	b.held, b.holding = nil, false
	return held
}

// BufferSlice is what proxy_get_buffer_bytes returns of buf: length bytes from start, clamped
// to its end (proxy-wasm-cpp-host src/exports.cc get_buffer_bytes); a start past the end gives
// nothing.
func BufferSlice(buf []byte, start, length uint64) []byte {
	if start >= uint64(len(buf)) {
		return nil
	}
	return buf[start:min(start+length, uint64(len(buf)))]
}

// FilterStatePrefix is what Envoy puts before the path proxy_set_property names: the property is
// the stream's filter state "wasm.<path>" (context.cc setProperty, CelStateKeyPrefix), which an
// access log prints with %FILTER_STATE(wasm.<path>:PLAIN)%. Without a stream (a root context)
// there is no stream info to keep it in: NotFound.
const FilterStatePrefix = "wasm."

// FilterState is a stream's filter state as proxy_set_property writes it. Envoy's default
// prototype is a mutable bytes value, so a later write replaces an earlier one.
type FilterState map[string]string

// SetProperty stores a property's value under its filter-state name.
func (f *FilterState) SetProperty(path string, value []byte) {
	if *f == nil {
		*f = FilterState{}
	}
	(*f)[FilterStatePrefix+path] = string(value)
}

// Property is the value set for path (the name without "wasm.").
func (f FilterState) Property(path string) (string, bool) {
	v, ok := f[FilterStatePrefix+path]
	return v, ok
}
