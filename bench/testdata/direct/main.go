// Command direct is the direct-decision probe: Tollgate's ABI layer (internal/abi), as in the
// glue probe (bench/testdata/glue), with a plugin that decides the benchmarks' requests as any
// limiter of their one rule must, written for that rule in one function. Per request it makes
// the surface probe's crossings, with the same values, and between them: it looks for the key
// among the headers by name, reads the clock, hashes the owner nearly as Tollgate does
// (SipHash-2-4 under a key, of the rule's and limit's prefix and the key, without the key's
// length Tollgate writes before it), answers a key it found too low from its memory while the
// refill cannot admit it, and otherwise reads the key's bucket, takes a token from it (Tollgate's
// limiter.Bucket), looks for the shadow marker among the headers and writes the bucket back with
// the CAS it was read with. A rejection, which never reaches the upstream, looks for no marker,
// as Tollgate's lean shape does not: it looks at the request's content-type (a gRPC request gets
// a gRPC status) and sends the 429 with its Retry-After in seconds, rendered again only when they
// change.
//
// It has none of Tollgate's generality: no other rule, key or algorithm, no key table (a key's
// bucket under a name of its own, as the surface probe's), no counters, no failure modes; a
// request without its key continues undecided, and one it would admit that carries the shadow
// marker continues uncharged, its bucket not written back. Its time over the clocked floor's,
// measured in the same host and run (BenchmarkDirect), is what deciding the benchmarks' requests
// costs on the ABI layer as it is with the decision written directly; Tollgate's time over it,
// what Tollgate's generality and structure add.
package main

import (
	"encoding/binary"
	"strconv"
	"unsafe"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/bench/testdata/probes"
	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/wire"
	"github.com/tollgate-proxy/tollgate/limiter"
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

// bucket is the benchmarks' limit: "admit" takes it from their admitting rule, "reject" from
// their rejecting one (bench/module_test.go, admitConfig and rejectConfig).
var bucket limiter.Bucket

func (*pluginContext) OnPluginStart(int) types.OnPluginStartStatus {
	data, err := abi.GetPluginConfiguration()
	limit := limiter.BucketLimit{Capacity: 1_000_000_000, RefillTokens: 1_000_000_000, RefillInterval: 1_000_000_000}
	if err == nil && string(data) == "reject" {
		limit = limiter.BucketLimit{Capacity: 1, RefillTokens: 1, RefillInterval: 86_400_000_000_000}
	}
	if bucket, err = limiter.NewBucket(limit); err != nil {
		return types.OnPluginStartStatusFailed
	}
	return types.OnPluginStartStatusOK
}

func (p *pluginContext) NewHttpContext(uint32) types.HttpContext { return &p.stream }

type httpContext struct{ types.DefaultHttpContext }

// keyPrefix makes the shared-data names as long as Tollgate's rows' for the benchmarks' keys, as
// the surface and glue probes'.
const keyPrefix = "tollgate/decided/"

var keyBuf [256]byte

// owner is the buffer the owner is hashed in: the rule's name and the limit's index, then the
// key. Tollgate also writes the key's length before it, which keeps a key of several parts from
// reading as another; a key of one part needs no more.
var owner = []byte("per-api-key\x000\x00")

const ownerPrefix = len("per-api-key\x000\x00")

// The hash key: Tollgate's is a secret in shared data, read once at start.
const k0, k1 = 0x62656e6368, 0x5ec2e7

// A slot: a tag, the owner, then the bucket's tokens, credits and instant; as long as
// Tollgate's (probes.SlotSize).
var tag = [8]byte{'T', 'G', 'l', 'p'}

// remembered are the buckets found too low, by owner, in open addressing: every key of the
// benchmarks keeps its place, as each keeps its bucket in Tollgate's memory.
var remembered [1 << 16]rememberedBucket

type rememberedBucket struct {
	owner uint64 // 0: an empty place
	state limiter.BucketState
}

// spare is the place of an owner with none free among the 64 after its hash's (never in the
// benchmarks).
var spare rememberedBucket

// place is o's place among the remembered buckets: its own, or an empty one to take. A bucket
// forgotten (its place emptied) may leave an older copy of the same owner's bucket further on,
// found again once the empty place is taken: an older state of the same bucket, whose refill to
// now is never below the newer one's, so it never rejects what the newer would admit.
func place(o uint64) *rememberedBucket {
	for i := range uint64(64) {
		p := &remembered[(o+i)%uint64(len(remembered))]
		if p.owner == o || p.owner == 0 {
			return p
		}
	}
	return &spare
}

func (*httpContext) OnHttpRequestHeaders(int, bool) types.Action {
	abi.ReleaseStream() // nothing is kept per stream: the stream is let go, as Tollgate lets a lean one go
	headers, err := abi.GetHttpRequestHeaders()
	if err != nil {
		return types.ActionContinue
	}
	key, found := wire.PairsValue(headers, "x-api-key")
	if !found || len(key) == 0 || len(key) > len(keyBuf)-len(keyPrefix) {
		return types.ActionContinue
	}
	now, err := abi.MonotonicNanos()
	if err != nil {
		return types.ActionContinue
	}
	owner = append(owner[:ownerPrefix], key...)
	o := admission.KeyedHash(k0, k1, owner)
	if m := place(o); m.owner == o {
		if _, d := bucket.Take(m.state, now, 1); !d.Allowed {
			return reject(headers, int64(d.RetryAfter))
		}
		m.owner = 0
	}
	n := copy(keyBuf[:], keyPrefix)
	n += copy(keyBuf[n:], key)
	name := unsafe.String(&keyBuf[0], n) // read by the host during the calls only
	value, cas, st := abi.GetSharedData(name)
	var state limiter.BucketState
	if st != wire.StatusOK || len(value) != probes.SlotSize || [8]byte(value) != tag ||
		binary.LittleEndian.Uint64(value[8:]) != o {
		value, cas = make([]byte, probes.SlotSize), ^uint32(0) // a key never seen: a full bucket
		copy(value, tag[:])
		binary.LittleEndian.PutUint64(value[8:], o)
		state = bucket.Initial(now)
	} else {
		state = limiter.BucketState{Tokens: int64(binary.LittleEndian.Uint64(value[16:])),
			Credits: int64(binary.LittleEndian.Uint64(value[24:])), Last: int64(binary.LittleEndian.Uint64(value[32:]))}
	}
	next, d := bucket.Take(state, now, 1)
	if !d.Allowed {
		*place(o) = rememberedBucket{o, state}
		return reject(headers, int64(d.RetryAfter))
	}
	if _, marked := wire.PairsValue(headers, "x-tollgate-shadow-limited"); marked {
		// Looked for only now, as Tollgate does: a rejection never goes upstream.
		return types.ActionContinue
	}
	binary.LittleEndian.PutUint64(value[16:], uint64(next.Tokens))
	binary.LittleEndian.PutUint64(value[24:], uint64(next.Credits))
	binary.LittleEndian.PutUint64(value[32:], uint64(next.Last))
	abi.SetSharedData(name, value, cas)
	return types.ActionContinue
}

// The reply: Tollgate's for the benchmarks' limit, its Retry-After rendered for builtFor seconds.
var (
	builtFor                        int64 = -1
	replyHeaders, replyBody, number []byte
)

// reject sends the 429, its Retry-After the seconds until the bucket can admit the request.
func reject(headers []byte, retryAfter int64) types.Action {
	seconds := retryAfter / 1_000_000_000 // rounded up, at least 1, as Tollgate's
	if seconds*1_000_000_000 < retryAfter || seconds == 0 {
		seconds++
	}
	if seconds != builtFor {
		number = strconv.AppendInt(number[:0], seconds, 10)
		s := string(number)
		replyHeaders = wire.EncodePairs([][2]string{{"retry-after", s}, {"content-type", "text/plain; charset=utf-8"}})
		replyBody = []byte("Too Many Requests: retry after " + s + " s\n")
		builtFor = seconds
	}
	ct, _ := wire.PairsValue(headers, "content-type")
	grpc := len(ct) >= 16 && string(ct[:16]) == "application/grpc" && (len(ct) == 16 || ct[16] == '+')
	status, body := int32(-1), replyBody
	if grpc {
		status, body = int32(config.DefaultGrpcStatus), replyBody[:len(replyBody)-1]
	}
	_ = abi.SendEncodedLocalReply(429, probes.Details, replyHeaders, body, status)
	return types.ActionPause
}
