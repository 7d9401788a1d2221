package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/tollgate-proxy/tollgate/config"
)

// envoyGatewayManifests are the Envoy Gateway manifests the repository ships. The two
// EnvoyExtensionPolicies are alternatives (the same object loading the module from an image or
// over HTTPS); each is checked together with the Gateway and the HTTPRoute it attaches to.
var envoyGatewayManifests = []string{
	"deploy/envoy-gateway/gateway.yaml",
	"deploy/envoy-gateway/httproute.yaml",
	"deploy/envoy-gateway/extension-policy.yaml",
	"deploy/envoy-gateway/https/extension-policy.yaml",
}

// envoyGatewayObjects is what a set of manifests declares, by kind.
type envoyGatewayObjects struct {
	gatewayClasses []*gwapiv1.GatewayClass
	gateways       []*gwapiv1.Gateway
	routes         []*gwapiv1.HTTPRoute
	policies       []*egv1a1.EnvoyExtensionPolicy
}

// decodeEnvoyGatewayManifest decodes every document of a manifest into the API type of its
// kind the way the API server does: YAML with a duplicated key refused, then JSON decoded
// case-sensitively with unknown and duplicated fields refused (sigs.k8s.io/json, the API
// server's strict decoder), into Envoy Gateway's v1alpha1 and the Gateway API's v1 types; then
// validates it against the kind's CRD, schema and CEL rules (crd_test.go).
func decodeEnvoyGatewayManifest(name string, data []byte, into *envoyGatewayObjects, crds map[string]*crdValidator) error {
	docs, err := manifestDocuments(name, data)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		var obj any
		switch doc.kind {
		case "gateway.networking.k8s.io/v1 GatewayClass":
			o := &gwapiv1.GatewayClass{}
			into.gatewayClasses, obj = append(into.gatewayClasses, o), o
		case "gateway.networking.k8s.io/v1 Gateway":
			o := &gwapiv1.Gateway{}
			into.gateways, obj = append(into.gateways, o), o
		case "gateway.networking.k8s.io/v1 HTTPRoute":
			o := &gwapiv1.HTTPRoute{}
			into.routes, obj = append(into.routes, o), o
		case "gateway.envoyproxy.io/v1alpha1 EnvoyExtensionPolicy":
			o := &egv1a1.EnvoyExtensionPolicy{}
			into.policies, obj = append(into.policies, o), o
		default:
			return fmt.Errorf("%s: document %d: %s: want a Gateway API v1 GatewayClass, Gateway or HTTPRoute, or a gateway.envoyproxy.io/v1alpha1 EnvoyExtensionPolicy", name, doc.number, doc.describe())
		}
		if err := decodeStrict(name, doc, obj, crds); err != nil {
			return err
		}
	}
	return nil
}

// manifestDocument is one document of a Kubernetes manifest, as JSON.
type manifestDocument struct {
	number int    // 1-based, in the file
	kind   string // "APIVERSION KIND", the key of crdFiles
	json   []byte
}

func (d manifestDocument) describe() string {
	apiVersion, kind, _ := strings.Cut(d.kind, " ")
	return fmt.Sprintf("apiVersion %q kind %q", apiVersion, kind)
}

// manifestDocuments splits a manifest into its documents, each YAML with a duplicated key
// refused, then turned into JSON; empty documents are skipped.
func manifestDocuments(name string, data []byte) ([]manifestDocument, error) {
	var docs []manifestDocument
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for number := 1; ; number++ {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, number, err)
		}
		jsonData, err := yaml.YAMLToJSONStrict(chunk)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: not YAML: %w", name, number, err)
		}
		if string(jsonData) == "null" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(jsonData, &head); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, number, err)
		}
		docs = append(docs, manifestDocument{number: number, kind: head.APIVersion + " " + head.Kind, json: jsonData})
	}
}

// decodeStrict decodes a document into its Go type the way the API server does (JSON decoded
// case-sensitively with unknown and duplicated fields refused: sigs.k8s.io/json, the API
// server's strict decoder), then validates it against its kind's CRD (crd_test.go).
func decodeStrict(name string, doc manifestDocument, obj any, crds map[string]*crdValidator) error {
	_, kind, _ := strings.Cut(doc.kind, " ")
	strict, err := kjson.UnmarshalStrict(doc.json, obj, kjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, kind, err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("%s: %s: %w", name, kind, errors.Join(strict...))
	}
	return validateCRD(name, doc, crds)
}

// validateCRD returns what the API server would refuse in a document, by its kind's CRD.
func validateCRD(name string, doc manifestDocument, crds map[string]*crdValidator) error {
	_, kind, _ := strings.Cut(doc.kind, " ")
	crd := crds[doc.kind]
	if crd == nil {
		return fmt.Errorf("%s: %s: no CRD to validate it against", name, kind)
	}
	invalid, err := crd.validate(doc.json)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, kind, err)
	}
	if len(invalid) > 0 {
		return fmt.Errorf("%s: %s: the CRD refuses it: %w", name, kind, invalid.ToAggregate())
	}
	return nil
}

// envoyGatewaySHA256 is the form Envoy wants a module's checksum in (see sha256Hex); Envoy
// Gateway passes an HTTP source's sha256 on, and compares an image's with its digest.
var envoyGatewaySHA256 = regexp.MustCompile(`^[a-f0-9]{64}$`)

// checkEnvoyGateway checks that the objects fit together (the policy's targets, the route's
// Gateway, the Gateway's class), what the README asks of a Tollgate EnvoyExtensionPolicy, the
// rules Envoy Gateway's CRD states in CEL for a code source, and the embedded configuration
// with the code the module runs, after the API server's round trip.
func checkEnvoyGateway(objs *envoyGatewayObjects) []string {
	var problems []string
	add := func(where, format string, args ...any) {
		problems = append(problems, where+": "+fmt.Sprintf(format, args...))
	}
	classes := map[string]bool{}
	for _, c := range objs.gatewayClasses {
		classes[c.Name] = true
		if c.Spec.ControllerName != "gateway.envoyproxy.io/gatewayclass-controller" {
			add("GatewayClass "+c.Name, "spec.controllerName %q: Envoy Gateway's is gateway.envoyproxy.io/gatewayclass-controller", c.Spec.ControllerName)
		}
	}
	gateways := map[string]bool{}
	for _, g := range objs.gateways {
		gateways[g.Namespace+"/"+g.Name] = true
		if len(objs.gatewayClasses) > 0 && !classes[string(g.Spec.GatewayClassName)] {
			add("Gateway "+g.Name, "spec.gatewayClassName %q is not a GatewayClass of these manifests", g.Spec.GatewayClassName)
		}
	}
	routes := map[string]bool{}
	for _, r := range objs.routes {
		routes[r.Namespace+"/"+r.Name] = true
		for i, p := range r.Spec.ParentRefs {
			ns := r.Namespace
			if p.Namespace != nil {
				ns = string(*p.Namespace)
			}
			if !gateways[ns+"/"+string(p.Name)] {
				add("HTTPRoute "+r.Name, "spec.parentRefs[%d]: %s/%s is not a Gateway of these manifests", i, ns, p.Name)
			}
		}
	}
	for _, p := range objs.policies {
		where := "EnvoyExtensionPolicy " + p.Name
		targets := p.Spec.GetTargetRefs()
		if len(targets) == 0 {
			add(where, "spec.targetRefs: empty: name the HTTPRoute (or Gateway) that runs Tollgate")
		}
		for i, t := range targets {
			known := (t.Kind == "HTTPRoute" && routes[p.Namespace+"/"+string(t.Name)]) || (t.Kind == "Gateway" && gateways[p.Namespace+"/"+string(t.Name)])
			if t.Group != gwapiv1.GroupName || !known {
				add(where, "spec.targetRefs[%d]: %s %s/%s (group %q) is not an HTTPRoute or Gateway of these manifests in the policy's namespace", i, t.Kind, p.Namespace, t.Name, t.Group)
			}
		}
		if len(p.Spec.Wasm) != 1 {
			add(where, "spec.wasm: %d entries, want the one that runs Tollgate", len(p.Spec.Wasm))
		}
		for i, w := range p.Spec.Wasm {
			at := fmt.Sprintf("spec.wasm[%d]", i)
			if w.Name == nil || *w.Name == "" {
				add(where, "%s.name: not set: name the plugin (Envoy's logs show it)", at)
			}
			if w.FailOpen == nil {
				add(where, "%s.failOpen: not set: say what the route does while the module cannot run", at)
			}
			problems = append(problems, checkWasmCode(where, at+".code", w.Code)...)
			if w.Config == nil {
				add(where, "%s.config: missing: Tollgate refuses to start without rules", at)
				continue
			}
			received, err := apiServerRoundTrip(w.Config.Raw)
			if err != nil {
				add(where, "%s.config: %v", at, err)
				continue
			}
			if _, err := config.Parse(received); err != nil {
				add(where, "%s.config: Tollgate refuses it: %v", at, err)
			}
		}
	}
	return problems
}

// checkWasmCode checks a code source for what loading Tollgate needs. The CRD's own rules (type
// HTTP has http and not image, type Image has image and not http) ran before; the first two
// cases only keep a source that broke them from being read.
func checkWasmCode(where, at string, code egv1a1.WasmCodeSource) []string {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, where+": "+at+fmt.Sprintf(format, args...))
	}
	switch code.Type {
	case egv1a1.HTTPWasmCodeSourceType:
		if code.HTTP == nil || code.Image != nil {
			add(": type HTTP needs http and no image")
			break
		}
		if !strings.HasPrefix(code.HTTP.URL, "https://") || !strings.HasSuffix(code.HTTP.URL, ".wasm") {
			add(".http.url: %q: want the module over https", code.HTTP.URL)
		}
		if code.HTTP.SHA256 == nil || !envoyGatewaySHA256.MatchString(*code.HTTP.SHA256) {
			add(".http.sha256: want the module's SHA-256 as 64 lowercase hex digits (build/tollgate.wasm.sha256), or Envoy Gateway loads whatever the URL serves")
		}
	case egv1a1.ImageWasmCodeSourceType:
		if code.Image == nil || code.HTTP != nil {
			add(": type Image needs image and no http")
			break
		}
		url := strings.TrimPrefix(code.Image.URL, "oci://")
		lastPart := url[strings.LastIndex(url, "/")+1:]
		if !strings.Contains(lastPart, ":") && !strings.Contains(url, "@sha256:") || strings.HasSuffix(url, ":latest") {
			add(".image.url: %q: pin a tag or a digest (Envoy Gateway pulls latest without one)", code.Image.URL)
		}
		if code.Image.SHA256 != nil && !envoyGatewaySHA256.MatchString(*code.Image.SHA256) {
			add(".image.sha256: %q: want the image's digest as 64 lowercase hex digits (what make image prints after sha256:)", *code.Image.SHA256)
		}
	default:
		add(".type: %q: want HTTP or Image", code.Type)
	}
	return problems
}

// apiServerRoundTrip returns the configuration as Envoy Gateway hands it to the module. The API
// server stores a custom resource as JSON decoded without a schema for the free-form config
// (k8s.io/apimachinery util/json: whole numbers become int64, others float64) and encodes it
// again; Envoy Gateway passes those bytes on unchanged as the plugin configuration
// (internal/xds/translator/wasm.go: the config's raw JSON in a StringValue). So 100, 100.0 and
// 1e2 all reach the module as 100, and 1.5 as 1.5.
func apiServerRoundTrip(raw []byte) ([]byte, error) {
	var v any
	if err := utiljson.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func readEnvoyGatewayObjects(t *testing.T, files ...string) *envoyGatewayObjects {
	t.Helper()
	objs := &envoyGatewayObjects{}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeEnvoyGatewayManifest(file, data, objs, crdValidatorsFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

func TestShippedEnvoyGatewayManifestsAreValid(t *testing.T) {
	base := []string{"deploy/envoy-gateway/gateway.yaml", "deploy/envoy-gateway/httproute.yaml"}
	for _, policy := range []string{"deploy/envoy-gateway/extension-policy.yaml", "deploy/envoy-gateway/https/extension-policy.yaml"} {
		t.Run(policy, func(t *testing.T) {
			objs := readEnvoyGatewayObjects(t, append(base, policy)...)
			if len(objs.gatewayClasses) != 1 || len(objs.gateways) != 1 || len(objs.routes) != 1 || len(objs.policies) != 1 {
				t.Fatalf("%d GatewayClasses, %d Gateways, %d HTTPRoutes, %d policies; want one of each", len(objs.gatewayClasses), len(objs.gateways), len(objs.routes), len(objs.policies))
			}
			if problems := checkEnvoyGateway(objs); len(problems) > 0 {
				t.Fatal(strings.Join(problems, "\n"))
			}
			received, _ := apiServerRoundTrip(objs.policies[0].Spec.Wasm[0].Config.Raw)
			t.Logf("the module receives %s", received)
		})
	}
	// Both policies are one object, so applying one replaces the other, and they load the same
	// configuration.
	image := readEnvoyGatewayObjects(t, "deploy/envoy-gateway/extension-policy.yaml").policies[0]
	http := readEnvoyGatewayObjects(t, "deploy/envoy-gateway/https/extension-policy.yaml").policies[0]
	if image.Namespace+"/"+image.Name != http.Namespace+"/"+http.Name {
		t.Errorf("the policies are %s/%s and %s/%s; want one name, so that they replace each other", image.Namespace, image.Name, http.Namespace, http.Name)
	}
	imageConfig, _ := config.Parse(image.Spec.Wasm[0].Config.Raw)
	httpConfig, _ := config.Parse(http.Spec.Wasm[0].Config.Raw)
	if !reflect.DeepEqual(imageConfig, httpConfig) {
		t.Error("the two policies load different Tollgate configurations")
	}
}

// The API server's round trip keeps what Tollgate reads: numbers written as 100, 100.0 or 1e2
// reach the module as 100 and parse as the same configuration.
func TestEnvoyGatewayConfigNumbersSurviveTheAPIServer(t *testing.T) {
	var parsed []*config.Config
	for _, capacity := range []string{"100", "100.0", "1e2"} {
		raw := `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}], "limits": [{"capacity": ` + capacity + `, "refill_tokens": 10, "refill_interval": "1s"}]}]}`
		received, err := apiServerRoundTrip([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(received), `"capacity":100,`) {
			t.Errorf("capacity %s reaches the module as %s", capacity, received)
		}
		cfg, err := config.Parse(received)
		if err != nil {
			t.Fatalf("capacity %s: %v", capacity, err)
		}
		parsed = append(parsed, cfg)
	}
	for _, cfg := range parsed[1:] {
		if !reflect.DeepEqual(cfg, parsed[0]) {
			t.Errorf("%+v differs from %+v", cfg, parsed[0])
		}
	}
}

// A mutated copy of a shipped manifest is refused for the stated reason.
func TestEnvoyGatewayCheckRefusesMutations(t *testing.T) {
	const (
		image = "deploy/envoy-gateway/extension-policy.yaml"
		http  = "deploy/envoy-gateway/https/extension-policy.yaml"
		route = "deploy/envoy-gateway/httproute.yaml"
		gw    = "deploy/envoy-gateway/gateway.yaml"
		zeros = `"0000000000000000000000000000000000000000000000000000000000000000"`
	)
	tests := []struct {
		name, file, old, new string
		want                 []string
	}{
		{"misspelt field", image, "failOpen: false", "failopen: false",
			[]string{image, `unknown field "spec.wasm[0].failopen"`}},
		{"unknown field", image, "    failOpen: false\n", "    failOpen: false\n    priority: 1\n",
			[]string{`unknown field "spec.wasm[0].priority"`}},
		{"misspelt metadata", image, "  namespace: default", "  namespce: default",
			[]string{`unknown field "metadata.namespce"`}},
		{"field repeated", image, "    failOpen: false\n", "    failOpen: false\n    failOpen: true\n",
			[]string{"not YAML", `key "failOpen" already set`}},
		{"wrong type", image, "failOpen: false", `failOpen: "no"`,
			[]string{"EnvoyExtensionPolicy", "failOpen"}},
		{"unknown kind", image, "kind: EnvoyExtensionPolicy", "kind: EnvoyExtensionPolcy",
			[]string{`kind "EnvoyExtensionPolcy"`}},
		{"old API version", route, "apiVersion: gateway.networking.k8s.io/v1", "apiVersion: gateway.networking.k8s.io/v1beta1",
			[]string{`apiVersion "gateway.networking.k8s.io/v1beta1"`}},
		{"target misspelt", image, "    name: my-api", "    name: my-apj",
			[]string{"spec.targetRefs[0]: HTTPRoute default/my-apj", "is not an HTTPRoute or Gateway of these manifests"}},
		{"route on another Gateway", route, "  - name: eg", "  - name: eg2",
			[]string{"HTTPRoute my-api: spec.parentRefs[0]: default/eg2 is not a Gateway"}},
		{"Gateway of another class", gw, "  gatewayClassName: eg", "  gatewayClassName: istio",
			[]string{`spec.gatewayClassName "istio" is not a GatewayClass`}},
		{"image source with http", image, "      type: Image", "      type: HTTP",
			[]string{"the CRD refuses it", "spec.wasm[0].code: Invalid value: If type is HTTP, http field needs to be set"}},
		{"unknown source type", image, "      type: Image", "      type: OCI",
			[]string{"the CRD refuses it", `spec.wasm[0].code.type: Unsupported value: "OCI"`}},
		{"path match type misspelt", route, "type: PathPrefix", "type: Prefix",
			[]string{"HTTPRoute: the CRD refuses it", `Unsupported value: "Prefix"`}},
		{"listener port out of range", gw, "port: 80", "port: 0",
			[]string{"Gateway: the CRD refuses it", "spec.listeners[0].port"}},
		{"policy on a Service", image, "    kind: HTTPRoute", "    kind: Service",
			[]string{"EnvoyExtensionPolicy: the CRD refuses it", "targetRefs[*].kind of Gateway/ListenerSet/HTTPRoute"}},
		{"latest image", image, "url: registry.example.com/tollgate:0.1.0", "url: registry.example.com/tollgate:latest",
			[]string{"spec.wasm[0].code.image.url", "pin a tag or a digest"}},
		{"image without a tag", image, "url: registry.example.com/tollgate:0.1.0", "url: oci://registry.example.com:5000/tollgate",
			[]string{"spec.wasm[0].code.image.url", "pin a tag or a digest"}},
		{"checksum missing", http, "        sha256: " + zeros + "\n", "",
			[]string{"spec.wasm[0].code.http.sha256: want the module's SHA-256"}},
		{"checksum with a prefix", http, "sha256: " + zeros, `sha256: "sha256:0000"`,
			[]string{"spec.wasm[0].code.http.sha256"}},
		{"checksum unquoted", http, "sha256: " + zeros, "sha256: 0000000000000000000000000000000000000000000000000000000000000000",
			[]string{"EnvoyExtensionPolicy", "sha256"}},
		{"plain http", http, "url: https://", "url: http://",
			[]string{"spec.wasm[0].code.http.url", "over https"}},
		{"failOpen left to the default", image, "    failOpen: false\n", "",
			[]string{"spec.wasm[0].failOpen: not set"}},
		{"Tollgate field misspelt", image, "refill_interval: 1s", "refill_intervall: 1s",
			[]string{"spec.wasm[0].config: Tollgate refuses it", `unknown field "refill_intervall"`}},
		{"Tollgate value wrong", http, "refill_interval: 1s", "refill_interval: 1",
			[]string{"spec.wasm[0].config: Tollgate refuses it", "rules[0].limits[0].refill_interval"}},
		{"Tollgate number not whole", image, "capacity: 100", "capacity: 100.5",
			[]string{"spec.wasm[0].config: Tollgate refuses it", "rules[0].limits[0].capacity"}},
	}
	crds := crdValidatorsFor(t)
	all := map[string][]byte{}
	for _, f := range envoyGatewayManifests {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		all[f] = data
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := strings.Count(string(all[tt.file]), tt.old); n != 1 {
				t.Fatalf("%s contains %q %d times; the mutation needs it exactly once", tt.file, tt.old, n)
			}
			policy := image
			if tt.file == http {
				policy = http
			}
			objs := &envoyGatewayObjects{}
			var err error
			for _, f := range []string{gw, route, policy} {
				data := all[f]
				if f == tt.file {
					data = []byte(strings.Replace(string(data), tt.old, tt.new, 1))
				}
				if err = decodeEnvoyGatewayManifest(f, data, objs, crds); err != nil {
					break
				}
			}
			if err == nil {
				if problems := checkEnvoyGateway(objs); len(problems) > 0 {
					err = errors.New(strings.Join(problems, "\n"))
				}
			}
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
