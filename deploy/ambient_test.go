package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tollgate-proxy/tollgate/config"
)

// ambientManifests are the manifests for Istio's ambient mode (deploy/istio/ambient/).
var ambientManifests = []string{
	"deploy/istio/ambient/waypoint.yaml",
	"deploy/istio/ambient/wasmplugin-waypoint.yaml",
	"deploy/istio/ambient/authorizationpolicy-forwarded-for.yaml",
	"deploy/istio/ambient/ingress.yaml",
	"deploy/istio/ambient/wasmplugin-ingress.yaml",
	"deploy/istio/ambient/wasmplugin-waypoint-global.yaml",
	"deploy/istio/ambient/ratelimit-reference.yaml",
}

// The ambient manifests in the sets they are applied in. The two waypoint WasmPlugins are one
// object (default/tollgate) with and without a global limit, so each is checked in its own set.
var (
	ambientLocalSet = []string{
		"deploy/istio/ambient/waypoint.yaml",
		"deploy/istio/ambient/wasmplugin-waypoint.yaml",
		"deploy/istio/ambient/authorizationpolicy-forwarded-for.yaml",
		"deploy/istio/ambient/ingress.yaml",
		"deploy/istio/ambient/wasmplugin-ingress.yaml",
	}
	ambientGlobalSet = []string{
		"deploy/istio/ambient/waypoint.yaml",
		"deploy/istio/ambient/wasmplugin-waypoint-global.yaml",
		"deploy/istio/ambient/ratelimit-reference.yaml",
	}
)

const (
	waypointClass        = "istio-waypoint"
	authorizationKind    = "security.istio.io/v1 AuthorizationPolicy"
	envoyFilterKind      = "networking.istio.io/v1alpha3 EnvoyFilter"
	forwardedForKey      = "request.headers[x-forwarded-for]"
	referencedServiceKey = "envoyfilter.istio.io/referenced-services"
)

// ambientObjects is what a set of ambient manifests declares, by kind.
type ambientObjects struct {
	gateways []*gwapiv1.Gateway
	routes   []*gwapiv1.HTTPRoute
	plugins  []*wasmPlugin
	policies []*authorizationPolicy
	filters  []*envoyFilter
}

type authorizationPolicy struct {
	spec *securityv1beta1.AuthorizationPolicy
	istioObject
}

type envoyFilter struct {
	spec *networkingv1alpha3.EnvoyFilter
	istioObject
}

// decodeAmbientManifest decodes every document of a manifest: Gateway API objects as
// decodeEnvoyGatewayManifest does, Istio's with Istio's API types (checkWasmPlugin for a
// WasmPlugin), each also validated against its kind's CRD.
func decodeAmbientManifest(name string, data []byte, into *ambientObjects, crds map[string]*crdValidator) error {
	docs, err := manifestDocuments(name, data)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		switch doc.kind {
		case "gateway.networking.k8s.io/v1 Gateway":
			o := &gwapiv1.Gateway{}
			into.gateways = append(into.gateways, o)
			err = decodeStrict(name, doc, o, crds)
		case "gateway.networking.k8s.io/v1 HTTPRoute":
			o := &gwapiv1.HTTPRoute{}
			into.routes = append(into.routes, o)
			err = decodeStrict(name, doc, o, crds)
		case wasmPluginKind:
			var p *wasmPlugin
			p, err = checkWasmPlugin(name, doc.json)
			into.plugins = append(into.plugins, p)
		case authorizationKind:
			p := &authorizationPolicy{spec: &securityv1beta1.AuthorizationPolicy{}}
			into.policies = append(into.policies, p)
			p.istioObject, err = decodeIstioObject(name, doc.kind, doc.json, p.spec)
		case envoyFilterKind:
			f := &envoyFilter{spec: &networkingv1alpha3.EnvoyFilter{}}
			into.filters = append(into.filters, f)
			f.istioObject, err = decodeIstioObject(name, doc.kind, doc.json, f.spec)
		default:
			return fmt.Errorf("%s: document %d: %s: want a Gateway API v1 Gateway or HTTPRoute, or an Istio WasmPlugin (%s), AuthorizationPolicy (%s) or EnvoyFilter (%s)",
				name, doc.number, doc.describe(), wasmPluginKind, authorizationKind, envoyFilterKind)
		}
		if err == nil && (doc.kind == authorizationKind || doc.kind == envoyFilterKind) {
			err = validateCRD(name, doc, crds)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkAmbient checks that the objects fit together: the waypoint is one (class, label,
// listener), every targetRef and parentRef names a Gateway of these manifests, a WasmPlugin's
// match fits its Gateway, the x-forwarded-for policy lets the ingress gateway through, and a
// waypoint's global limit has its cluster.
func checkAmbient(objs *ambientObjects) []string {
	problems := checkAmbientGateways(objs)
	gateways := map[string]*gwapiv1.Gateway{}
	for _, g := range objs.gateways {
		gateways[g.Namespace+"/"+g.Name] = g
	}
	for _, p := range objs.plugins {
		where := "WasmPlugin " + p.meta.Name
		targets, more := resolveTargets(where, p.meta.Namespace, p.spec.GetTargetRefs(), gateways)
		problems = append(problems, more...)
		for _, g := range targets {
			problems = append(problems, checkPluginMatch(where, p, g)...)
			if g.Spec.GatewayClassName == waypointClass {
				problems = append(problems, checkWaypointClusters(where, p, g, objs.filters)...)
			}
		}
	}
	for _, p := range objs.policies {
		where := "AuthorizationPolicy " + p.meta.Name
		_, more := resolveTargets(where, p.meta.Namespace, p.spec.GetTargetRefs(), gateways)
		problems = append(problems, more...)
		problems = append(problems, checkForwardedForPolicy(where, p, objs.gateways)...)
	}
	for _, f := range objs.filters {
		where := "EnvoyFilter " + f.meta.Name
		_, more := resolveTargets(where, f.meta.Namespace, f.spec.GetTargetRefs(), gateways)
		problems = append(problems, more...)
		if len(f.spec.GetConfigPatches()) > 0 {
			problems = append(problems, where+": spec.configPatches: want none: this EnvoyFilter only names services for Istio")
		}
	}
	return problems
}

// checkAmbientDocument checks the objects of one document on their own, without the others
// they refer to: what decodeAmbientManifest checks, a waypoint's class, label and listener, and
// an x-forwarded-for policy's action and values.
func checkAmbientDocument(name string, data []byte, crds map[string]*crdValidator) error {
	objs := &ambientObjects{}
	if err := decodeAmbientManifest(name, data, objs, crds); err != nil {
		return err
	}
	var problems []string
	for _, problem := range checkAmbientGateways(&ambientObjects{gateways: objs.gateways}) {
		problems = append(problems, name+": "+problem)
	}
	for _, p := range objs.policies {
		problems = append(problems, checkForwardedForPolicy(name+": AuthorizationPolicy "+p.meta.Name, p, nil)...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return nil
}

// checkAmbientGateways checks the waypoint as istioctl makes it, and that every route attaches.
func checkAmbientGateways(objs *ambientObjects) []string {
	var problems []string
	gateways := map[string]*gwapiv1.Gateway{}
	for _, g := range objs.gateways {
		gateways[g.Namespace+"/"+g.Name] = g
		where := "Gateway " + g.Name
		waypointFor, labelled := g.Labels["istio.io/waypoint-for"]
		if g.Spec.GatewayClassName != waypointClass {
			if labelled {
				problems = append(problems, fmt.Sprintf("%s: spec.gatewayClassName %q: the istio.io/waypoint-for label says a waypoint, whose class is %s", where, g.Spec.GatewayClassName, waypointClass))
			}
			continue
		}
		if !slices.Contains([]string{"service", "workload", "all"}, waypointFor) {
			problems = append(problems, fmt.Sprintf("%s: metadata.labels[istio.io/waypoint-for]: %q: want service (as istioctl waypoint apply --for service), workload or all; a waypoint for no traffic never runs Tollgate", where, waypointFor))
		}
		mesh := slices.ContainsFunc(g.Spec.Listeners, func(l gwapiv1.Listener) bool {
			return l.Port == 15008 && l.Protocol == "HBONE"
		})
		if !mesh {
			problems = append(problems, where+": spec.listeners: want the listener istioctl writes, port 15008 protocol HBONE: ztunnel sends the traffic there")
		}
	}
	for _, r := range objs.routes {
		for i, ref := range r.Spec.ParentRefs {
			ns := r.Namespace
			if ref.Namespace != nil {
				ns = string(*ref.Namespace)
			}
			g := gateways[ns+"/"+string(ref.Name)]
			switch {
			case g == nil:
				problems = append(problems, fmt.Sprintf("HTTPRoute %s: spec.parentRefs[%d]: %s/%s is not a Gateway of these manifests", r.Name, i, ns, ref.Name))
			case !admitsRoutesFrom(g, r.Namespace):
				problems = append(problems, fmt.Sprintf("HTTPRoute %s: spec.parentRefs[%d]: Gateway %s/%s admits no route of namespace %s (spec.listeners[].allowedRoutes)", r.Name, i, ns, ref.Name, r.Namespace))
			}
		}
	}
	return problems
}

// admitsRoutesFrom reports whether a listener of the Gateway takes routes from the namespace
// (allowedRoutes.namespaces.from: Same by default, or All).
func admitsRoutesFrom(g *gwapiv1.Gateway, namespace string) bool {
	for _, l := range g.Spec.Listeners {
		from := gwapiv1.NamespacesFromSame
		if l.AllowedRoutes != nil && l.AllowedRoutes.Namespaces != nil && l.AllowedRoutes.Namespaces.From != nil {
			from = *l.AllowedRoutes.Namespaces.From
		}
		if from == gwapiv1.NamespacesFromAll || (from == gwapiv1.NamespacesFromSame && g.Namespace == namespace) {
			return true
		}
	}
	return false
}

// resolveTargets returns the Gateways of these manifests that an object's targetRefs name, in the
// object's namespace (Istio never attaches across namespaces).
func resolveTargets(where, namespace string, refs []*typev1beta1.PolicyTargetReference, gateways map[string]*gwapiv1.Gateway) ([]*gwapiv1.Gateway, []string) {
	var found []*gwapiv1.Gateway
	var problems []string
	if len(refs) == 0 {
		problems = append(problems, where+": spec.targetRefs: empty: name the waypoint or Gateway")
	}
	for i, ref := range refs {
		g := gateways[namespace+"/"+ref.GetName()]
		if ref.GetGroup() != gwapiv1.GroupName || ref.GetKind() != "Gateway" || g == nil {
			problems = append(problems, fmt.Sprintf("%s: spec.targetRefs[%d]: %s %s/%s (group %q) is not a Gateway of these manifests in the object's namespace", where, i, ref.GetKind(), namespace, ref.GetName(), ref.GetGroup()))
			continue
		}
		found = append(found, g)
	}
	return found, problems
}

// checkPluginMatch checks that a WasmPlugin's match can select the Gateway's HTTP listeners:
// Istio builds a waypoint's as inbound (mode SERVER) and a gateway's as mode CLIENT (Istio's
// pilot/pkg/model/extensions.go, workloadModeForListenerClass).
func checkPluginMatch(where string, p *wasmPlugin, g *gwapiv1.Gateway) []string {
	want, kind := typev1beta1.WorkloadMode_CLIENT, "a gateway's listeners are mode CLIENT"
	if g.Spec.GatewayClassName == waypointClass {
		want, kind = typev1beta1.WorkloadMode_SERVER, "a waypoint's listeners are mode SERVER"
	}
	var problems []string
	for i, m := range p.spec.GetMatch() {
		switch m.GetMode() {
		case want, typev1beta1.WorkloadMode_UNDEFINED, typev1beta1.WorkloadMode_CLIENT_AND_SERVER:
		default:
			problems = append(problems, fmt.Sprintf("%s: spec.match[%d].mode: %s never applies on Gateway %s: %s; leave match out", where, i, m.GetMode(), g.Name, kind))
		}
	}
	return problems
}

// checkWaypointClusters checks that every global limit of a WasmPlugin on a waypoint calls
// Istio's outbound cluster of a service, and that an EnvoyFilter on the waypoint names that
// service: a waypoint has no outbound cluster for a service nothing names (Istio's
// pilot/pkg/networking/core/cluster.go builds a waypoint's from filterWaypointOutboundServices).
func checkWaypointClusters(where string, p *wasmPlugin, waypoint *gwapiv1.Gateway, filters []*envoyFilter) []string {
	text, _ := protojson.Marshal(p.spec.GetPluginConfig())
	cfg, err := config.Parse(text)
	if err != nil {
		return nil // checkWasmPlugin reported it
	}
	referenced := map[string]bool{}
	for _, f := range filters {
		if !slices.ContainsFunc(f.spec.GetTargetRefs(), func(r *typev1beta1.PolicyTargetReference) bool {
			return r.GetKind() == "Gateway" && r.GetName() == waypoint.Name && f.meta.Namespace == waypoint.Namespace
		}) {
			continue
		}
		for _, ref := range strings.Split(f.meta.Annotations[referencedServiceKey], ",") {
			referenced[strings.TrimSpace(ref)] = true
		}
	}
	var problems []string
	for i, rule := range cfg.Rules {
		if rule.Global == nil {
			continue
		}
		at := fmt.Sprintf("%s: spec.pluginConfig.rules[%d].global.cluster: %q", where, i, rule.Global.Cluster)
		hostname, ok := outboundClusterHost(rule.Global.Cluster)
		if !ok {
			problems = append(problems, at+": want Istio's name of the service's cluster, outbound|PORT||FQDN")
			continue
		}
		namespace := strings.Split(hostname, ".")[1]
		if !referenced[namespace+"/"+hostname] && !referenced[hostname] {
			problems = append(problems, fmt.Sprintf("%s: no EnvoyFilter on waypoint %s names %s/%s in its %s annotation, so the waypoint has no such cluster", at, waypoint.Name, namespace, hostname, referencedServiceKey))
		}
	}
	return problems
}

// outboundClusterHost returns the service FQDN of an Istio outbound cluster name,
// outbound|PORT|SUBSET|FQDN (Istio's model.BuildSubsetKey), for a Kubernetes service.
func outboundClusterHost(cluster string) (string, bool) {
	parts := strings.Split(cluster, "|")
	if len(parts) != 4 || parts[0] != "outbound" || parts[1] == "" || !strings.HasSuffix(parts[3], ".svc.cluster.local") {
		return "", false
	}
	return parts[3], len(strings.Split(parts[3], ".")) == 5
}

// checkForwardedForPolicy checks an AuthorizationPolicy that guards x-forwarded-for at the
// waypoint: it must refuse the header from everyone but the ingress gateways of these manifests,
// whose entries Tollgate then keys on.
func checkForwardedForPolicy(where string, p *authorizationPolicy, gateways []*gwapiv1.Gateway) []string {
	var guard *securityv1beta1.Rule
	for _, rule := range p.spec.GetRules() {
		if slices.ContainsFunc(rule.GetWhen(), func(c *securityv1beta1.Condition) bool { return c.GetKey() == forwardedForKey }) {
			guard = rule
		}
	}
	if guard == nil {
		return nil
	}
	var problems []string
	if p.spec.GetAction() != securityv1beta1.AuthorizationPolicy_DENY {
		problems = append(problems, fmt.Sprintf("%s: spec.action: %s: want DENY, refusing x-forwarded-for from the workloads of the mesh", where, p.spec.GetAction()))
	}
	for _, c := range guard.GetWhen() {
		if c.GetKey() == forwardedForKey && !slices.Equal(c.GetValues(), []string{"*"}) {
			problems = append(problems, fmt.Sprintf("%s: the %s condition: values %q: want [\"*\"], any value", where, forwardedForKey, c.GetValues()))
		}
	}
	var trusted []string
	for _, from := range guard.GetFrom() {
		trusted = append(trusted, from.GetSource().GetNotNamespaces()...)
	}
	for _, g := range gateways {
		if g.Spec.GatewayClassName != waypointClass && !slices.Contains(trusted, g.Namespace) {
			problems = append(problems, fmt.Sprintf("%s: the rule with %s: from.source.notNamespaces %q lacks %s, the namespace of Gateway %s: the waypoint would refuse every request the gateway forwards", where, forwardedForKey, trusted, g.Namespace, g.Name))
		}
	}
	return problems
}

func readAmbientObjects(t *testing.T, files []string, edit func(file string, data []byte) []byte) (*ambientObjects, error) {
	t.Helper()
	objs := &ambientObjects{}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			data = edit(file, data)
		}
		if err := decodeAmbientManifest(file, data, objs, crdValidatorsFor(t)); err != nil {
			return objs, err
		}
	}
	if problems := checkAmbient(objs); len(problems) > 0 {
		return objs, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return objs, nil
}

func TestShippedAmbientManifestsAreValid(t *testing.T) {
	for name, set := range map[string][]string{"local": ambientLocalSet, "global": ambientGlobalSet} {
		t.Run(name, func(t *testing.T) {
			objs, err := readAmbientObjects(t, set, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range objs.plugins {
				text, _ := protojson.Marshal(p.spec.GetPluginConfig())
				t.Logf("%s/%s: the module receives %s", p.meta.Namespace, p.meta.Name, text)
			}
		})
	}
	var listed []string
	for _, set := range [][]string{ambientLocalSet, ambientGlobalSet} {
		listed = append(listed, set...)
	}
	for _, f := range ambientManifests {
		if !slices.Contains(listed, f) {
			t.Errorf("%s is in no set that TestShippedAmbientManifestsAreValid checks", f)
		}
	}
	// The two waypoint plugins are one object, so that applying one replaces the other.
	var names []string
	for _, file := range []string{"deploy/istio/ambient/wasmplugin-waypoint.yaml", "deploy/istio/ambient/wasmplugin-waypoint-global.yaml"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		p, err := checkWasmPlugin(file, data)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, p.meta.Namespace+"/"+p.meta.Name)
	}
	if names[0] != names[1] {
		t.Errorf("the waypoint plugins are %s and %s; want one name", names[0], names[1])
	}
}

// A mutated copy of a shipped ambient manifest is refused for the stated reason.
func TestAmbientCheckRefusesMutations(t *testing.T) {
	const (
		waypoint = "deploy/istio/ambient/waypoint.yaml"
		plugin   = "deploy/istio/ambient/wasmplugin-waypoint.yaml"
		global   = "deploy/istio/ambient/wasmplugin-waypoint-global.yaml"
		ingress  = "deploy/istio/ambient/ingress.yaml"
		edge     = "deploy/istio/ambient/wasmplugin-ingress.yaml"
		policy   = "deploy/istio/ambient/authorizationpolicy-forwarded-for.yaml"
		filter   = "deploy/istio/ambient/ratelimit-reference.yaml"
		rlHost   = "ratelimit/ratelimit.ratelimit.svc.cluster.local"
	)
	tests := []struct {
		name, file, old, new string
		want                 []string
	}{
		{"waypoint of another class", waypoint, "gatewayClassName: istio-waypoint", "gatewayClassName: istio",
			[]string{`Gateway waypoint: spec.gatewayClassName "istio": the istio.io/waypoint-for label says a waypoint`}},
		{"waypoint for nothing", waypoint, "istio.io/waypoint-for: service", "istio.io/waypoint-for: none",
			[]string{`metadata.labels[istio.io/waypoint-for]: "none"`}},
		{"waypoint without its label", waypoint, "    istio.io/waypoint-for: service\n", "    app: waypoint\n",
			[]string{`metadata.labels[istio.io/waypoint-for]: ""`}},
		{"waypoint listener not HBONE", waypoint, "protocol: HBONE", "protocol: HTTP",
			[]string{"spec.listeners: want the listener istioctl writes, port 15008 protocol HBONE"}},
		{"waypoint listener port out of range", waypoint, "port: 15008", "port: 0",
			[]string{"Gateway: the CRD refuses it", "spec.listeners[0].port"}},
		{"target misspelt", plugin, "    name: waypoint", "    name: waypont",
			[]string{"WasmPlugin tollgate: spec.targetRefs[0]: Gateway default/waypont", "is not a Gateway of these manifests"}},
		{"target in another namespace", plugin, "    name: waypoint", "    name: waypoint\n    namespace: istio-system",
			[]string{"WasmPlugin: the CRD refuses it", "cross namespace referencing is not currently supported", "spec.targetRefs[0].namespace"}},
		{"target of a kind Istio does not attach to", plugin, "    kind: Gateway", "    kind: HTTPRoute",
			[]string{`spec.targetRefs[0]: HTTPRoute (group "gateway.networking.k8s.io"): Istio attaches a WasmPlugin to a Gateway`}},
		{"selector and targetRefs", plugin, "  targetRefs:", "  selector:\n    matchLabels:\n      app: my-api\n  targetRefs:",
			[]string{"only one of targetRefs or selector can be set", "spec.selector: set with targetRefs"}},
		{"waypoint plugin for mode CLIENT", plugin, "  pluginConfig:", "  match:\n  - mode: CLIENT\n  pluginConfig:",
			[]string{"spec.match[0].mode: CLIENT never applies on Gateway waypoint: a waypoint's listeners are mode SERVER"}},
		{"gateway plugin for mode SERVER", edge, "  pluginConfig:", "  match:\n  - mode: SERVER\n  pluginConfig:",
			[]string{"spec.match[0].mode: SERVER never applies on Gateway ingress: a gateway's listeners are mode CLIENT"}},
		{"Tollgate field misspelt", plugin, "refill_interval: 1s\n    - name: per-api-key", "refill_intervall: 1s\n    - name: per-api-key",
			[]string{"spec.pluginConfig: Tollgate refuses it", `unknown field "refill_intervall"`}},
		{"route on another gateway", ingress, "  - name: ingress", "  - name: ingres",
			[]string{"HTTPRoute my-api: spec.parentRefs[0]: istio-ingress/ingres is not a Gateway"}},
		{"route from a namespace the gateway refuses", ingress, "from: All", "from: Same",
			[]string{"Gateway istio-ingress/ingress admits no route of namespace default"}},
		{"policy allows instead", policy, "action: DENY", "action: ALLOW",
			[]string{"spec.action: ALLOW: want DENY"}},
		{"policy field misspelt", policy, "notNamespaces:", "notNamespace:",
			[]string{"spec is not an Istio AuthorizationPolicy", "notNamespace"}},
		{"policy refuses the ingress gateway too", policy, "- istio-ingress", "- istio-system",
			[]string{`lacks istio-ingress, the namespace of Gateway ingress`}},
		{"policy matches one value only", policy, `- "*"`, `- "10.0.0.1"`,
			[]string{`values ["10.0.0.1"]: want ["*"]`}},
		{"policy on a misspelt waypoint", policy, "    name: waypoint", "    name: waypont",
			[]string{"AuthorizationPolicy forwarded-for-from-ingress-only: spec.targetRefs[0]"}},
		{"reference to another service", filter, rlHost, "ratelimit/ratelimit.default.svc.cluster.local",
			[]string{`rules[0].global.cluster: "outbound|8081||ratelimit.ratelimit.svc.cluster.local": no EnvoyFilter on waypoint waypoint names ratelimit/ratelimit.ratelimit.svc.cluster.local`}},
		{"reference annotation misspelt", filter, "envoyfilter.istio.io/referenced-services:", "envoyfilter.istio.io/referenced-service:",
			[]string{"no EnvoyFilter on waypoint waypoint names"}},
		{"cluster not Istio's", global, "cluster: outbound|8081||ratelimit.ratelimit.svc.cluster.local", "cluster: ratelimit",
			[]string{`global.cluster: "ratelimit": want Istio's name of the service's cluster, outbound|PORT||FQDN`}},
		{"EnvoyFilter of an unknown version", filter, "apiVersion: networking.istio.io/v1alpha3", "apiVersion: networking.istio.io/v1",
			[]string{`apiVersion "networking.istio.io/v1" kind "EnvoyFilter"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := ambientLocalSet
			if slices.Contains(ambientGlobalSet, tt.file) && !slices.Contains(ambientLocalSet, tt.file) {
				set = ambientGlobalSet
			}
			_, err := readAmbientObjects(t, set, func(file string, data []byte) []byte {
				if file != tt.file {
					return data
				}
				if n := strings.Count(string(data), tt.old); n != 1 {
					t.Fatalf("%s contains %q %d times; the mutation needs it exactly once", file, tt.old, n)
				}
				return []byte(strings.Replace(string(data), tt.old, tt.new, 1))
			})
			if err == nil {
				t.Fatalf("the mutated %s passed", tt.file)
			}
			t.Logf("refused: %v", err)
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the report lacks %q:\n%v", want, err)
				}
			}
		})
	}
}
