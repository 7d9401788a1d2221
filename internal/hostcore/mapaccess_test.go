package hostcore

import (
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

func TestMapAccessHeaderMap(t *testing.T) {
	const requestTrailers, pastTheABI = 1, 8
	tests := []struct {
		name    string
		access  MapAccess
		mapType uint32
		write   bool
		want    string // "request", "response", "trailers", or "" for BadArgument
	}{
		{"request headers read in their phase", RequestHeadersAccess, MapRequestHeaders, false, "request"},
		{"request headers written in their phase", RequestHeadersAccess, MapRequestHeaders, true, "request"},
		{"response headers in the request phase", RequestHeadersAccess, MapResponseHeaders, false, ""},
		{"response headers written in their phase", ResponseHeadersAccess, MapResponseHeaders, true, "response"},
		{"request headers in the response phase", ResponseHeadersAccess, MapRequestHeaders, false, ""},
		{"request headers read in the log phase", LogAccess, MapRequestHeaders, false, "request"},
		{"response headers read in the log phase", LogAccess, MapResponseHeaders, false, "response"},
		{"request headers written in the log phase", LogAccess, MapRequestHeaders, true, ""},
		{"response headers written in the log phase", LogAccess, MapResponseHeaders, true, ""},
		{"response trailers read in their phase", ResponseTrailersAccess, MapResponseTrailers, false, "trailers"},
		{"response trailers written in their phase", ResponseTrailersAccess, MapResponseTrailers, true, "trailers"},
		{"response trailers in the response headers' phase", ResponseHeadersAccess, MapResponseTrailers, false, ""},
		{"response trailers in the body phase", MapAccess{}, MapResponseTrailers, false, ""},
		{"response headers in the trailers' phase", ResponseTrailersAccess, MapResponseHeaders, false, ""},
		{"response trailers read in the log phase", LogAccess, MapResponseTrailers, false, "trailers"},
		{"response trailers written in the log phase", LogAccess, MapResponseTrailers, true, ""},
		{"no map while the stream is deleted", MapAccess{}, MapRequestHeaders, false, ""},
		{"a map the hosts do not serve", LogAccess, requestTrailers, false, ""},
		{"a map type past the ABI's", LogAccess, pastTheABI, false, ""},
	}
	for _, tt := range tests {
		var request, response, trailers [][2]string
		m, st := tt.access.HeaderMap(tt.mapType, tt.write, StreamMaps{Request: &request, Response: &response, ResponseTrailers: &trailers})
		got := ""
		switch {
		case st != wire.StatusOK && m == nil:
		case st == wire.StatusOK && m == &request:
			got = "request"
		case st == wire.StatusOK && m == &response:
			got = "response"
		case st == wire.StatusOK && m == &trailers:
			got = "trailers"
		default:
			t.Errorf("%s: map %p with status %v", tt.name, m, st)
			continue
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
		if got == "" && st != wire.StatusBadArgument {
			t.Errorf("%s: status %v, want BadArgument", tt.name, st)
		}
	}
}

// A pairs read is a value read's map, or no headers where that would be BadArgument, but for a
// type past the ABI's (envoy context.cc getHeaderMapPairs).
func TestMapAccessPairsMap(t *testing.T) {
	const requestTrailers, lastOfTheABI, pastTheABI = 1, 7, 8
	var request [][2]string
	maps := StreamMaps{Request: &request}
	for _, tt := range []struct {
		name    string
		access  MapAccess
		mapType uint32
		wantMap *[][2]string
		want    wire.Status
	}{
		{"request headers in their phase", RequestHeadersAccess, MapRequestHeaders, &request, wire.StatusOK},
		{"request headers in the response phase", ResponseHeadersAccess, MapRequestHeaders, nil, wire.StatusOK},
		{"no stream context", MapAccess{}, MapRequestHeaders, nil, wire.StatusOK},
		{"a map the hosts do not serve", LogAccess, requestTrailers, nil, wire.StatusOK},
		{"the ABI's last map type", RequestHeadersAccess, lastOfTheABI, nil, wire.StatusOK},
		{"a map type past the ABI's", RequestHeadersAccess, pastTheABI, nil, wire.StatusBadArgument},
	} {
		if m, st := tt.access.PairsMap(tt.mapType, maps); m != tt.wantMap || st != tt.want {
			t.Errorf("%s: %p, %v; want %p, %v", tt.name, m, st, tt.wantMap, tt.want)
		}
	}
}

func TestMapAccessTransitions(t *testing.T) {
	tests := []struct {
		name string
		got  MapAccess
		want MapAccess
	}{
		{"a stopped request made effective", MapAccess{}.MadeEffective(true), RequestHeadersAccess},
		{"a stream made effective in its own phase", ResponseHeadersAccess.MadeEffective(false), ResponseHeadersAccess},
		{"a stream made effective outside its callbacks", MapAccess{}.MadeEffective(false), MapAccess{}},
		{"the request continued", RequestHeadersAccess.Continued(), MapAccess{}},
		{"the request continued in the log phase", LogAccess.Continued(), MapAccess{Response: true, Trailers: true, ReadOnly: true}},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}
