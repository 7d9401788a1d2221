package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// Istio reads a Wasm image by taking its last layer and the file named plugin.wasm in it
// (istio/istio pkg/wasm/imagefetcher.go). The Dockerfile must therefore make exactly one layer,
// holding the module under that name, on an empty base.
func TestDockerfileMakesOneLayerWithPluginWasm(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot, "deploy", "image", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var instructions [][]string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instructions = append(instructions, strings.Fields(line))
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	if len(instructions) == 0 || strings.ToUpper(instructions[0][0]) != "FROM" || len(instructions[0]) != 2 || instructions[0][1] != "scratch" {
		t.Fatalf("the Dockerfile must start with FROM scratch, got %q", instructions)
	}
	var copies int
	for _, in := range instructions[1:] {
		switch strings.ToUpper(in[0]) {
		case "COPY":
			copies++
			if len(in) != 3 || in[1] != "plugin.wasm" || path.Base(in[2]) != "plugin.wasm" {
				t.Errorf("COPY %q: want the module copied to a file named plugin.wasm", in[1:])
			}
		case "LABEL":
		default:
			t.Errorf("%s adds to the image; the image must hold one layer with plugin.wasm only", in[0])
		}
	}
	if copies != 1 {
		t.Errorf("%d COPY instructions, want exactly 1 (one layer)", copies)
	}
}

// fakeContainerTool stands in for docker or podman: it logs its arguments, and for a build, what
// the build context holds.
const fakeContainerTool = `#!/bin/sh
echo "$(basename "$0") $*" >> "$FAKE_LOG"
case "$1" in
  info)
    if [ -n "$FAKE_NO_DAEMON" ]; then
      echo
      echo "Cannot connect to the Docker daemon at unix:///fake/docker.sock. Is the docker daemon running?" >&2
      exit 1
    fi
    echo 99.0.0 ;;
  build)
    for context; do :; done
    echo "context: $(ls "$context")" >> "$FAKE_LOG"
    cmp -s "$context/plugin.wasm" "$FAKE_WASM" && echo "context: plugin.wasm is the module" >> "$FAKE_LOG" ;;
esac
exit 0
`

// buildScriptEnv makes a PATH with the tools build.sh needs and the given fake container tools,
// and nothing else, so no real docker or podman is found.
func buildScriptEnv(t *testing.T, tools ...string) (env []string, logFile, tmp string) {
	t.Helper()
	bin := t.TempDir()
	for _, name := range []string{"sh", "mktemp", "cp", "rm", "dirname", "basename", "wc", "tr", "sed", "head", "ls", "cmp", "cat"} {
		real, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("the build script test needs %s on PATH: %v", name, err)
		}
		if err := os.Symlink(real, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range tools {
		if err := os.WriteFile(filepath.Join(bin, tool), []byte(fakeContainerTool), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logFile, tmp = filepath.Join(t.TempDir(), "calls.log"), t.TempDir()
	return []string{"PATH=" + bin, "FAKE_LOG=" + logFile, "TMPDIR=" + tmp}, logFile, tmp
}

func TestImageBuildScript(t *testing.T) {
	script, err := filepath.Abs(filepath.Join(repoRoot, "deploy", "image", "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	wasm := filepath.Join(t.TempDir(), "tollgate.wasm")
	if err := os.WriteFile(wasm, []byte("\x00asm\x01\x00\x00\x00 stand-in module"), 0o644); err != nil {
		t.Fatal(err)
	}
	const image = "registry.example.com/tollgate:0.1.0"
	dockerfile := filepath.Join(filepath.Dir(script), "Dockerfile")
	tests := []struct {
		name   string
		tools  []string
		env    []string
		args   []string
		ok     bool
		output []string // must occur in stdout and stderr together
		calls  []string // must occur in the fake tools' log
	}{
		{name: "no container tool", args: []string{image, wasm},
			output: []string{"make image-docker: no container tool found: install Docker (with its daemon running) or Podman"}},
		{name: "docker without a daemon", tools: []string{"docker"}, env: []string{"FAKE_NO_DAEMON=1"}, args: []string{image, wasm},
			output: []string{"make image-docker: docker is installed but no Docker daemon answers (Cannot connect to the Docker daemon at unix:///fake/docker.sock."}},
		{name: "docker", tools: []string{"docker", "podman"}, args: []string{image, wasm}, ok: true,
			output: []string{"built " + image + ": one layer holding plugin.wasm", "push it with: docker push " + image, "url to oci://" + image},
			calls: []string{"docker info", "docker build --platform linux/amd64 --file " + dockerfile + " --tag " + image + " ",
				"context: plugin.wasm\n", "context: plugin.wasm is the module"}},
		{name: "podman when there is no docker", tools: []string{"podman"}, args: []string{image, wasm}, ok: true,
			output: []string{"push it with: podman push " + image},
			calls:  []string{"podman build --platform linux/amd64 --file " + dockerfile + " --tag " + image + " ", "context: plugin.wasm is the module"}},
		{name: "chosen tool missing", tools: []string{"docker"}, env: []string{"CONTAINER_TOOL=nerdctl"}, args: []string{image, wasm},
			output: []string{"make image-docker: CONTAINER_TOOL=nerdctl is not on PATH"}},
		{name: "module not built", tools: []string{"docker"}, args: []string{image, filepath.Join(t.TempDir(), "none.wasm")},
			output: []string{"none.wasm does not exist: build the module first (make build)"}},
		{name: "usage", tools: []string{"docker"}, args: []string{image},
			output: []string{"make image-docker: usage: deploy/image/build.sh IMAGE WASM"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, logFile, tmp := buildScriptEnv(t, tt.tools...)
			cmd := exec.Command(script, tt.args...)
			cmd.Env = append(append(env, "FAKE_WASM="+wasm), tt.env...)
			out, err := cmd.CombinedOutput()
			if tt.ok != (err == nil) {
				t.Fatalf("exit: %v, want success %v\n%s", err, tt.ok, out)
			}
			if !tt.ok {
				if exit, isExit := err.(*exec.ExitError); !isExit || exit.ExitCode() != 1 {
					t.Errorf("exit: %v, want status 1", err)
				}
			}
			for _, want := range tt.output {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			calls, _ := os.ReadFile(logFile)
			for _, want := range tt.calls {
				if !strings.Contains(string(calls), want) {
					t.Errorf("the container tool's log lacks %q:\n%s", want, calls)
				}
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("the build context was left behind in %s", tmp)
			}
		})
	}
}
