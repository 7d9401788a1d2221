// Command glue is the glue probe: Tollgate's own ABI layer (internal/abi) with a plugin that
// decides nothing. Per request it makes the surface probe's crossings (bench/testdata/surface),
// in the same order and with the same values, but each callback reaches it the way it reaches
// Tollgate's plugin: through the ABI layer's exports, with their recovery from panics, their
// scratch arena, their table of stream contexts (each stream let go at its request headers, as
// Tollgate lets go those its lean shape decides) and the plugin's interfaces. It reads the
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

	"github.com/tollgate-proxy/tollgate/bench/testdata/probes"
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

// row is the value written for a key without one.
var row [probes.SlotSize]byte

// The reply, the surface probe's: Tollgate's for the benchmark's limit.
var replyHeaders, replyBody = []byte(probes.ReplyHeaders), []byte(probes.ReplyBody)

// keyPrefix makes the shared-data names as long as Tollgate's rows' for the benchmarks' keys (30
// bytes), as the surface probe's.
const keyPrefix = "tollgate/glueabi/"

var keyBuf [256]byte

func (*httpContext) OnHttpRequestHeaders(int, bool) types.Action {
	abi.ReleaseStream() // nothing is kept per stream: the stream is let go, as Tollgate lets a lean one go
	headers, err := abi.GetHttpRequestHeaders()
	if err != nil {
		return types.ActionContinue
	}
	key := probes.LastValue(headers)
	if _, err := abi.MonotonicNanos(); err != nil {
		return types.ActionContinue
	}
	var seen *uint64
	var h uint64
	if reject {
		if seen, h = probes.Answered(key); *seen == h {
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
	_ = abi.SendEncodedLocalReply(429, probes.Details, replyHeaders, replyBody, -1)
	return types.ActionPause
}
