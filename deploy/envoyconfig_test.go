package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	httpwasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/yaml"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/e2e/scenario"
)

// The imports above also register the types a typed_config may name (HttpConnectionManager,
// Router, Wasm, StringValue, UpstreamTlsContext, and what they pull in); an Any naming a type that is not registered
// fails to load, as it would in an Envoy built without that extension. A new extension in a
// shipped configuration needs its package imported here.

// repoRoot is the repository root, relative to this package.
const repoRoot = ".."

// envoyConfig is an Envoy bootstrap as Envoy reads it, with the parts the tests look at.
type envoyConfig struct {
	name      string
	bootstrap *bootstrapv3.Bootstrap
	// types is the type of every Any in the configuration, by path.
	types map[string]string
	// tollgate lists the Wasm HTTP filters, by path.
	tollgate map[string]*httpwasmv3.Wasm
	// hcms lists the HTTP connection managers, by path.
	hcms map[string]*hcmv3.HttpConnectionManager
}

// readEnvoyConfig reads a shipped Envoy configuration, relative to the repository root.
func readEnvoyConfig(name string) (*envoyConfig, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		return nil, err
	}
	return checkEnvoyConfig(name, data)
}

// checkEnvoyConfig loads YAML into Envoy's v3 Bootstrap the way Envoy loads a static
// configuration (YAML turned into JSON, unknown fields rejected, every Any resolved to its
// registered type), runs Envoy's generated validation over the bootstrap and over every message
// packed in an Any, and checks what Tollgate and Envoy's runtime require beyond the schema. It
// returns every problem, each naming the file and the field.
func checkEnvoyConfig(name string, yamlData []byte) (*envoyConfig, error) {
	jsonData, err := yaml.YAMLToJSONStrict(yamlData)
	if err != nil {
		return nil, fmt.Errorf("%s: not YAML: %w", name, err)
	}
	var b bootstrapv3.Bootstrap
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(jsonData, &b); err != nil {
		return nil, fmt.Errorf("%s: not an Envoy v3 Bootstrap: %w", name, err)
	}
	c := &envoyConfig{
		name: name, bootstrap: &b, types: map[string]string{},
		tollgate: map[string]*httpwasmv3.Wasm{}, hcms: map[string]*hcmv3.HttpConnectionManager{},
	}
	var problems []error
	problems = append(problems, validate("", &b)...)
	err = walk(b.ProtoReflect(), "", func(path string, m proto.Message, packed bool) {
		if packed {
			c.types[path] = string(m.ProtoReflect().Descriptor().FullName())
			problems = append(problems, validate(path, m)...)
		}
		switch m := m.(type) {
		case *httpwasmv3.Wasm:
			c.tollgate[path] = m
		case *hcmv3.HttpConnectionManager:
			c.hcms[path] = m
		}
	})
	if err != nil {
		problems = append(problems, err)
	}
	for _, path := range sortedKeys(c.tollgate) {
		problems = append(problems, checkTollgateFilter(path, c.tollgate[path], &b)...)
	}
	for _, path := range sortedKeys(c.hcms) {
		problems = append(problems, checkHTTPConnectionManager(path, c.hcms[path], &b)...)
	}
	if len(c.tollgate) > 0 {
		problems = append(problems, checkRuleTag(&b)...)
	}
	for i, p := range problems {
		problems[i] = fmt.Errorf("%s: %w", name, p)
	}
	return c, errors.Join(problems...)
}

// validate runs the generated validation (protoc-gen-validate) of one message, which covers the
// messages nested in it except those packed in an Any.
func validate(path string, m proto.Message) []error {
	v, ok := m.(interface{ ValidateAll() error })
	if !ok {
		return nil
	}
	if err := v.ValidateAll(); err != nil {
		return []error{fmt.Errorf("%s: %w", orRoot(path), err)}
	}
	return nil
}

// walk calls visit for every message set in m, at any depth, unpacking every Any (packed is true
// for a message that came out of an Any; its path ends in "(type)").
func walk(m protoreflect.Message, path string, visit func(path string, m proto.Message, packed bool)) error {
	var err error
	child := func(cm protoreflect.Message, p string) {
		if err != nil {
			return
		}
		if packedAny, ok := cm.Interface().(*anypb.Any); ok {
			inner, uerr := packedAny.UnmarshalNew()
			if uerr != nil {
				err = fmt.Errorf("%s: cannot resolve %s: %w", p, packedAny.GetTypeUrl(), uerr)
				return
			}
			p += "(" + string(inner.ProtoReflect().Descriptor().FullName()) + ")"
			visit(p, inner, true)
			err = walk(inner.ProtoReflect(), p, visit)
			return
		}
		visit(p, cm.Interface(), false)
		err = walk(cm, p, visit)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := joinPath(path, string(fd.Name()))
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				return true
			}
			var keys []protoreflect.MapKey
			v.Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			for _, k := range keys {
				child(v.Map().Get(k).Message(), p+"["+k.String()+"]")
			}
		case fd.IsList():
			if fd.Kind() != protoreflect.MessageKind {
				return true
			}
			for i := 0; i < v.List().Len(); i++ {
				child(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))
			}
		case fd.Kind() == protoreflect.MessageKind:
			child(v.Message(), p)
		}
		return err == nil
	})
	return err
}

// checkTollgateFilter checks a Wasm HTTP filter the way docs/envoy.md asks it to be set up, and its
// plugin configuration with the code the module runs.
func checkTollgateFilter(path string, w *httpwasmv3.Wasm, b *bootstrapv3.Bootstrap) []error {
	pc := w.GetConfig()
	if pc == nil {
		return []error{fmt.Errorf("%s.config: missing: the plugin configuration", path)}
	}
	at := func(field string) string { return path + ".config." + field }
	var problems []error
	add := func(field, format string, args ...any) {
		problems = append(problems, fmt.Errorf("%s: %s", at(field), fmt.Sprintf(format, args...)))
	}
	if pc.GetName() == "" {
		add("name", "empty: the plugin name namespaces Tollgate's shared-data keys")
	}
	if pc.GetFailurePolicy() == wasmv3.FailurePolicy_UNSPECIFIED {
		add("failure_policy", "not set: its default differs between Envoy versions; say FAIL_CLOSED, FAIL_OPEN or FAIL_RELOAD")
	}
	//lint:ignore SA1019 the deprecated field is what this check warns about
	if pc.GetFailOpen() {
		add("fail_open", "deprecated: use failure_policy: FAIL_OPEN")
	}
	vm := pc.GetVmConfig()
	if vm.GetVmId() == "" {
		add("vm_config.vm_id", "empty: worker VMs share buckets through the shared data of one vm_id; name it")
	}
	if vm.GetRuntime() != "envoy.wasm.runtime.v8" {
		add("vm_config.runtime", "%q: Tollgate runs on Envoy's default runtime, envoy.wasm.runtime.v8", vm.GetRuntime())
	}
	switch code := vm.GetCode(); {
	case code.GetRemote() != nil:
		problems = append(problems, checkRemoteCode(at("vm_config.code.remote"), code.GetRemote(), b)...)
	default:
		if file := code.GetLocal().GetFilename(); !strings.HasSuffix(file, "tollgate.wasm") {
			add("vm_config.code.local.filename", "%q: want the module, a file named tollgate.wasm", file)
		}
	}
	if _, err := tollgateConfiguration(w); err != nil {
		add("configuration", "%v", err)
	}
	return problems
}

// moduleSource is where a Wasm filter loads its module from: a file or a URL.
func moduleSource(w *httpwasmv3.Wasm) string {
	code := w.GetConfig().GetVmConfig().GetCode()
	if remote := code.GetRemote(); remote != nil {
		return remote.GetHttpUri().GetUri()
	}
	return code.GetLocal().GetFilename()
}

// sha256Hex is how Envoy wants a module's checksum: it compares the lowercase hex of the
// downloaded module's SHA-256 with it (source/common/config/remote_data_fetcher.cc), so anything
// else never matches and the module never loads.
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkRemoteCode checks a module fetched over HTTP the way Envoy will need it: the checksum
// (Envoy's code cache is keyed by it, and a download that does not match it is dropped:
// source/extensions/common/wasm/wasm.cc, createWasm), a cluster of this bootstrap to fetch
// through (unless b is nil: a fragment of a configuration has no clusters to look in), and
// retries, without which one failed download leaves the filter without a VM.
func checkRemoteCode(at string, remote *corev3.RemoteDataSource, b *bootstrapv3.Bootstrap) []error {
	var problems []error
	add := func(field, format string, args ...any) {
		problems = append(problems, fmt.Errorf("%s.%s: %s", at, field, fmt.Sprintf(format, args...)))
	}
	uri := remote.GetHttpUri()
	if !strings.HasSuffix(uri.GetUri(), "tollgate.wasm") {
		add("http_uri.uri", "%q: want the module, a file named tollgate.wasm", uri.GetUri())
	}
	if !strings.HasPrefix(uri.GetUri(), "https://") {
		add("http_uri.uri", "%q: fetch the module over https", uri.GetUri())
	}
	if cluster := uri.GetCluster(); b != nil && !slices.ContainsFunc(b.GetStaticResources().GetClusters(), func(c *clusterv3.Cluster) bool { return c.GetName() == cluster }) {
		add("http_uri.cluster", "%q is not a cluster of static_resources.clusters", cluster)
	}
	if !sha256Hex.MatchString(remote.GetSha256()) {
		add("sha256", "%q: want the module's SHA-256 as 64 lowercase hex digits (build/tollgate.wasm.sha256)", remote.GetSha256())
	}
	if remote.GetRetryPolicy().GetNumRetries().GetValue() == 0 {
		add("retry_policy.num_retries", "not set: say how often Envoy tries again after a failed download")
	}
	if remote.GetRetryPolicy().GetRetryBackOff() == nil {
		add("retry_policy.retry_back_off", "not set: say how long Envoy waits between attempts")
	}
	return problems
}

// tollgateConfiguration parses the plugin configuration of a Wasm filter as the module does.
func tollgateConfiguration(w *httpwasmv3.Wasm) (*config.Config, error) {
	packed := w.GetConfig().GetConfiguration()
	var text wrapperspb.StringValue
	if packed == nil || !packed.MessageIs(&text) {
		return nil, fmt.Errorf("want a google.protobuf.StringValue holding Tollgate's JSON, got %q", packed.GetTypeUrl())
	}
	if err := packed.UnmarshalTo(&text); err != nil {
		return nil, err
	}
	cfg, err := config.Parse([]byte(text.GetValue()))
	if err != nil {
		return nil, fmt.Errorf("Tollgate refuses it: %w", err)
	}
	return cfg, nil
}

// checkHTTPConnectionManager checks what Envoy only checks when it builds the listener: the last
// HTTP filter must be the router, and every route must name a cluster that exists.
func checkHTTPConnectionManager(path string, hcm *hcmv3.HttpConnectionManager, b *bootstrapv3.Bootstrap) []error {
	var problems []error
	filters := hcm.GetHttpFilters()
	if n := len(filters); n == 0 || !filters[n-1].GetTypedConfig().MessageIs(&routerv3.Router{}) {
		problems = append(problems, fmt.Errorf("%s.http_filters: the last filter must be the router (envoy.filters.http.router); Envoy refuses a chain that ends elsewhere", path))
	}
	clusters := map[string]bool{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = true
	}
	for i, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
		for j, r := range vh.GetRoutes() {
			if name := r.GetRoute().GetCluster(); name != "" && !clusters[name] {
				problems = append(problems, fmt.Errorf("%s.route_config.virtual_hosts[%d].routes[%d].route.cluster: %q is not a cluster of static_resources.clusters", path, i, j, name))
			}
		}
	}
	return problems
}

// checkRuleTag checks that a configuration running Tollgate defines the stats tag that turns the
// rule of a per-rule counter into a Prometheus label.
func checkRuleTag(b *bootstrapv3.Bootstrap) []error {
	for _, tag := range b.GetStatsConfig().GetStatsTags() {
		if tag.GetTagName() != scenario.RuleTag {
			continue
		}
		if tag.GetRegex() != scenario.RuleTagRegex {
			return []error{fmt.Errorf("stats_config.stats_tags: %s has regex %q, want %q", scenario.RuleTag, tag.GetRegex(), scenario.RuleTagRegex)}
		}
		return nil
	}
	return []error{fmt.Errorf("stats_config.stats_tags: no %s tag (regex %q): per-rule counters would show the rule inside the metric name", scenario.RuleTag, scenario.RuleTagRegex)}
}

func joinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func orRoot(path string) string {
	if path == "" {
		return "(bootstrap)"
	}
	return path
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
