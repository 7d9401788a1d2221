package envoy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/e2e/scenario"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

const (
	// requireDockerEnv set to 1 turns the skip for a missing Docker daemon into a failure.
	requireDockerEnv = "TOLLGATE_REQUIRE_DOCKER"
	composeFile      = "compose.yaml"
	// moduleEnv names the module compose.yaml mounts (build/tollgate.wasm when unset).
	moduleEnv = "TOLLGATE_WASM"
	// The service and container ports of compose.yaml and envoy.yaml.
	envoyService = "envoy"
	listenerPort = "10000"
	adminPort    = "9901"
	// How long Envoy may take to come up, once its image is present.
	readyTimeout = 90 * time.Second
	// How long pulling the images and starting the containers may take.
	upTimeout = 10 * time.Minute
)

// TestScenarioInEnvoy runs the shared scenario against the pinned Envoy image of compose.yaml: it
// builds the module, starts the containers, waits until Envoy is live and knows its upstream,
// drives the steps over HTTP on a real clock, then checks Tollgate's counters in Envoy's
// /stats/prometheus. The containers are always removed, with their logs printed on failure.
func TestScenarioInEnvoy(t *testing.T) {
	requireDockerDaemon(t)
	requireCompose(t)
	// A build of its own, which the compose file mounts through TOLLGATE_WASM: other packages
	// rebuild build/tollgate.wasm while the tests run in parallel.
	module, err := filepath.Abs(filepath.Join("..", "..", "build", "e2e-envoy", "tollgate.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	buildModule(t, module)

	s := &stack{t: t, project: "tollgate-e2e-" + strconv.Itoa(os.Getpid()), env: append(os.Environ(), moduleEnv+"="+module)}
	t.Cleanup(s.down)
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	if out, err := s.compose(ctx, "up", "--detach", "--quiet-pull"); err != nil {
		t.Fatalf("docker compose up: %v\n%s", err, out)
	}
	front := "http://" + s.port(ctx, listenerPort)
	admin := "http://" + s.port(ctx, adminPort)
	client := &http.Client{Timeout: 10 * time.Second}
	s.waitReady(ctx, client, admin)

	if err := scenario.Run(ctx, client, front, scenario.RealClock); err != nil {
		t.Errorf("the scenario through Envoy:\n%v", err)
	}

	// The module hands its counters to Envoy on its tick (every second): read until they are all
	// there, for a few tick periods at most.
	deadline := time.Now().Add(counterLag)
	for {
		problems, err := checkCounters(ctx, client, admin)
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range problems {
				t.Error(p)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// counterLag bounds how long the counters may take to reach Envoy: the module's tick period
// (one second), with room for a loaded machine.
const counterLag = 10 * time.Second

// checkCounters reads Envoy's /stats/prometheus and lists every expected counter that is missing
// or has another value.
func checkCounters(ctx context.Context, client *http.Client, admin string) ([]string, error) {
	exposition, err := get(ctx, client, admin+"/stats/prometheus")
	if err != nil {
		return nil, fmt.Errorf("read Envoy's /stats/prometheus: %v", err)
	}
	series, err := scenario.ParsePrometheus(exposition)
	if err != nil {
		return nil, fmt.Errorf("parse Envoy's /stats/prometheus: %v", err)
	}
	var problems []string
	for _, want := range scenario.WantCounters() {
		key, err := scenario.CanonicalSeries(want.Series)
		if err != nil {
			return nil, err
		}
		got, ok := series[key]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("/stats/prometheus has no series %s (Tollgate's counter %s); its tollgate series:\n%s",
				key, want.Stat, grepLines(exposition, "tollgate")))
		case got != float64(want.Value):
			problems = append(problems, fmt.Sprintf("/stats/prometheus: %s = %v, want %d", key, got, want.Value))
		}
	}
	return problems, nil
}

// requireDockerDaemon skips the test, or fails it under TOLLGATE_REQUIRE_DOCKER=1, when there is
// no Docker engine to talk to, saying which piece is missing.
func requireDockerDaemon(t *testing.T) {
	t.Helper()
	msg := missingDocker()
	if msg == "" {
		return
	}
	if os.Getenv(requireDockerEnv) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg + "; skipped (set " + requireDockerEnv + "=1 to fail instead)")
}

// missingDocker names what is missing for talking to a Docker engine, or returns "".
func missingDocker() string {
	if _, err := exec.LookPath("docker"); err != nil {
		return "the Envoy end-to-end test needs Docker: no docker command on PATH"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		return "the Envoy end-to-end test needs a running Docker daemon, and none answers: `docker info`: " +
			firstLine(out, err) + " (start Docker, or set DOCKER_HOST to a running engine)"
	}
	return ""
}

// requireCompose fails the test when the Docker daemon runs but Compose v2 is missing.
func requireCompose(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "compose", "version").CombinedOutput(); err != nil {
		t.Fatalf("the Envoy end-to-end test needs Docker Compose v2 (`docker compose`): %s", firstLine(out, err))
	}
}

// buildModule writes the module, built from this tree (internal/testbuild), to out, so the
// container never runs a stale module. It writes a temporary file and renames it, so a reader
// never sees half a module.
func buildModule(t *testing.T, out string) {
	t.Helper()
	wasm := testbuild.Product(t)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := out + ".tmp" + strconv.Itoa(os.Getpid())
	defer os.Remove(tmp)
	if err := os.WriteFile(tmp, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
}

// stack is one running copy of compose.yaml.
type stack struct {
	t       *testing.T
	project string
	env     []string // the environment of every docker compose command
}

func (s *stack) compose(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "docker", append([]string{"compose", "--file", composeFile, "--project-name", s.project}, args...)...)
	cmd.Env = s.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// down prints the containers' logs when the test failed, then removes everything the test
// started, whatever happened.
func (s *stack) down() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if s.t.Failed() {
		logs, _ := s.compose(ctx, "logs", "--no-color")
		s.t.Logf("docker compose logs:\n%s", logs)
	} else if logs, err := s.compose(ctx, "logs", "--no-color", envoyService); err == nil {
		s.t.Logf("Tollgate's log lines in Envoy:\n%s", grepLines(string(logs), "wasm log"))
	}
	if out, err := s.compose(ctx, "down", "--volumes", "--remove-orphans", "--timeout", "5"); err != nil {
		s.t.Errorf("docker compose down: %v\n%s", err, out)
	}
}

// port returns the host address a container port of the Envoy service is published on.
func (s *stack) port(ctx context.Context, containerPort string) string {
	out, err := s.compose(ctx, "port", envoyService, containerPort)
	addr := strings.TrimSpace(string(out))
	if err != nil || addr == "" {
		s.t.Fatalf("docker compose port %s %s: %v\n%s", envoyService, containerPort, err, out)
	}
	return addr
}

// waitReady polls until Envoy is live and knows a healthy upstream host, up to readyTimeout. It
// fails at once when a container has exited (Envoy refused its configuration or the module).
func (s *stack) waitReady(ctx context.Context, client *http.Client, admin string) {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if exited, _ := s.compose(ctx, "ps", "--quiet", "--status", "exited"); len(bytes.TrimSpace(exited)) > 0 {
			s.t.Fatal("a container exited before Envoy was ready; see the logs below")
		}
		last = ready(ctx, client, admin)
		if last == nil {
			return
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("Envoy was not ready within %v: %v", readyTimeout, last)
		case <-tick.C:
		}
	}
}

func ready(ctx context.Context, client *http.Client, admin string) error {
	if _, err := get(ctx, client, admin+"/ready"); err != nil {
		return fmt.Errorf("/ready: %w", err)
	}
	clusters, err := get(ctx, client, admin+"/clusters")
	if err != nil {
		return fmt.Errorf("/clusters: %w", err)
	}
	for _, line := range strings.Split(clusters, "\n") {
		if strings.HasPrefix(line, "upstream::") && strings.HasSuffix(line, "::health_flags::healthy") {
			return nil
		}
	}
	return errors.New("/clusters lists no healthy host of the upstream cluster yet")
}

func get(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, firstLine(body, nil))
	}
	return string(body), nil
}

func firstLine(out []byte, err error) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if line == "" && err != nil {
		return err.Error()
	}
	return line
}

func grepLines(text, substr string) string {
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substr) {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return "(none)"
	}
	return strings.Join(lines, "\n")
}
