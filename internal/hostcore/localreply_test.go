package hostcore

import (
	"fmt"
	"testing"
)

// Local replies as envoy source/common/http/utility.cc prepareLocalReply shapes them.
func TestLocalReplyShape(t *testing.T) {
	grpc := [][2]string{{":method", "POST"}, {"content-type", "application/grpc"}}
	body := []byte("Too Many Requests: wait 100%\n")
	none := ^uint32(0) // -1: no gRPC status
	tests := []struct {
		name     string
		reply    LocalReply
		request  [][2]string
		headers  string
		wantBody string
	}{
		{"plain HTTP with a body", LocalReply{Status: 429, Headers: [][2]string{{"retry-after", "1"}}, Body: body, GrpcStatus: none},
			[][2]string{{":method", "GET"}},
			`[[:status 429] [retry-after 1] [content-length 29] [content-type text/plain]]`, string(body)},
		{"the module's content type is kept", LocalReply{Status: 400, Headers: [][2]string{{"content-type", "application/json"}}, Body: []byte("{}"), GrpcStatus: none},
			[][2]string{{":method", "GET"}},
			`[[:status 400] [content-type application/json] [content-length 2]]`, "{}"},
		{"no body: no length, no type", LocalReply{Status: 418, Headers: [][2]string{{"content-type", "x"}, {"content-length", "9"}}, GrpcStatus: none},
			[][2]string{{":method", "GET"}}, `[[:status 418]]`, ""},
		{"HEAD: the length without the body", LocalReply{Status: 429, Body: []byte("abc"), GrpcStatus: none},
			[][2]string{{":method", "HEAD"}}, `[[:status 429] [content-length 3] [content-type text/plain]]`, ""},
		{"gRPC: trailers-only with the module's status", LocalReply{Status: 429, Headers: [][2]string{{"retry-after", "1"}}, Body: body, GrpcStatus: 8},
			grpc, `[[:status 200] [retry-after 1] [content-type application/grpc] [grpc-status 8] [grpc-message Too Many Requests: wait 100%25%0A]]`, ""},
		{"gRPC: no status, 429 maps to UNAVAILABLE", LocalReply{Status: 429, GrpcStatus: none}, grpc,
			`[[:status 200] [content-type application/grpc] [grpc-status 14]]`, ""},
		{"gRPC: 401 maps to UNAUTHENTICATED", LocalReply{Status: 401, GrpcStatus: 17}, grpc,
			`[[:status 200] [content-type application/grpc] [grpc-status 16]]`, ""},
		{"gRPC: the module's grpc-status header wins", LocalReply{Status: 503, Headers: [][2]string{{"grpc-status", "4"}}, GrpcStatus: 8}, grpc,
			`[[:status 200] [grpc-status 4] [content-type application/grpc]]`, ""},
		{"gRPC with a suffix", LocalReply{Status: 403, GrpcStatus: none}, [][2]string{{"content-type", "application/grpc+proto"}},
			`[[:status 200] [content-type application/grpc] [grpc-status 7]]`, ""},
		{"gRPC-Web is not gRPC", LocalReply{Status: 429, Body: []byte("x"), GrpcStatus: 8}, [][2]string{{"content-type", "application/grpc-web"}},
			`[[:status 429] [content-length 1] [content-type text/plain]]`, "x"},
	}
	for _, tt := range tests {
		headers, body := tt.reply.Shape(tt.request)
		if got := fmt.Sprint(headers); got != tt.headers || string(body) != tt.wantBody {
			t.Errorf("%s:\n got  %s %q\n want %s %q", tt.name, got, body, tt.headers, tt.wantBody)
		}
	}
}

func TestHTTPToGrpcStatus(t *testing.T) {
	for status, want := range map[uint32]uint32{400: 13, 401: 16, 403: 7, 404: 12, 429: 14, 502: 14, 503: 14, 504: 14, 500: 2, 200: 2} {
		if got := HTTPToGrpcStatus(status); got != want {
			t.Errorf("HTTPToGrpcStatus(%d) = %d, want %d", status, got, want)
		}
	}
}

func TestEnvoyDetails(t *testing.T) {
	if got := EnvoyDetails("rate limited\tby tollgate\n"); got != "rate_limited_by_tollgate_" {
		t.Errorf("EnvoyDetails = %q", got)
	}
}
