package e2e

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// waypointSourceAddress is source.address as the HTTP filters of an Istio waypoint see it, for a
// request that reached the waypoint over HBONE from peer (the ztunnel of the client's pod, which
// opens the connection inside the pod's network namespace, or an ingress gateway) carrying the
// x-forwarded-for lines xff:
//
//   - The connect_terminate listener copies the HBONE connection's peer into the filter state
//     envoy.filters.listener.original_dst.remote_ip (istio/istio pilot/pkg/xds/filters/filters.go,
//     ConnectAuthorityFilter: %DOWNSTREAM_REMOTE_ADDRESS%), and the original_dst listener filter
//     of the internal listener main_internal makes it the connection's remote address
//     (envoyproxy/envoy source/extensions/filters/listener/original_dst/original_dst.cc, the
//     EnvoyInternal case).
//   - main_internal's connection manager has use_remote_address false and no trusted hops
//     (istio/istio pilot/pkg/networking/core/listener_waypoint.go,
//     buildWaypointInboundHTTPFilters), so when x-forwarded-for ends in an IP address Envoy makes
//     that last entry the request's remote address, port 0, and appends nothing
//     (envoyproxy/envoy source/common/http/conn_manager_utility.cc, mutateRequestHeaders;
//     source/extensions/http/original_ip_detection/xff/xff.cc; source/common/http/utility.cc,
//     getLastAddressFromXFF).
//   - source.address is the request's remote address (envoyproxy/envoy
//     source/extensions/filters/common/expr/context.cc, PeerWrapper).
func waypointSourceAddress(peer string, xff ...string) string {
	if len(xff) == 0 {
		return peer
	}
	joined := strings.Join(xff, ",")
	last := strings.TrimSpace(joined[strings.LastIndex(joined, ",")+1:])
	addr, err := netip.ParseAddr(last)
	if err != nil {
		return peer
	}
	return netip.AddrPortFrom(addr, 0).String()
}

// waypointReq is a request as the waypoint's filters receive it from peer over HBONE, with
// optional x-forwarded-for lines.
func waypointReq(peer string, xff ...string) host.Request {
	var headers []string
	for _, line := range xff {
		headers = append(headers, "x-forwarded-for", line)
	}
	return httpReq("GET", "/items", waypointSourceAddress(peer, xff...), headers...)
}

// shippedWaypointConfig is the pluginConfig of deploy/istio/ambient/wasmplugin-waypoint.yaml as
// JSON, with the top-level fields in extra set on top.
func shippedWaypointConfig(t *testing.T, extra map[string]any) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "istio", "ambient", "wasmplugin-waypoint.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Spec struct {
			PluginConfig map[string]any `json:"pluginConfig"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &manifest); err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		manifest.Spec.PluginConfig[k] = v
	}
	text, err := json.Marshal(manifest.Spec.PluginConfig)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// waypointCapacity is the per-client capacity of the shipped waypoint plugin.
const waypointCapacity = 50

// spend sends a client's whole capacity, each request admitted.
func spend(name string, req host.Request) []policyStep {
	steps := make([]policyStep, waypointCapacity)
	for i := range steps {
		steps[i] = policyStep{name: name, req: req, status: 200}
	}
	return steps
}

func concatSteps(parts ...[]policyStep) []policyStep {
	var steps []policyStep
	for _, p := range parts {
		steps = append(steps, p...)
	}
	return steps
}

// The shipped waypoint plugin, through the module, keys each client on its own address behind
// ztunnel and the waypoint: each pod on its own address whatever its HBONE connection, each
// client of the ingress gateway on the address the gateway appended, never on the gateway.
// A workload that writes x-forwarded-for itself picks its key, which is what
// authorizationpolicy-forwarded-for.yaml refuses at the waypoint.
func TestWaypointKeysEachClientThroughTheModule(t *testing.T) {
	t.Parallel()
	const (
		podA, podB = "10.244.1.5:41000", "10.244.1.6:52000"
		gateway    = "10.244.2.9:33000"
	)
	g := newRig(t, host.Envoy139, shippedWaypointConfig(t, nil), 2)
	runPolicy(t, g, concatSteps(
		spend("pod A", waypointReq(podA)),
		[]policyStep{
			{name: "pod A limited", req: waypointReq(podA), status: 429},
			{name: "pod A over another HBONE connection: the same client", req: waypointReq("10.244.1.5:41999"), status: 429},
			{name: "pod B", req: waypointReq(podB), status: 200},
		},
		spend("client of the gateway", waypointReq(gateway, "203.0.113.7")),
		[]policyStep{
			{name: "that client limited", req: waypointReq(gateway, "203.0.113.7"), status: 429},
			{name: "another client of the gateway", req: waypointReq(gateway, "203.0.113.8"), status: 200},
			{name: "what the client wrote itself, left of the gateway's entry, changes nothing", req: waypointReq(gateway, "6.6.6.6, 203.0.113.7"), status: 429},
			{name: "pod A writing x-forwarded-for picks its key", req: waypointReq(podA, "198.51.100.1"), status: 200},
		},
	))
}

// Behind an ingress gateway that trusts one proxy in front of it, the gateway appends that
// proxy's address, which would key every client on the proxy; xff_num_trusted_hops: 2 at the
// waypoint takes the entry the proxy wrote, and pods, which send no x-forwarded-for, still key
// on their own address.
func TestWaypointBehindATrustedProxyThroughTheModule(t *testing.T) {
	t.Parallel()
	const (
		gateway  = "10.244.2.9:33000"
		balancer = "192.0.2.1"
		pod      = "10.244.1.5:41000"
	)
	for _, tt := range []struct {
		name         string
		hops         int
		secondClient int // the status of another client through the same proxy
	}{
		{"default: every client on the proxy", 0, 429},
		{"xff_num_trusted_hops 2: each client", 2, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var extra map[string]any
			if tt.hops > 0 {
				extra = map[string]any{"client_ip": map[string]any{"xff_num_trusted_hops": tt.hops}}
			}
			g := newRig(t, host.Envoy133, shippedWaypointConfig(t, extra), 2)
			runPolicy(t, g, concatSteps(
				spend("client 1 through the proxy", waypointReq(gateway, "203.0.113.9, "+balancer)),
				[]policyStep{
					{name: "client 1 limited", req: waypointReq(gateway, "203.0.113.9, "+balancer), status: 429},
					{name: "client 2 through the proxy", req: waypointReq(gateway, "203.0.113.10, "+balancer), status: tt.secondClient},
					{name: "a pod", req: waypointReq(pod), status: 200},
				},
			))
		})
	}
}

// The emulation of the waypoint's source.address follows Envoy's reading of x-forwarded-for.
func TestWaypointSourceAddress(t *testing.T) {
	const peer = "10.244.1.5:41000"
	for _, tt := range []struct {
		xff  []string
		want string
	}{
		{nil, peer},
		{[]string{"203.0.113.7"}, "203.0.113.7:0"},
		{[]string{"6.6.6.6, 203.0.113.7 "}, "203.0.113.7:0"},
		{[]string{"6.6.6.6", "2001:db8::7"}, "[2001:db8::7]:0"},
		{[]string{"203.0.113.7, not-an-address"}, peer},
	} {
		if got := waypointSourceAddress(peer, tt.xff...); got != tt.want {
			t.Errorf("x-forwarded-for %q: source.address %q, want %q", tt.xff, got, tt.want)
		}
	}
}
