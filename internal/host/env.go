package host

import (
	"strings"

	"github.com/tetratelabs/wazero/api"

	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// envFuncs are the env imports cpp-host registers for ABI 0.2.x (include/proxy-wasm/exports.h)
// plus Envoy's own. Each returns a proxy_status_t in stack[0].
func envFuncs() []hostFunc {
	unimplemented := func(vm *VM, stack []uint64) { stack[0] = uint64(wire.StatusUnimplemented) }
	f := func(name string, params []api.ValueType, fn func(vm *VM, stack []uint64)) hostFunc {
		return hostFunc{module: "env", name: name, params: params, results: errno, fn: fn}
	}
	return []hostFunc{
		f("proxy_log", sig(i32, i32, i32), proxyLog),
		f("proxy_get_log_level", sig(i32), proxyGetLogLevel).onlyABI("0_2_1"),
		f("proxy_get_status", sig(i32, i32, i32), proxyGetStatus),
		f("proxy_set_property", sig(i32, i32, i32, i32), proxySetProperty),
		f("proxy_get_property", sig(i32, i32, i32, i32), proxyGetProperty),
		f("proxy_send_local_response", sig(i32, i32, i32, i32, i32, i32, i32, i32), proxySendLocalResponse),
		f("proxy_get_shared_data", sig(i32, i32, i32, i32, i32), proxyGetSharedData),
		f("proxy_set_shared_data", sig(i32, i32, i32, i32, i32), proxySetSharedData),
		f("proxy_register_shared_queue", sig(i32, i32, i32), unimplemented),
		f("proxy_resolve_shared_queue", sig(i32, i32, i32, i32, i32), unimplemented),
		f("proxy_dequeue_shared_queue", sig(i32, i32, i32), unimplemented),
		f("proxy_enqueue_shared_queue", sig(i32, i32, i32), unimplemented),
		f("proxy_get_header_map_value", sig(i32, i32, i32, i32, i32), proxyGetHeaderMapValue),
		f("proxy_add_header_map_value", sig(i32, i32, i32, i32, i32), proxyAddHeaderMapValue),
		f("proxy_replace_header_map_value", sig(i32, i32, i32, i32, i32), proxyReplaceHeaderMapValue),
		f("proxy_remove_header_map_value", sig(i32, i32, i32), proxyRemoveHeaderMapValue),
		f("proxy_get_header_map_pairs", sig(i32, i32, i32), proxyGetHeaderMapPairs),
		f("proxy_set_header_map_pairs", sig(i32, i32, i32), proxySetHeaderMapPairs),
		f("proxy_get_header_map_size", sig(i32, i32), proxyGetHeaderMapSize),
		f("proxy_get_buffer_status", sig(i32, i32, i32), proxyGetBufferStatus),
		f("proxy_get_buffer_bytes", sig(i32, i32, i32, i32, i32), proxyGetBufferBytes),
		f("proxy_set_buffer_bytes", sig(i32, i32, i32, i32, i32), func(vm *VM, stack []uint64) { stack[0] = uint64(wire.StatusBadArgument) }),
		f("proxy_http_call", sig(i32, i32, i32, i32, i32, i32, i32, i32, i32, i32), unimplemented),
		f("proxy_grpc_call", sig(i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32), proxyGrpcCall),
		f("proxy_grpc_stream", sig(i32, i32, i32, i32, i32, i32, i32, i32, i32), unimplemented),
		f("proxy_grpc_send", sig(i32, i32, i32, i32), unimplemented),
		f("proxy_grpc_close", sig(i32), proxyGrpcCancel),
		f("proxy_grpc_cancel", sig(i32), proxyGrpcCancel),
		f("proxy_set_tick_period_milliseconds", sig(i32), proxySetTickPeriodMilliseconds),
		f("proxy_get_current_time_nanoseconds", sig(i32), proxyGetCurrentTimeNanoseconds),
		f("proxy_define_metric", sig(i32, i32, i32, i32), proxyDefineMetric),
		f("proxy_increment_metric", sig(i32, i64), proxyIncrementMetric),
		f("proxy_record_metric", sig(i32, i64), proxyRecordMetric),
		f("proxy_get_metric", sig(i32, i32), proxyGetMetric),
		f("proxy_set_effective_context", sig(i32), proxySetEffectiveContext),
		f("proxy_done", sig(), func(vm *VM, stack []uint64) { stack[0] = uint64(wire.StatusNotFound) }),
		f("proxy_call_foreign_function", sig(i32, i32, i32, i32, i32, i32), unimplemented),
		f("proxy_continue_stream", sig(i32), proxyContinueStream),
		f("proxy_close_stream", sig(i32), unimplemented),
		f("envoy_resolve_dns", sig(i32, i32, i32), unimplemented),
		f("pthread_equal", sig(i32, i32), func(vm *VM, stack []uint64) { stack[0] = boolArg(uint32(stack[0]) == uint32(stack[1])) }),
		{module: "env", name: "emscripten_notify_memory_growth", params: sig(i32), fn: func(vm *VM, stack []uint64) {}},
	}
}

func (f hostFunc) onlyABI(v string) hostFunc { f.abi = v; return f }

func ret(stack []uint64, st wire.Status) { stack[0] = uint64(st) }

// proxy_log(level, msg_ptr, msg_size); levels above critical are BadArgument.
func proxyLog(vm *VM, stack []uint64) {
	level, ptr, size := uint32(stack[0]), uint32(stack[1]), uint32(stack[2])
	if level > 5 {
		ret(stack, wire.StatusBadArgument)
		return
	}
	msg, ok := vm.readString(ptr, size)
	if !ok {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	vm.host.log(vm.id, level, msg)
	ret(stack, wire.StatusOK)
}

func proxyGetLogLevel(vm *VM, stack []uint64) {
	if !vm.writeU32(uint32(stack[0]), vm.host.opts.LogLevel) {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	ret(stack, wire.StatusOK)
}

// proxy_get_property(path_ptr, path_size, value_ptr_ptr, value_size_ptr): path segments joined by
// NUL; unknown → NotFound; integers are 8 bytes little-endian (envoy context.cc serializeValue).
func proxyGetProperty(vm *VM, stack []uint64) {
	ptr, size, valuePtrPtr, valueSizePtr := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	path, ok := vm.readString(ptr, size)
	if !ok {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	segments := strings.Split(strings.TrimSuffix(path, "\x00"), "\x00")
	if fault := vm.host.propertyFault.Load(); fault != nil {
		if st := (*fault)(segments); st != wire.StatusOK {
			ret(stack, st)
			return
		}
	}
	value, found := vm.property(segments)
	if !found {
		ret(stack, wire.StatusNotFound)
		return
	}
	ret(stack, vm.copyOut(value, valuePtrPtr, valueSizePtr))
}

func (vm *VM) property(path []string) ([]byte, bool) {
	opts := vm.host.opts
	plugin := hostcore.PluginAttributes{PluginName: opts.PluginName, RootID: opts.RootID, VMID: opts.VMID}
	s := vm.current
	if s == nil {
		return hostcore.Property(path, plugin, nil)
	}
	return hostcore.Property(path, plugin, &hostcore.StreamAttributes{Headers: s.requestHeaders,
		SourceAddress: s.req.SourceAddress, DestinationAddress: s.req.DestinationAddress, Extra: s.req.Attributes})
}

// proxy_send_local_response(status, details, details_size, body, body_size, headers,
// headers_size, grpc_status): recorded and sent after the callback returns. Malformed header
// pairs count as no headers, as in cpp-host (src/exports.cc send_local_response). Envoy answers Ok
// even when it will send nothing (envoy context.cc sendLocalResponse needs the stream's decoder
// callbacks): the host answers Ok too and reports the misuse.
func proxySendLocalResponse(vm *VM, stack []uint64) {
	status := uint32(stack[0])
	details, ok1 := vm.readString(uint32(stack[1]), uint32(stack[2]))
	body, ok2 := vm.read(uint32(stack[3]), uint32(stack[4]))
	rawHeaders, ok3 := vm.read(uint32(stack[5]), uint32(stack[6]))
	if !ok1 || !ok2 || !ok3 {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	ret(stack, wire.StatusOK)
	s := vm.current
	switch {
	case s == nil:
		vm.misuse("proxy_send_local_response without a stream context: Envoy answers Ok and sends nothing, " +
			"and the request waits (call proxy_set_effective_context with the stream's id first)")
		return
	case s.finished:
		// While the stream ends (log, done, delete) the reply cannot be sent any more; Envoy
		// notes this is safe (context.cc sendLocalResponse).
		return
	case s.responseStarted || s.reply != nil:
		vm.misuse("proxy_send_local_response after the response started: Envoy can only reset the stream " +
			"(source/common/http/filter_manager.cc sendLocalReply)")
		return
	}
	s.reply = &hostcore.LocalReply{Status: status, Headers: hostcore.DecodeHeaders(rawHeaders), Body: body,
		GrpcStatus: uint32(stack[7]), Details: hostcore.EnvoyDetails(details)}
}

// proxy_get_shared_data(key, key_size, value_ptr_ptr, value_size_ptr, cas_ptr).
func proxyGetSharedData(vm *VM, stack []uint64) {
	key, ok := vm.readString(uint32(stack[0]), uint32(stack[1]))
	if !ok {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	value, cas, st := vm.host.opts.SharedData.AppendValue(vm.shared[:0], vm.host.opts.VMID, key)
	if st != wire.StatusOK {
		ret(stack, st)
		return
	}
	vm.shared = value
	if st := vm.copyOut(value, uint32(stack[2]), uint32(stack[3])); st != wire.StatusOK {
		ret(stack, st)
		return
	}
	if !vm.writeU32(uint32(stack[4]), cas) {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	ret(stack, wire.StatusOK)
}

// proxy_set_shared_data(key, key_size, value, value_size, cas).
func proxySetSharedData(vm *VM, stack []uint64) {
	key, value, ok := vm.readNameValue(stack)
	if !ok {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	ret(stack, vm.host.opts.SharedData.Set(vm.host.opts.VMID, key, value, uint32(stack[4])))
}

// headerMap returns the map a call addresses, if the current callback may use it
// (hostcore.MapAccess): none without a stream context.
func (vm *VM) headerMap(mapType uint32, write bool) (*[][2]string, wire.Status) {
	access, maps := vm.mapAccess()
	return access.HeaderMap(mapType, write, maps)
}

// mapAccess is the current stream's access to its header maps, and the maps; the zero access, to
// none, without a stream context.
func (vm *VM) mapAccess() (hostcore.MapAccess, hostcore.StreamMaps) {
	if s := vm.current; s != nil {
		return s.access, s.maps()
	}
	return hostcore.MapAccess{}, hostcore.StreamMaps{}
}

// proxy_get_header_map_value(map, key, key_size, value_ptr_ptr, value_size_ptr): the first value;
// NotFound when absent.
func proxyGetHeaderMapValue(vm *VM, stack []uint64) {
	m, key, ok := vm.headerMapKey(stack, false)
	if !ok {
		return
	}
	v, found := hostcore.HeaderValue(*m, key)
	if !found {
		ret(stack, wire.StatusNotFound)
		return
	}
	ret(stack, vm.copyOut([]byte(v), uint32(stack[3]), uint32(stack[4])))
}

// headerMapKey returns the map a call (map, key, key_size, ...) addresses and its key in lower
// case; when either is unavailable it answers the call's status and reports false.
func (vm *VM) headerMapKey(stack []uint64, write bool) (*[][2]string, string, bool) {
	m, st := vm.headerMap(uint32(stack[0]), write)
	if st != wire.StatusOK {
		ret(stack, st)
		return nil, "", false
	}
	key, ok := vm.readString(uint32(stack[1]), uint32(stack[2]))
	if !ok {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return nil, "", false
	}
	return m, hostcore.Lower(key), true
}

func proxyAddHeaderMapValue(vm *VM, stack []uint64) {
	editHeaderMapValue(vm, stack, hostcore.AddHeader)
}

func proxyReplaceHeaderMapValue(vm *VM, stack []uint64) {
	editHeaderMapValue(vm, stack, hostcore.ReplaceHeader)
}

// editHeaderMapValue applies edit to the writable map a call addresses, with the key and value
// it names: proxy_{add,replace}_header_map_value(map, key, key_size, value, value_size).
func editHeaderMapValue(vm *VM, stack []uint64, edit func(headers [][2]string, key, value string) [][2]string) {
	m, key, ok := vm.headerMapKey(stack, true)
	if !ok {
		return
	}
	value, ok := vm.readString(uint32(stack[3]), uint32(stack[4]))
	if !ok {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	*m = edit(*m, key, value)
	ret(stack, wire.StatusOK)
}

func proxyRemoveHeaderMapValue(vm *VM, stack []uint64) {
	m, key, ok := vm.headerMapKey(stack, true)
	if !ok {
		return
	}
	*m = hostcore.RemoveHeader(*m, key)
	ret(stack, wire.StatusOK)
}

// proxy_get_header_map_pairs(map, ptr_ptr, size_ptr): an unavailable map is an empty result, Ok
// (hostcore.PairsMap), where proxy_get_header_map_value answers BadArgument.
func proxyGetHeaderMapPairs(vm *VM, stack []uint64) {
	if fault := vm.host.pairsFault.Load(); fault != nil {
		if st := (*fault)(uint32(stack[0])); st != wire.StatusOK {
			ret(stack, st)
			return
		}
	}
	access, maps := vm.mapAccess()
	m, st := access.PairsMap(uint32(stack[0]), maps)
	switch {
	case st != wire.StatusOK:
		ret(stack, st)
		return
	case m == nil:
		ret(stack, vm.copyOut(nil, uint32(stack[1]), uint32(stack[2])))
		return
	}
	vm.pairs = wire.AppendPairs(vm.pairs[:0], *m)
	ret(stack, vm.copyOut(vm.pairs, uint32(stack[1]), uint32(stack[2])))
}

func proxySetHeaderMapPairs(vm *VM, stack []uint64) {
	m, st := vm.headerMap(uint32(stack[0]), true)
	if st != wire.StatusOK {
		ret(stack, st)
		return
	}
	raw, ok := vm.read(uint32(stack[1]), uint32(stack[2]))
	if !ok {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	// cpp-host treats malformed pairs as an empty map, which then replaces the headers.
	*m = hostcore.DecodeHeaders(raw)
	ret(stack, wire.StatusOK)
}

// proxy_get_header_map_size(map, size_ptr): Envoy reports the map's byte size.
func proxyGetHeaderMapSize(vm *VM, stack []uint64) {
	m, st := vm.headerMap(uint32(stack[0]), false)
	if st != wire.StatusOK {
		ret(stack, st)
		return
	}
	size := 0
	for _, h := range *m {
		size += len(h[0]) + len(h[1])
	}
	if !vm.writeU32(uint32(stack[1]), uint32(size)) {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	ret(stack, wire.StatusOK)
}

// buffer returns the bytes of a buffer type available now: the VM configuration always, the
// plugin configuration only during proxy_on_configure, the response body (hostcore.ResponseBody:
// empty outside its callback, as Envoy serves a null buffer). No request body is emulated.
func (vm *VM) buffer(bufferType uint32) ([]byte, wire.Status) {
	switch {
	case bufferType > 8:
		return nil, wire.StatusBadArgument
	case bufferType == 1:
		if s := vm.current; s != nil {
			return s.body.Buffer(), wire.StatusOK
		}
		return nil, wire.StatusOK
	case bufferType == 6:
		return vm.host.opts.VMConfig, wire.StatusOK
	case bufferType == 7 && vm.configuring:
		return vm.pluginConfig, wire.StatusOK
	case bufferType == 5 && vm.grpc.hasMessage:
		return vm.grpc.message, wire.StatusOK
	}
	return nil, wire.StatusNotFound
}

func proxyGetBufferStatus(vm *VM, stack []uint64) {
	buf, st := vm.buffer(uint32(stack[0]))
	if st != wire.StatusOK {
		ret(stack, st)
		return
	}
	if !vm.writeU32(uint32(stack[1]), uint32(len(buf))) || !vm.writeU32(uint32(stack[2]), 0) {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	ret(stack, wire.StatusOK)
}

// proxy_get_buffer_bytes(type, start, length, ptr_ptr, size_ptr): clamped to the buffer; a start
// past the end gives an empty result.
func proxyGetBufferBytes(vm *VM, stack []uint64) {
	buf, st := vm.buffer(uint32(stack[0]))
	if st != wire.StatusOK {
		ret(stack, st)
		return
	}
	buf = hostcore.BufferSlice(buf, uint64(uint32(stack[1])), uint64(uint32(stack[2])))
	ret(stack, vm.copyOut(buf, uint32(stack[3]), uint32(stack[4])))
}

func proxyGetCurrentTimeNanoseconds(vm *VM, stack []uint64) {
	if !vm.writeU64(uint32(stack[0]), uint64(vm.host.opts.Clock.Wall())) {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	ret(stack, wire.StatusOK)
}

// proxy_define_metric(type, name, name_size, id_ptr): ids are per VM, the type in the low two
// bits, a step of 4 (cpp-host kMetricIdIncrement); one name is one stat across VMs.
func proxyDefineMetric(vm *VM, stack []uint64) {
	kind := uint32(stack[0])
	if kind > 2 {
		ret(stack, wire.StatusBadArgument)
		return
	}
	name, ok := vm.readString(uint32(stack[1]), uint32(stack[2]))
	if !ok {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	vm.nextMetric[kind]++
	id := vm.nextMetric[kind]*4 + kind
	vm.metricIDs[id] = vm.host.metrics.define(MetricType(kind), name)
	if !vm.writeU32(uint32(stack[3]), id) {
		ret(stack, wire.StatusInvalidMemoryAccess)
		return
	}
	ret(stack, wire.StatusOK)
}

func proxyIncrementMetric(vm *VM, stack []uint64) {
	m, ok := vm.metricIDs[uint32(stack[0])]
	delta := int64(stack[1])
	switch {
	case !ok:
		ret(stack, wire.StatusNotFound)
	case m.kind == Histogram, m.kind == Counter && delta <= 0:
		ret(stack, wire.StatusBadArgument)
	default:
		vm.host.metrics.add(m, delta)
		ret(stack, wire.StatusOK)
	}
}

func proxyRecordMetric(vm *VM, stack []uint64) {
	m, ok := vm.metricIDs[uint32(stack[0])]
	if !ok {
		ret(stack, wire.StatusNotFound)
		return
	}
	switch m.kind {
	case Counter:
		vm.host.metrics.add(m, int64(stack[1]))
	case Gauge:
		vm.host.metrics.set(m, int64(stack[1]))
	default:
		vm.host.metrics.observe(m, stack[1])
	}
	ret(stack, wire.StatusOK)
}

func proxyGetMetric(vm *VM, stack []uint64) {
	m, ok := vm.metricIDs[uint32(stack[0])]
	switch {
	case !ok:
		ret(stack, wire.StatusNotFound)
	case m.kind == Histogram:
		ret(stack, wire.StatusBadArgument)
	case !vm.writeU64(uint32(stack[1]), uint64(vm.host.metrics.get(m))):
		ret(stack, wire.StatusInvalidMemoryAccess)
	default:
		ret(stack, wire.StatusOK)
	}
}

func proxySetEffectiveContext(vm *VM, stack []uint64) {
	id := uint32(stack[0])
	if _, retiring := vm.retiring[id]; id == vm.rootID || retiring {
		vm.current = nil // a root context has no stream
		ret(stack, wire.StatusOK)
		return
	}
	if s, ok := vm.streams[id]; ok {
		vm.current = s
		_, paused := vm.grpc.paused[id]
		s.access = s.access.MadeEffective(paused && !s.continued)
		ret(stack, wire.StatusOK)
		return
	}
	ret(stack, wire.StatusBadArgument)
}

// proxy_continue_stream(type): 0 request, 1 response, 2 downstream; 3 upstream is unimplemented
// in Envoy. Deferred until the callback returns (envoy context.cc continueStream queues
// continueDecoding), and the request's header map is gone at once. Continuing a request that
// is not stopped trips Envoy's filter manager ("Attempting to continue iteration while the
// IterationState is already Continue", source/common/http/filter_manager.cc commonContinue) and
// in a release build runs the rest of the filter chain again: the host reports it as a misuse,
// and so for the stream's own proxy_on_request_headers, which has not returned Stop yet.
func proxyContinueStream(vm *VM, stack []uint64) {
	t := uint32(stack[0])
	switch {
	case t > 3:
		ret(stack, wire.StatusBadArgument)
		return
	case t == 3:
		ret(stack, wire.StatusUnimplemented)
		return
	}
	ret(stack, wire.StatusOK)
	s := vm.current
	switch {
	case t == 2:
		// An HTTP stream has no network read filter to continue: nothing happens.
	case s == nil:
		vm.misuse("proxy_continue_stream without a stream context: Envoy continues nothing, and the request waits")
	case t == 1:
		vm.misuse("proxy_continue_stream(HTTP_RESPONSE) for a response that is not stopped")
	case s.inRequestHeaders:
		vm.misuse("proxy_continue_stream(HTTP_REQUEST) inside the stream's own proxy_on_request_headers: " +
			"Envoy continues the filter chain before the callback has returned, and again when it returns Continue " +
			"(return Continue without the call instead)")
	case s.continued:
		vm.misuse("proxy_continue_stream(HTTP_REQUEST) for a request that is not stopped (it already went on)")
	case s.finished || s.responseStarted || s.sent != nil:
		vm.misuse("proxy_continue_stream(HTTP_REQUEST) for a stream that was answered or ended")
	default:
		s.continued = true
		s.continuedFirst = s.reply == nil
		s.access = s.access.Continued()
	}
}
