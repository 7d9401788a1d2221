package abitest

import (
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// hostcalls answers the plugin's host calls (abi.NativeHost) for a Host; the Host's own
// methods are the test's.
type hostcalls struct{ *Host }

var (
	_ abi.NativeHost  = hostcalls{}
	_ abi.ClockFailer = hostcalls{}
)

// ClockFails implements abi.ClockFailer (Host.FailClock).
func (c hostcalls) ClockFails() bool { return c.clockFails }

// Log is proxy_log: a line below the host's level is dropped.
func (c hostcalls) Log(level abi.LogLevel, msg string) {
	if level >= c.logLevel {
		c.logs = append(c.logs, LogLine{Level: level, Message: msg})
	}
}

// LogLevel is proxy_get_log_level.
func (c hostcalls) LogLevel() abi.LogLevel { return c.logLevel }

// PluginConfiguration is the plugin configuration buffer: NotFound outside proxy_on_configure.
func (c hostcalls) PluginConfiguration() ([]byte, wire.Status) {
	if !c.configuring {
		return nil, wire.StatusNotFound
	}
	return append([]byte(nil), c.opts.Configuration...), wire.StatusOK
}

// Property is proxy_get_property (hostcore.Property); a stream's attributes need it to be the
// effective context.
func (c hostcalls) Property(path []string) ([]byte, wire.Status) {
	plugin := hostcore.PluginAttributes{PluginName: c.opts.PluginName, RootID: c.opts.RootID, VMID: c.opts.VMID}
	var stream *hostcore.StreamAttributes
	if s := c.current; s != nil {
		stream = &hostcore.StreamAttributes{Headers: s.requestHeaders, SourceAddress: s.req.SourceAddress,
			DestinationAddress: s.req.DestinationAddress, Extra: s.req.Attributes}
	}
	if v, ok := hostcore.Property(path, plugin, stream); ok {
		return v, wire.StatusOK
	}
	return nil, wire.StatusNotFound
}

// SetProperty is proxy_set_property: the stream's filter state (hostcore.FilterState); NotFound
// without a stream context.
func (c hostcalls) SetProperty(path string, value []byte) wire.Status {
	s := c.current
	if s == nil {
		return wire.StatusNotFound
	}
	s.filterState.SetProperty(path, value)
	return wire.StatusOK
}

// ResponseBody is proxy_get_buffer_bytes(HTTP_RESPONSE_BODY): the stream's body buffer
// (hostcore.ResponseBody), empty outside its body callback.
func (c hostcalls) ResponseBody(start, size int) ([]byte, wire.Status) {
	var buf []byte
	if s := c.current; s != nil {
		buf = s.body.Buffer()
	}
	return append([]byte(nil), hostcore.BufferSlice(buf, uint64(start), uint64(size))...), wire.StatusOK
}

// SharedData is proxy_get_shared_data in the plugin's vm_id.
func (c hostcalls) SharedData(key string) ([]byte, uint32, wire.Status) {
	return c.data.Get(c.opts.VMID, key)
}

// SetSharedData is proxy_set_shared_data in the plugin's vm_id.
func (c hostcalls) SetSharedData(key string, value []byte, cas uint32) wire.Status {
	return c.data.Set(c.opts.VMID, key, value, cas)
}

// SetTickPeriod is proxy_set_tick_period_milliseconds: the root context's timer (Envoy's
// wasm.cc setTickPeriod: a new period replaces the old one), 0 stops it.
func (c hostcalls) SetTickPeriod(milliseconds uint32) wire.Status {
	c.tickPeriod = milliseconds
	return wire.StatusOK
}

// headerMap is the map a header call addresses (write: the call changes it), if the effective
// context may use it now: the rule internal/host applies too (hostcore.MapAccess, from envoy
// context.cc getMap and getConstMap); none without a stream context.
func (c hostcalls) headerMap(m abi.MapType, write bool) (*[][2]string, wire.Status) {
	access, maps := c.mapAccess()
	return access.HeaderMap(uint32(m), write, maps)
}

// mapAccess is the effective context's access to its stream's header maps, and the maps; the
// zero access, to none, without a stream context.
func (c hostcalls) mapAccess() (hostcore.MapAccess, hostcore.StreamMaps) {
	s := c.current
	if s == nil {
		return hostcore.MapAccess{}, hostcore.StreamMaps{}
	}
	return s.access, hostcore.StreamMaps{Request: &s.requestHeaders, Response: &s.responseHeaders,
		ResponseTrailers: &s.responseTrailers}
}

// HeaderPairs is proxy_get_header_map_pairs: every header in the map format (hostcore.PairsMap:
// a map the callback cannot see is no headers, Ok, as in Envoy).
func (c hostcalls) HeaderPairs(m abi.MapType) ([]byte, wire.Status) {
	if m == abi.MapRequestHeaders && c.current != nil && c.current.req.UnreadableHeaders {
		return nil, wire.StatusInternalFailure
	}
	access, maps := c.mapAccess()
	headers, st := access.PairsMap(uint32(m), maps)
	if headers == nil {
		return nil, st
	}
	return wire.EncodePairs(*headers), wire.StatusOK
}

// HeaderValue is proxy_get_header_map_value: the first value, NotFound when absent.
func (c hostcalls) HeaderValue(m abi.MapType, name string) (string, wire.Status) {
	headers, st := c.headerMap(m, false)
	if st != wire.StatusOK {
		return "", st
	}
	v, ok := hostcore.HeaderValue(*headers, hostcore.Lower(name))
	if !ok {
		return "", wire.StatusNotFound
	}
	return v, wire.StatusOK
}

// AddHeader is proxy_add_header_map_value.
func (c hostcalls) AddHeader(m abi.MapType, name, value string) wire.Status {
	headers, st := c.headerMap(m, true)
	if st == wire.StatusOK {
		// Copied, as Envoy copies them out of the module's memory: the module may reuse its bytes.
		*headers = hostcore.AddHeader(*headers, strings.Clone(name), strings.Clone(value))
	}
	return st
}

// ReplaceHeader is proxy_replace_header_map_value.
func (c hostcalls) ReplaceHeader(m abi.MapType, name, value string) wire.Status {
	headers, st := c.headerMap(m, true)
	if st == wire.StatusOK {
		*headers = hostcore.ReplaceHeader(*headers, strings.Clone(name), strings.Clone(value)) // copied, as AddHeader
	}
	return st
}

// RemoveHeader is proxy_remove_header_map_value.
func (c hostcalls) RemoveHeader(m abi.MapType, name string) wire.Status {
	headers, st := c.headerMap(m, true)
	if st == wire.StatusOK {
		*headers = hostcore.RemoveHeader(*headers, hostcore.Lower(name))
	}
	return st
}

// SendLocalReply is proxy_send_local_response: recorded, and sent once the callback returns.
// Envoy answers Ok even when it will send nothing (context.cc sendLocalResponse needs the
// stream's decoder callbacks): the host answers Ok too and reports the misuse.
func (c hostcalls) SendLocalReply(status uint32, details string, headers [][2]string, body []byte, grpcStatus int32) wire.Status {
	s := c.current
	switch {
	case s == nil:
		c.misuse("a local reply without a stream context: Envoy sends nothing, and the request waits")
	case s.ended:
		// While the stream ends the reply cannot be sent any more; Envoy notes this is safe.
	case s.responseStarted || s.pending != nil:
		c.misuse("a local reply after the response started: Envoy can only reset the stream")
	default:
		s.pending = &hostcore.LocalReply{Status: status, Headers: hostcore.LowerKeys(headers),
			Body: append([]byte(nil), body...), GrpcStatus: uint32(grpcStatus), Details: hostcore.EnvoyDetails(details)}
	}
	return wire.StatusOK
}

// ContinueRequest is proxy_continue_stream(HTTP_REQUEST). Continuing a request that is not
// stopped trips Envoy's filter manager (source/common/http/filter_manager.cc commonContinue):
// the host reports it as a misuse, also inside the stream's own proxy_on_request_headers.
func (c hostcalls) ContinueRequest() wire.Status {
	s := c.current
	switch {
	case s == nil:
		c.misuse("proxy_continue_stream without a stream context: Envoy continues nothing, and the request waits")
	case s.inRequestHeaders:
		c.misuse("proxy_continue_stream inside the stream's own proxy_on_request_headers (return Continue instead)")
	case s.continued:
		c.misuse("proxy_continue_stream for a request that is not stopped (it already went on)")
	case s.ended || s.responseStarted || s.reply != nil:
		c.misuse("proxy_continue_stream for a stream that was answered or ended")
	default:
		// Continuing before a local reply in the same callback: Envoy runs the two in order, so
		// the request reaches the upstream and the reply then replaces its response.
		s.continued, s.continuedAt, s.continuedFirst = true, c.mono, s.pending == nil
		s.forwarded = append([][2]string(nil), s.requestHeaders...)
		s.access = s.access.Continued()
	}
	return wire.StatusOK
}

// SetEffectiveContext is proxy_set_effective_context: the root context, or a live stream
// (whose stopped request's headers Envoy keeps until it continues); BadArgument otherwise.
func (c hostcalls) SetEffectiveContext(contextID uint32) wire.Status {
	if contextID == rootID {
		c.current = nil
		return wire.StatusOK
	}
	s, ok := c.streams[contextID]
	if !ok {
		return wire.StatusBadArgument
	}
	c.current = s
	s.access = s.access.MadeEffective(s.paused && !s.continued)
	return wire.StatusOK
}
