package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// The CustomResourceDefinitions the manifests are validated against, as shipped in the modules
// whose Go types decode them: Envoy Gateway's generated CRDs, the Gateway API's standard channel
// at the version Envoy Gateway is built with, and Istio's CRDs from istio.io/api (one file holding
// all of them).
var crdFiles = map[string]struct{ module, path string }{
	"gateway.envoyproxy.io/v1alpha1 EnvoyExtensionPolicy": {"github.com/envoyproxy/gateway", "charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_envoyextensionpolicies.yaml"},
	"gateway.networking.k8s.io/v1 GatewayClass":           {"sigs.k8s.io/gateway-api", "config/crd/standard/gateway.networking.k8s.io_gatewayclasses.yaml"},
	"gateway.networking.k8s.io/v1 Gateway":                {"sigs.k8s.io/gateway-api", "config/crd/standard/gateway.networking.k8s.io_gateways.yaml"},
	"gateway.networking.k8s.io/v1 HTTPRoute":              {"sigs.k8s.io/gateway-api", "config/crd/standard/gateway.networking.k8s.io_httproutes.yaml"},
	"extensions.istio.io/v1alpha1 WasmPlugin":             {"istio.io/api", istioCRDs},
	"security.istio.io/v1 AuthorizationPolicy":            {"istio.io/api", istioCRDs},
	"networking.istio.io/v1alpha3 EnvoyFilter":            {"istio.io/api", istioCRDs},
}

// istioCRDs is where istio.io/api keeps the CRDs of all of Istio's kinds.
const istioCRDs = "kubernetes/customresourcedefinitions.gen.yaml"

// crdValidator validates objects of one kind the way the API server does on create, after
// decoding: it applies the schema's defaults (CEL rules read defaulted fields, such as a
// parentRef's group), then checks the OpenAPI schema (types, enums, patterns, required fields,
// limits) and the CEL rules (x-kubernetes-validations).
type crdValidator struct {
	schema     validation.SchemaCreateValidator
	structural *structuralschema.Structural
	rules      *cel.Validator
}

var (
	crdOnce       sync.Once
	crdValidators map[string]*crdValidator
	crdErr        error
)

// crdValidatorsFor loads every CRD of crdFiles once, from the module cache (`go list -m` says
// where each module is).
func crdValidatorsFor(t *testing.T) map[string]*crdValidator {
	t.Helper()
	validators, err := loadCRDValidators()
	if err != nil {
		t.Fatal(err)
	}
	return validators
}

// loadCRDValidators is crdValidatorsFor for code without a *testing.T, such as a document check.
func loadCRDValidators() (map[string]*crdValidator, error) {
	crdOnce.Do(func() {
		crdValidators = map[string]*crdValidator{}
		dirs := map[string]string{}
		for kind, f := range crdFiles {
			dir, ok := dirs[f.module]
			if !ok {
				out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", f.module).Output()
				if err != nil {
					crdErr = fmt.Errorf("go list -m %s: %v", f.module, err)
					return
				}
				dir = strings.TrimSpace(string(out))
				dirs[f.module] = dir
			}
			apiVersion, kindName, _ := strings.Cut(kind, " ")
			v, err := loadCRD(filepath.Join(dir, f.path), kindName, apiVersion[strings.Index(apiVersion, "/")+1:])
			if err != nil {
				crdErr = fmt.Errorf("%s: %v", kind, err)
				return
			}
			crdValidators[kind] = v
		}
	})
	return crdValidators, crdErr
}

// loadCRD reads the CRD of a kind from a file of one or more YAML documents.
func loadCRD(path, kind, version string) (*crdValidator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for crd.Spec.Names.Kind != kind {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s has no CRD of kind %s", path, kind)
		}
		if err != nil {
			return nil, err
		}
		crd = apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, &crd); err != nil {
			return nil, err
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != version || v.Schema == nil {
			continue
		}
		var props apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &props, nil); err != nil {
			return nil, err
		}
		schema, _, err := validation.NewSchemaValidator(&props)
		if err != nil {
			return nil, err
		}
		structural, err := structuralschema.NewStructural(&props)
		if err != nil {
			return nil, err
		}
		return &crdValidator{schema: schema, structural: structural, rules: cel.NewValidator(structural, true, celconfig.PerCallLimit)}, nil
	}
	return nil, fmt.Errorf("%s has no schema for version %s", path, version)
}

// validate returns what the API server would refuse in one object, given as JSON.
func (c *crdValidator) validate(jsonData []byte) (field.ErrorList, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(jsonData, &obj); err != nil {
		return nil, err
	}
	defaulting.Default(obj, c.structural)
	errs := validation.ValidateCustomResource(nil, obj, c.schema)
	if c.rules != nil {
		celErrs, _ := c.rules.Validate(context.Background(), nil, c.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs, nil
}
