package plugin

import (
	"fmt"
	"testing"
	"time"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
	"github.com/tollgate-proxy/tollgate/internal/rls"
)

// A rejection by the global limit describes that limit in the configured header style; without
// the limit in the answer there is nothing to describe.
func TestGlobalRateLimitHeaders(t *testing.T) {
	over := rls.Response{OverallCode: rls.CodeOverLimit, Statuses: 1, Status: rls.Status{Code: rls.CodeOverLimit,
		RequestsPerUnit: 100, Unit: rls.UnitHour, DurationUntilReset: 90 * time.Second, HasReset: true}}
	tests := []struct {
		style config.HeaderStyle
		resp  rls.Response
		want  string
	}{
		{config.HeadersDraft, over, `[[ratelimit-policy "r/global";q=100;w=3600] [ratelimit "r/global";r=0;t=90]]`},
		{config.HeadersXRateLimit, over, `[[x-ratelimit-limit 100] [x-ratelimit-remaining 0] [x-ratelimit-reset 90]]`},
		{config.HeadersOff, over, `[]`},
		{config.HeadersDraft, rls.Response{OverallCode: rls.CodeOverLimit}, `[]`},
		{config.HeadersDraft, rls.Response{OverallCode: rls.CodeOverLimit, Statuses: 1, Status: rls.Status{RequestsPerUnit: 5}}, `[]`},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(globalRateLimitHeaders(tt.style, "r", tt.resp, 90)); got != tt.want {
			t.Errorf("%v %+v: got %s, want %s", tt.style, tt.resp, got, tt.want)
		}
	}
}

// A cluster Envoy does not know: the call cannot start, and the rule's failure mode decides.
func TestGlobalWithoutGrpcFollowsTheFailureMode(t *testing.T) {
	for mode, want := range map[string]uint32{"allow": 0, "deny": 503} {
		t.Run(mode, func(t *testing.T) { checkGlobalWithoutGrpc(t, mode, want) })
	}
}

func checkGlobalWithoutGrpc(t *testing.T, mode string, want uint32) {
	host, status := startPlugin(t, `{"rules": [{"name": "g", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}],
	  "global": {"cluster": "ratelimit", "domain": "d", "failure_mode": "`+mode+`"}}]}`)
	if status != types.OnPluginStartStatusOK {
		t.Fatalf("plugin start: %v; logs %q", status, host.LogsAt(abi.LogLevelCritical))
	}
	stream, _ := host.Request(abitest.Request{Headers: [][2]string{{":path", "/"}, {"x-api-key", "k"}}, EndOfStream: true})
	reply := stream.Reply()
	switch {
	case want == 0 && (reply != nil || !stream.Continued()):
		t.Errorf("local reply %+v, continued %v; want the request to go on", reply, stream.Continued())
	case want != 0 && (reply == nil || reply.Status != int(want)):
		t.Errorf("reply %+v, want %d", reply, want)
	}
	if len(host.Calls()) != 0 {
		t.Errorf("%d calls pending, want none started", len(host.Calls()))
	}
}
