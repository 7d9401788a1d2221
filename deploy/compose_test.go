package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// composeFiles are the Docker Compose files the repository ships.
var composeFiles = []string{"e2e/envoy/compose.yaml"}

// composeFile is the part of the Compose specification the shipped files use; reading with
// unknown fields rejected catches a misspelt key.
type composeFile struct {
	Services map[string]composeService `json:"services"`
}

type composeService struct {
	Image       string            `json:"image"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	Volumes     []composeVolume   `json:"volumes"`
	Ports       []composePort     `json:"ports"`
	DependsOn   []string          `json:"depends_on"`
}

type composePort struct {
	Target    int    `json:"target"`
	HostIP    string `json:"host_ip"`
	Published string `json:"published"`
}

type composeVolume struct {
	Type     string `json:"type"`
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only"`
	Bind     *struct {
		CreateHostPath *bool `json:"create_host_path"`
	} `json:"bind"`
}

// pinnedEnvoy matches a pinned release of the official Envoy image and captures its version.
var pinnedEnvoy = regexp.MustCompile(`^envoyproxy/envoy:v(\d+)\.(\d+)\.(\d+)$`)

// The compose file of the container test agrees with the files it mounts: each Envoy runs a
// shipped configuration, the module is mounted where that configuration loads it from, the
// published ports are those the configuration listens on, the upstream is reachable under the
// address the configuration names, and the image is a pinned Envoy release Tollgate supports.
func TestComposeFileMatchesWhatItMounts(t *testing.T) {
	for _, file := range composeFiles {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(repoRoot, file))
			if err != nil {
				t.Fatal(err)
			}
			var compose composeFile
			if err := yaml.UnmarshalStrict(data, &compose); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, problem := range checkCompose(file, compose) {
				t.Error(problem)
			}
		})
	}
}

func checkCompose(file string, compose composeFile) []string {
	dir := filepath.Dir(file)
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, file+": "+fmt.Sprintf(format, args...)) }
	images := map[string]bool{}
	configs := map[string]*envoyConfig{}
	for _, name := range sortedKeys(compose.Services) {
		svc := compose.Services[name]
		images[svc.Image] = true
		if m := pinnedEnvoy.FindStringSubmatch(svc.Image); m == nil {
			add("services.%s.image: %q is not a pinned release of envoyproxy/envoy (vMAJOR.MINOR.PATCH)", name, svc.Image)
		} else if major, _ := strconv.Atoi(m[1]); major == 1 {
			if minor, _ := strconv.Atoi(m[2]); minor < 33 {
				add("services.%s.image: %q is older than Envoy 1.33, which Tollgate needs", name, svc.Image)
			}
		}
		mounts := map[string]composeVolume{}
		for _, v := range svc.Volumes {
			mounts[v.Target] = v
			if v.Type != "bind" || !v.ReadOnly {
				add("services.%s.volumes: %s: want a read-only bind mount", name, v.Target)
			}
		}
		i := slices.Index(svc.Command, "-c")
		if i < 0 || i+1 >= len(svc.Command) {
			add("services.%s.command: no -c CONFIG", name)
			continue
		}
		mount, ok := mounts[svc.Command[i+1]]
		if !ok {
			add("services.%s: Envoy reads %s, which no volume mounts", name, svc.Command[i+1])
			continue
		}
		configFile := filepath.ToSlash(filepath.Join(dir, withoutVariable(mount.Source)))
		c, err := readEnvoyConfig(configFile)
		if err != nil {
			add("services.%s: its configuration: %v", name, err)
			continue
		}
		configs[name] = c
		for _, path := range sortedKeys(c.tollgate) {
			wasm := c.tollgate[path].GetConfig().GetVmConfig().GetCode().GetLocal().GetFilename()
			module, ok := mounts[wasm]
			switch {
			case !ok:
				add("services.%s: %s loads the module from %s, which no volume mounts", name, configFile, wasm)
			case filepath.ToSlash(filepath.Join(dir, withoutVariable(module.Source))) != "build/tollgate.wasm":
				add("services.%s.volumes: %s comes from %s, want build/tollgate.wasm (make build) by default", name, wasm, module.Source)
			case module.Bind == nil || module.Bind.CreateHostPath == nil || *module.Bind.CreateHostPath:
				add("services.%s.volumes: %s: set bind.create_host_path: false, or Docker mounts an empty directory when the module is not built", name, wasm)
			}
		}
		published := map[string]bool{}
		for _, p := range svc.Ports {
			if p.HostIP != "127.0.0.1" || p.Published != "" {
				add("services.%s.ports: %d: publish on a free loopback port (host_ip 127.0.0.1, no published port)", name, p.Target)
			}
			published[strconv.Itoa(p.Target)] = true
		}
		for _, port := range envoyPorts(c) {
			if len(svc.Ports) > 0 && !published[port] {
				add("services.%s.ports: %s listens on %s, which is not published", name, configFile, port)
			}
		}
	}
	if len(images) != 1 {
		add("services use %d images; use one pinned Envoy image for all", len(images))
	}
	for _, name := range sortedKeys(configs) {
		for _, cluster := range configs[name].bootstrap.GetStaticResources().GetClusters() {
			for _, group := range cluster.GetLoadAssignment().GetEndpoints() {
				for _, ep := range group.GetLbEndpoints() {
					addr := ep.GetEndpoint().GetAddress().GetSocketAddress()
					target, ok := configs[addr.GetAddress()]
					if !ok {
						add("services.%s: cluster %s sends to %s, which is not a service of the file", name, cluster.GetName(), addr.GetAddress())
						continue
					}
					port := strconv.FormatUint(uint64(addr.GetPortValue()), 10)
					if !slices.Contains(envoyPorts(target), port) {
						add("services.%s: cluster %s sends to %s:%s, where nothing listens", name, cluster.GetName(), addr.GetAddress(), port)
					}
					if !slices.Contains(compose.Services[name].DependsOn, addr.GetAddress()) {
						add("services.%s.depends_on: want %s, which its cluster sends to", name, addr.GetAddress())
					}
				}
			}
		}
	}
	return problems
}

// composeVariable is Compose's ${NAME:-default}.
var composeVariable = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*:-(.*)\}$`)

// withoutVariable is what a Compose value is when its variable is not set.
func withoutVariable(value string) string {
	if m := composeVariable.FindStringSubmatch(value); m != nil {
		return m[1]
	}
	return value
}

// envoyPorts lists the ports an Envoy configuration listens on: its listeners and its admin.
func envoyPorts(c *envoyConfig) []string {
	var ports []string
	for _, l := range c.bootstrap.GetStaticResources().GetListeners() {
		ports = append(ports, strconv.FormatUint(uint64(l.GetAddress().GetSocketAddress().GetPortValue()), 10))
	}
	if admin := c.bootstrap.GetAdmin().GetAddress().GetSocketAddress(); admin != nil {
		ports = append(ports, strconv.FormatUint(uint64(admin.GetPortValue()), 10))
	}
	return ports
}

// The Envoy guide's container quick start runs the image the compose file pins.
func TestEnvoyGuideUsesThePinnedEnvoyImage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, composeFiles[0]))
	if err != nil {
		t.Fatal(err)
	}
	image := pinnedEnvoy.FindString(firstImage(string(data)))
	guide, err := os.ReadFile(filepath.Join(repoRoot, "docs", "envoy.md"))
	if err != nil {
		t.Fatal(err)
	}
	if image == "" || !strings.Contains(string(guide), image) {
		t.Fatalf("docs/envoy.md does not mention %q, the image %s pins", image, composeFiles[0])
	}
}

func firstImage(compose string) string {
	for _, line := range strings.Split(compose, "\n") {
		if after, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
			return after
		}
	}
	return ""
}

// A mutated copy of the shipped compose file is refused for the stated reason.
func TestComposeCheckRefusesMutations(t *testing.T) {
	file := composeFiles[0]
	original, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new string
		want           string
	}{
		{"module mounted elsewhere", "target: /etc/envoy/tollgate.wasm", "target: /etc/envoy/module.wasm",
			"loads the module from /etc/envoy/tollgate.wasm, which no volume mounts"},
		{"another module by default", "${TOLLGATE_WASM:-../../build/tollgate.wasm}", "${TOLLGATE_WASM:-../../build/other.wasm}",
			"comes from ${TOLLGATE_WASM:-../../build/other.wasm}, want build/tollgate.wasm"},
		{"module not built becomes a directory", "create_host_path: false", "create_host_path: true",
			"set bind.create_host_path: false"},
		{"admin not published", "target: 9901", "target: 9902",
			"listens on 9901, which is not published"},
		{"published on every address", "host_ip: 127.0.0.1\n      - target: 9901", "host_ip: 0.0.0.0\n      - target: 9901",
			"10000: publish on a free loopback port"},
		{"another configuration", "source: ./envoy.yaml", "source: ./upstream.yaml",
			"upstream.yaml listens on 8080, which is not published"},
		{"older Envoy", "envoyproxy/envoy:v1.39.3", "envoyproxy/envoy:v1.32.0",
			"older than Envoy 1.33"},
		{"floating tag", "envoyproxy/envoy:v1.39.3", "envoyproxy/envoy:v1.39-latest",
			"not a pinned release"},
		{"upstream started late", "    depends_on:\n      - upstream\n", "",
			"depends_on: want upstream"},
		{"misspelt key", "depends_on:", "depend_on:",
			`unknown field "depend_on"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(string(original), tt.old) {
				t.Fatalf("%s does not contain %q", file, tt.old)
			}
			mutated := strings.ReplaceAll(string(original), tt.old, tt.new)
			var compose composeFile
			var report string
			if err := yaml.UnmarshalStrict([]byte(mutated), &compose); err != nil {
				report = file + ": " + err.Error()
			} else {
				report = strings.Join(checkCompose(file, compose), "\n")
			}
			if report == "" {
				t.Fatal("the mutated compose file passed")
			}
			t.Logf("refused: %s", report)
			if !strings.Contains(report, tt.want) {
				t.Errorf("the report lacks %q:\n%s", tt.want, report)
			}
		})
	}
}
