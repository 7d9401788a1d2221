package hostcore

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// Attributes served by proxy_get_property (envoy source/extensions/common/wasm/context.cc
// getProperty, and the attribute vocabulary of docs/root/intro/arch_overview/advanced/
// attributes.rst): unknown paths are NotFound, integers are 8 bytes little-endian (context.cc
// serializeValue), and a stream's attributes need a stream context.

// PluginAttributes are the plugin's names: Envoy's config.name, config.root_id and
// vm_config.vm_id.
type PluginAttributes struct{ PluginName, RootID, VMID string }

// StreamAttributes are what Envoy knows of a stream's request.
type StreamAttributes struct {
	Headers [][2]string // the request headers as they are now, names lower-case
	// SourceAddress and DestinationAddress have ports ("10.0.0.1:5000", "[::1]:5000").
	SourceAddress, DestinationAddress string
	// Extra are further attributes by dotted path, such as "xds.route_name", served as strings.
	Extra map[string]string
}

// requestHeaderAttributes are the request.* attributes Envoy reads from a request header.
var requestHeaderAttributes = map[string]string{
	"request.path": ":path", "request.method": ":method", "request.host": ":authority",
	"request.scheme": ":scheme", "request.id": "x-request-id", "request.useragent": "user-agent",
}

// Property answers proxy_get_property for path; stream is nil outside a stream context.
func Property(path []string, plugin PluginAttributes, stream *StreamAttributes) ([]byte, bool) {
	if len(path) == 0 {
		return nil, false
	}
	switch path[0] {
	case "plugin_name":
		return []byte(plugin.PluginName), len(path) == 1
	case "plugin_root_id":
		return []byte(plugin.RootID), len(path) == 1
	case "plugin_vm_id":
		return []byte(plugin.VMID), len(path) == 1
	}
	if stream == nil || len(path) < 2 {
		return nil, false // stream attributes need a stream
	}
	if v, ok := stream.Extra[strings.Join(path, ".")]; ok {
		return []byte(v), true
	}
	pair := path[0] + "." + path[1]
	switch pair {
	case "source.address":
		return []byte(stream.SourceAddress), stream.SourceAddress != "" && len(path) == 2
	case "source.port":
		return portOf(stream.SourceAddress)
	case "destination.address":
		return []byte(stream.DestinationAddress), stream.DestinationAddress != "" && len(path) == 2
	case "destination.port":
		return portOf(stream.DestinationAddress)
	case "request.headers":
		if len(path) != 3 {
			return nil, false
		}
		v, found := JoinedHeaderValues(stream.Headers, Lower(path[2]))
		return []byte(v), found
	case "request.url_path":
		v, found := HeaderValue(stream.Headers, ":path")
		if i := strings.IndexByte(v, '?'); i >= 0 {
			v = v[:i]
		}
		return []byte(v), found && len(path) == 2
	}
	if name, ok := requestHeaderAttributes[pair]; ok && len(path) == 2 {
		v, found := HeaderValue(stream.Headers, name)
		return []byte(v), found
	}
	return nil, false
}

// portOf is the port of an address with a port, as an 8-byte integer.
func portOf(addr string) ([]byte, bool) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return nil, false
	}
	port, err := strconv.ParseInt(addr[i+1:], 10, 64)
	if err != nil {
		return nil, false
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(port))
	return b[:], true
}
