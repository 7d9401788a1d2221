package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	extensionsv1alpha1 "istio.io/api/extensions/v1alpha1"
	typev1beta1 "istio.io/api/type/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/tollgate-proxy/tollgate/config"
)

// istioManifests are the Istio manifests the repository ships.
var istioManifests = []string{"deploy/istio/wasmplugin.yaml"}

const wasmPluginKind = "extensions.istio.io/v1alpha1 WasmPlugin"

// wasmPlugin is a WasmPlugin manifest as the tests see it.
type wasmPlugin struct {
	spec *extensionsv1alpha1.WasmPlugin
	istioObject
}

// istioMeta is the metadata of an Istio object that the checks read; any other metadata field is
// refused, as a misspelling would be.
type istioMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// istioObject is an Istio object decoded by decodeIstioObject.
type istioObject struct {
	meta istioMeta
	// set lists the spec fields the manifest writes, by their JSON names.
	set map[string]bool
}

// decodeIstioObject decodes an Istio object, given as JSON, of the kind ("APIVERSION KIND"):
// the envelope with unknown fields refused, and the spec into Istio's API type with protojson
// (unknown fields and unknown enum values refused).
func decodeIstioObject(name, kind string, jsonData []byte, spec proto.Message) (istioObject, error) {
	var manifest struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   istioMeta       `json:"metadata"`
		Spec       json.RawMessage `json:"spec"`
	}
	decoder := json.NewDecoder(bytes.NewReader(jsonData))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&manifest); err != nil {
		return istioObject{}, fmt.Errorf("%s: %w", name, err)
	}
	apiVersion, kindName, _ := strings.Cut(kind, " ")
	if manifest.APIVersion != apiVersion || manifest.Kind != kindName {
		return istioObject{}, fmt.Errorf("%s: apiVersion/kind: %s/%s, want %s %s", name, manifest.APIVersion, manifest.Kind, apiVersion, kindName)
	}
	if manifest.Metadata.Name == "" {
		return istioObject{}, fmt.Errorf("%s: metadata.name: empty", name)
	}
	if err := protojson.Unmarshal(manifest.Spec, spec); err != nil {
		return istioObject{}, fmt.Errorf("%s: spec is not an Istio %s: %w", name, kindName, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(manifest.Spec, &fields); err != nil {
		return istioObject{}, fmt.Errorf("%s: spec: %w", name, err)
	}
	obj := istioObject{meta: manifest.Metadata, set: map[string]bool{}}
	for field := range fields {
		obj.set[field] = true
	}
	return obj, nil
}

// istioTargetKinds are the kinds Istio lets a policy's targetRefs name, by group (Istio's
// pkg/config/validation/validation.go, allowedTargetRefs; "" is the core group).
var istioTargetKinds = map[string][]string{
	"":                          {"Service"},
	"networking.istio.io":       {"ServiceEntry"},
	"gateway.networking.k8s.io": {"Gateway", "GatewayClass"},
}

// checkTargetRefs checks what Istio's validation checks of a WasmPlugin's targetRefs: a kind it
// can attach to, no namespace (never across namespaces), and no selector besides.
func checkTargetRefs(name string, spec *extensionsv1alpha1.WasmPlugin) []string {
	var problems []string
	if spec.GetSelector() != nil {
		problems = append(problems, name+": spec.selector: set with targetRefs: Istio takes one or the other")
	}
	for i, ref := range spec.GetTargetRefs() {
		if !slices.Contains(istioTargetKinds[ref.GetGroup()], ref.GetKind()) {
			problems = append(problems, fmt.Sprintf("%s: spec.targetRefs[%d]: %s (group %q): Istio attaches a WasmPlugin to a Gateway or GatewayClass (group gateway.networking.k8s.io), a Service or a ServiceEntry", name, i, ref.GetKind(), ref.GetGroup()))
		}
		if ref.GetNamespace() != "" {
			problems = append(problems, fmt.Sprintf("%s: spec.targetRefs[%d].namespace: %q: Istio never attaches across namespaces; put the WasmPlugin in the target's namespace", name, i, ref.GetNamespace()))
		}
	}
	return problems
}

// checkWasmPlugin reads a WasmPlugin manifest against Istio's API (extensions.istio.io/v1alpha1,
// unknown fields and unknown enum values rejected) and Istio's CRD (schema and CEL rules), checks what docs/istio.md asks of a Tollgate
// WasmPlugin, and checks its pluginConfig the way the module will see it: Istio turns the
// Struct into JSON (every number a double) and the module parses that with config.Parse. It
// returns every problem, each naming the file and the field.
func checkWasmPlugin(name string, yamlData []byte) (*wasmPlugin, error) {
	jsonData, err := yaml.YAMLToJSONStrict(yamlData)
	if err != nil {
		return nil, fmt.Errorf("%s: not YAML: %w", name, err)
	}
	plugin := &wasmPlugin{spec: &extensionsv1alpha1.WasmPlugin{}}
	var problems []string
	add := func(field, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: %s: %s", name, field, fmt.Sprintf(format, args...)))
	}
	obj, err := decodeIstioObject(name, wasmPluginKind, jsonData, plugin.spec)
	if err != nil {
		return nil, err
	}
	plugin.istioObject = obj
	if crds, err := loadCRDValidators(); err != nil {
		return nil, err
	} else if err := validateCRD(name, manifestDocument{kind: wasmPluginKind, json: jsonData}, crds); err != nil {
		problems = append(problems, err.Error())
	}
	spec := plugin.spec
	if len(spec.GetTargetRefs()) > 0 {
		problems = append(problems, checkTargetRefs(name, spec)...)
	} else if len(spec.GetSelector().GetMatchLabels()) == 0 {
		add("spec.selector", "missing: say which workloads run Tollgate (matchLabels), or which waypoint or Gateway (targetRefs), or every workload of the namespace will")
	}
	if !strings.HasPrefix(spec.GetUrl(), "oci://") {
		add("spec.url", "%q: want the image `make image` builds, as oci://REGISTRY/REPOSITORY:TAG", spec.GetUrl())
	}
	if strings.HasSuffix(spec.GetUrl(), ":latest") {
		add("spec.url", "%q: pin a tag or a digest", spec.GetUrl())
	}
	if spec.GetPhase() == extensionsv1alpha1.PluginPhase_UNSPECIFIED_PHASE {
		add("spec.phase", "not set: say where the filter runs relative to Istio's authn, authz and stats filters")
	}
	if spec.GetPriority() == nil {
		add("spec.priority", "not set")
	}
	if !plugin.set["failStrategy"] {
		add("spec.failStrategy", "not set: say FAIL_OPEN or FAIL_CLOSE (the default) explicitly")
	}
	serverOnly := len(spec.GetMatch()) > 0
	for _, m := range spec.GetMatch() {
		serverOnly = serverOnly && m.GetMode() == typev1beta1.WorkloadMode_SERVER
	}
	// With targetRefs the target decides which listeners run the plugin; checkAmbient checks a
	// match against the targeted Gateway's class.
	if !serverOnly && len(spec.GetTargetRefs()) == 0 {
		add("spec.match", "want mode SERVER only: otherwise the sidecar also limits the workload's outbound requests")
	}
	if spec.GetPluginConfig() == nil {
		add("spec.pluginConfig", "missing: Tollgate refuses to start without rules")
	} else if text, err := protojson.Marshal(spec.GetPluginConfig()); err != nil {
		add("spec.pluginConfig", "%v", err)
	} else if _, err := config.Parse(text); err != nil {
		add("spec.pluginConfig", "Tollgate refuses it: %v", err)
	}
	if len(problems) > 0 {
		return plugin, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return plugin, nil
}

func TestShippedWasmPluginsAreValid(t *testing.T) {
	for _, file := range istioManifests {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(repoRoot, file))
			if err != nil {
				t.Fatal(err)
			}
			plugin, err := checkWasmPlugin(file, data)
			if err != nil {
				t.Fatal(err)
			}
			text, _ := protojson.Marshal(plugin.spec.GetPluginConfig())
			t.Logf("the module receives %s", text)
		})
	}
}

// A mutated copy of the shipped WasmPlugin is refused for the stated reason.
func TestWasmPluginCheckRefusesMutations(t *testing.T) {
	const file = "deploy/istio/wasmplugin.yaml"
	tests := []struct {
		name, old, new string
		want           []string
	}{
		{"misspelt spec field", "imagePullPolicy: IfNotPresent", "imagePullPolcy: IfNotPresent",
			[]string{"spec is not an Istio WasmPlugin", "imagePullPolcy"}},
		{"Envoy's enum name in Istio", "failStrategy: FAIL_OPEN", "failStrategy: FAIL_OPENED",
			[]string{"spec is not an Istio WasmPlugin", "FAIL_OPENED"}},
		{"Envoy's spelling of fail closed", "failStrategy: FAIL_OPEN", "failStrategy: FAIL_CLOSED",
			[]string{"spec is not an Istio WasmPlugin", "FAIL_CLOSED"}},
		{"unknown phase", "phase: STATS", "phase: STAT",
			[]string{"spec is not an Istio WasmPlugin", "STAT"}},
		{"misspelt metadata", "namespace: default", "namespce: default",
			[]string{`unknown field "namespce"`}},
		{"failStrategy left to the default", "  failStrategy: FAIL_OPEN\n", "",
			[]string{"spec.failStrategy: not set"}},
		{"no selector", "  selector:\n    matchLabels:\n      app: my-api\n", "",
			[]string{"spec.selector: missing"}},
		{"outbound limited too", "  - mode: SERVER\n", "  - mode: CLIENT_AND_SERVER\n",
			[]string{"spec.match: want mode SERVER only"}},
		{"latest tag", "url: oci://registry.example.com/tollgate:0.1.0", "url: oci://registry.example.com/tollgate:latest",
			[]string{"spec.url", "pin a tag"}},
		{"Tollgate field misspelt", "refill_interval: 1s", "refill_intervall: 1s",
			[]string{"spec.pluginConfig: Tollgate refuses it", `unknown field "refill_intervall"`}},
		{"Tollgate value wrong", "refill_interval: 1s", "refill_interval: 1",
			[]string{"spec.pluginConfig: Tollgate refuses it", "rules[0].limits[0].refill_interval"}},
	}
	original, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := strings.Count(string(original), tt.old); n != 1 {
				t.Fatalf("%s contains %q %d times; the mutation needs it exactly once", file, tt.old, n)
			}
			_, err := checkWasmPlugin(file, []byte(strings.Replace(string(original), tt.old, tt.new, 1)))
			if err == nil {
				t.Fatal("the mutated manifest passed")
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
