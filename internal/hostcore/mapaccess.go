package hostcore

import "github.com/tollgate-proxy/tollgate/internal/wire"

// Which header maps a stream's callback may use, as Envoy decides it (envoy
// source/extensions/common/wasm/context.cc): reads go through getConstMap and writes through
// getMap, which serve the filter's own maps while Envoy holds them (decodeHeaders and
// encodeHeaders let them go once the filter continues), so a callback sees its own phase's map;
// in the access-log phase (proxy_on_log) getConstMap serves the logged copies and getMap none,
// so every write there is BadArgument. The response trailers exist from proxy_on_response_trailers
// on (encodeTrailers sets response_trailers_; the access-log phase reads its own copy); Envoy's
// getMap would add a trailer map to a response in its last body callback, which the hosts do not
// serve (BadArgument). A map type past the ABI's is BadArgument too
// (proxy-wasm-cpp-host src/exports.cc), and so is any map without a stream context.

// Header map types (proxy_header_map_type_t) the hosts serve.
const (
	MapRequestHeaders   uint32 = 0
	MapResponseHeaders  uint32 = 2
	MapResponseTrailers uint32 = 3
	lastMapType         uint32 = 7 // the last type the ABI defines
)

// MapAccess says which header maps the running callback may use on its stream.
type MapAccess struct{ Request, Response, Trailers, ReadOnly bool }

// The access of each stream callback; any other (proxy_on_response_body, proxy_on_done,
// proxy_on_delete) has none: Envoy lets go of the response headers once their callback
// continued, and the body callback reads the body buffer, not a map.
var (
	// RequestHeadersAccess is proxy_on_request_headers', and a stopped request's later on.
	RequestHeadersAccess = MapAccess{Request: true}
	// ResponseHeadersAccess is proxy_on_response_headers'.
	ResponseHeadersAccess = MapAccess{Response: true}
	// ResponseTrailersAccess is proxy_on_response_trailers'.
	ResponseTrailersAccess = MapAccess{Trailers: true}
	// LogAccess is proxy_on_log's: every map, read-only.
	LogAccess = MapAccess{Request: true, Response: true, Trailers: true, ReadOnly: true}
)

// StreamMaps are a stream's header maps as a host keeps them.
type StreamMaps struct{ Request, Response, ResponseTrailers *[][2]string }

// HeaderMap returns the map of the stream's that a header call addresses, or BadArgument when
// the callback may not use it (write: the call changes the map).
func (a MapAccess) HeaderMap(mapType uint32, write bool, maps StreamMaps) (*[][2]string, wire.Status) {
	switch {
	case mapType > lastMapType, write && a.ReadOnly:
		return nil, wire.StatusBadArgument
	case mapType == MapRequestHeaders && a.Request:
		return maps.Request, wire.StatusOK
	case mapType == MapResponseHeaders && a.Response:
		return maps.Response, wire.StatusOK
	case mapType == MapResponseTrailers && a.Trailers:
		return maps.ResponseTrailers, wire.StatusOK
	}
	return nil, wire.StatusBadArgument
}

// PairsMap returns the map a proxy_get_header_map_pairs call reads. A map of the ABI's the
// callback cannot see is nil with Ok, no headers, as Envoy answers it (envoy
// source/extensions/common/wasm/context.cc getHeaderMapPairs: the pairs of a null map are none),
// where a value read of it is BadArgument; a type past the ABI's is BadArgument. Without a stream
// context, pass the zero MapAccess.
func (a MapAccess) PairsMap(mapType uint32, maps StreamMaps) (*[][2]string, wire.Status) {
	if mapType > lastMapType {
		return nil, wire.StatusBadArgument
	}
	if m, st := a.HeaderMap(mapType, false, maps); st == wire.StatusOK {
		return m, wire.StatusOK
	}
	return nil, wire.StatusOK
}

// MadeEffective is the access of a stream that another callback makes the effective context
// (proxy_set_effective_context): a request the filter stopped keeps its headers until it
// continues (Envoy holds request_headers_ while decodeHeaders' answer is Stop), and otherwise the
// stream keeps what it had.
func (a MapAccess) MadeEffective(requestStopped bool) MapAccess {
	if requestStopped {
		return RequestHeadersAccess
	}
	return a
}

// Continued is the access once the callback continued the stream's request
// (proxy_continue_stream): Envoy lets go of the request's headers at once.
func (a MapAccess) Continued() MapAccess {
	a.Request = false
	return a
}
