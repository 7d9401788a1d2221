// Command glue is the glue probe: Tollgate's own ABI layer (internal/abi) with a plugin that
// decides nothing. Per request it makes the surface probe's crossings (bench/testdata/surface),
// in the same order and with the same values, but each callback reaches it the way it reaches
// Tollgate's plugin: through the ABI layer's exports, with their recovery from panics, their
// scratch arena, their table of stream contexts and the plugin's interfaces. It reads the
// request's headers, the monotonic clock and the key's shared value, and writes the value back
// with the CAS it was read with, or, configured with "reject", answers with Tollgate's 429 for
// the benchmark's limit and remembers the key, answering it again without reading shared data.
// Like the surface probe it takes the key as the last header, without a scan.
//
// What it costs beyond the surface probe, measured in the same host and run (BenchmarkSurface),
// is the price of the ABI layer and of being a proxy-wasm plugin in Go; what Tollgate costs
// beyond it is the price of deciding.
package main

import (
	"unsafe"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

func main() {}

func init() { abi.SetVMContext(&vmContext{}) }

type vmContext struct{ types.DefaultVMContext }

func (*vmContext) NewPluginContext(uint32) types.PluginContext { return &pluginContext{} }

// pluginContext hands every stream the same context: the probe keeps no state per stream.
type pluginContext struct {
	types.DefaultPluginContext
	stream httpContext
}

// reject is whether a key with a value is answered 429, from the plugin's configuration.
var reject bool

func (*pluginContext) OnPluginStart(int) types.OnPluginStartStatus {
	data, err := abi.GetPluginConfiguration()
	reject = err == nil && string(data) == "reject"
	return types.OnPluginStartStatusOK
}

func (p *pluginContext) NewHttpContext(uint32) types.HttpContext { return &p.stream }

type httpContext struct{ types.DefaultHttpContext }

// slotSize is the length of one slot of Tollgate's key table (admission.SlotSize): a row holding
// one bucket, what Tollgate reads and writes for each of the benchmarks' known keys.
const slotSize = 56

// row is the value written for a key without one.
var row [slotSize]byte

// The reply, the surface probe's: Tollgate's for the benchmark's limit.
var (
	replyHeaders = []byte("\x02\x00\x00\x00\x0b\x00\x00\x00\x05\x00\x00\x00\x0c\x00\x00\x00\x19\x00\x00\x00" +
		"retry-after\x0086400\x00content-type\x00text/plain; charset=utf-8\x00")
	replyBody = []byte("Too Many Requests: retry after 86400 s\n")
)

const details = "tollgate_rate_limited"

// keyPrefix makes the shared-data names as long as Tollgate's rows' for the benchmarks' keys (30
// bytes), as the surface probe's.
const keyPrefix = "tollgate/glueabi/"

var keyBuf [256]byte

func (*httpContext) OnHttpRequestHeaders(int, bool) types.Action {
	headers, err := abi.GetHttpRequestHeaders()
	if err != nil {
		return types.ActionContinue
	}
	key := lastValue(headers)
	if _, err := abi.MonotonicNanos(); err != nil {
		return types.ActionContinue
	}
	var seen *uint64
	var h uint64
	if reject {
		if seen, h = answered(key); *seen == h {
			return replied()
		}
	}
	n := copy(keyBuf[:], keyPrefix)
	n += copy(keyBuf[n:], key)
	name := unsafe.String(&keyBuf[0], n) // read by the host during the calls only
	value, cas, st := abi.GetSharedData(name)
	if st != wire.StatusOK {
		abi.SetSharedData(name, row[:], ^uint32(0))
		return types.ActionContinue
	}
	if reject {
		*seen = h
		return replied()
	}
	abi.SetSharedData(name, value, cas)
	return types.ActionContinue
}

// replied answers with Tollgate's 429.
func replied() types.Action {
	_ = abi.SendEncodedLocalReply(429, details, replyHeaders, replyBody, -1)
	return types.ActionPause
}

// The keys answered 429, as the surface probe keeps them.
var answeredKeys [1 << 16]uint64

var spare uint64

// answered is key's place among the keys answered, and key's hash (the surface probe's).
func answered(key []byte) (*uint64, uint64) {
	h := hash(key)
	for i := range uint64(64) {
		p := &answeredKeys[(h+i)%uint64(len(answeredKeys))]
		if *p == h || *p == 0 {
			return p, h
		}
	}
	return &spare, h
}

// hash is FNV-1a of key, never 0.
func hash(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range key {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return h | 1
}

// lastValue is the value of the last header in the ABI's encoding of header pairs (the surface
// probe's).
func lastValue(pairs []byte) []byte {
	if len(pairs) < 12 {
		return nil
	}
	count := int(le32(pairs))
	if count == 0 || 4+8*count > len(pairs) {
		return nil
	}
	size := int(le32(pairs[4+8*count-4:]))
	end := len(pairs) - 1
	if size > end-(4+8*count) {
		return nil
	}
	return pairs[end-size : end]
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
