package hostcore

import (
	"encoding/binary"
	"strings"
	"testing"
)

func TestProperty(t *testing.T) {
	plugin := PluginAttributes{PluginName: "p", RootID: "r", VMID: "v"}
	stream := &StreamAttributes{
		Headers:       [][2]string{{":path", "/a?b=1"}, {":method", "GET"}, {"x-k", "1"}, {"x-k", "2"}},
		SourceAddress: "10.0.0.1:5000", DestinationAddress: "[::1]:80",
		Extra: map[string]string{"xds.route_name": "route"},
	}
	port := func(p uint64) string {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], p)
		return string(b[:])
	}
	tests := []struct {
		path   string
		stream *StreamAttributes
		want   string
		found  bool
	}{
		{"plugin_name", nil, "p", true},
		{"plugin_root_id", nil, "r", true},
		{"plugin_vm_id", stream, "v", true},
		{"plugin_name.x", nil, "", false},
		{"source.address", nil, "", false}, // a stream attribute outside a stream
		{"source.address", stream, "10.0.0.1:5000", true},
		{"source.port", stream, port(5000), true},
		{"destination.address", stream, "[::1]:80", true},
		{"destination.port", stream, port(80), true},
		{"request.headers.X-K", stream, "1,2", true},
		{"request.headers.x-none", stream, "", false},
		{"request.path", stream, "/a?b=1", true},
		{"request.url_path", stream, "/a", true},
		{"request.method", stream, "GET", true},
		{"request.host", stream, "", false},
		{"xds.route_name", stream, "route", true},
		{"unknown.attribute", stream, "", false},
		{"source", stream, "", false},
	}
	for _, tt := range tests {
		got, found := Property(strings.Split(tt.path, "."), plugin, tt.stream)
		if found != tt.found || (found && string(got) != tt.want) {
			t.Errorf("%s (stream %v): %q, %v; want %q, %v", tt.path, tt.stream != nil, got, found, tt.want, tt.found)
		}
	}
	if _, found := Property(nil, plugin, stream); found {
		t.Error("an empty path was found")
	}
}
