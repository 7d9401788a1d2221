package envoy

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/e2e/scenario"
	"github.com/tollgate-proxy/tollgate/internal/gateway"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// These tests run TestScenarioInEnvoy's driver against a stand-in for Docker, so that the parts
// that do not need a real Envoy are proven wherever the tests run: how it finds Docker, the
// compose commands it issues and their order, the readiness wait, reading the published ports,
// the scenario over HTTP, and reading the counters back from Prometheus text.

// fakeDocker is a docker command that logs its arguments and answers what the driver asks.
const fakeDocker = `#!/bin/sh
echo "$*" >> "$FAKE_DOCKER_LOG"
case "$*" in
  "info "*)
    if [ -n "$FAKE_DOCKER_NO_DAEMON" ]; then
      echo "Cannot connect to the Docker daemon at unix:///fake/docker.sock. Is the docker daemon running?" >&2
      exit 1
    fi
    echo 99.0.0 ;;
  "compose version") echo "Docker Compose version v2.99.0" ;;
  *" port envoy 10000") echo "$FAKE_FRONT" ;;
  *" port envoy 9901") echo "$FAKE_ADMIN" ;;
esac
`

// installFakeDocker puts fakeDocker first on PATH and returns the file it logs to.
func installFakeDocker(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(fakeDocker), 0o755); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "calls.log")
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_DOCKER_LOG", logFile)
	t.Setenv(requireDockerEnv, "")
	return logFile
}

func TestMissingDockerIsNamed(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T)
		want  string
	}{
		{"no docker command", func(t *testing.T) { t.Setenv("PATH", t.TempDir()) }, "no docker command on PATH"},
		{"no daemon", func(t *testing.T) {
			installFakeDocker(t)
			t.Setenv("FAKE_DOCKER_NO_DAEMON", "1")
		}, "needs a running Docker daemon, and none answers: `docker info`: Cannot connect to the Docker daemon"},
		{"a daemon", func(t *testing.T) { installFakeDocker(t) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup(t)
			got := missingDocker()
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Fatalf("got %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestScenarioSkipsWithoutADockerDaemon(t *testing.T) {
	installFakeDocker(t)
	t.Setenv("FAKE_DOCKER_NO_DAEMON", "1")
	var run *testing.T
	t.Run("TestScenarioInEnvoy", func(t *testing.T) {
		run = t
		TestScenarioInEnvoy(t)
	})
	if !run.Skipped() {
		t.Fatal("TestScenarioInEnvoy did not skip without a Docker daemon")
	}
}

// The whole driver, with the module in Tollgate's own host behind real listeners standing in for
// the containers: the front listener and Envoy's admin interface (/ready, /clusters and
// /stats/prometheus rendered as Envoy renders a module's counters).
func TestScenarioDriverAgainstAFakeDocker(t *testing.T) {
	calls := installFakeDocker(t)
	front, admin := standInEnvoy(t)
	t.Setenv("FAKE_FRONT", front)
	t.Setenv("FAKE_ADMIN", admin)

	t.Run("TestScenarioInEnvoy", TestScenarioInEnvoy)

	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	compose := "compose --file compose.yaml --project-name tollgate-e2e-" + strconv.Itoa(os.Getpid()) + " "
	want := []string{
		"info --format {{.ServerVersion}}",
		"compose version",
		compose + "up --detach --quiet-pull",
		compose + "port envoy 10000",
		compose + "port envoy 9901",
		compose + "ps --quiet --status exited",
		compose + "logs --no-color envoy",
		compose + "down --volumes --remove-orphans --timeout 5",
	}
	got := strings.Split(strings.TrimSpace(string(data)), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("docker was called with\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// standInEnvoy serves the module like the Envoy of compose.yaml would and returns the addresses
// of its front listener and its admin interface.
func standInEnvoy(t *testing.T) (front, admin string) {
	t.Helper()
	ctx := context.Background()
	upstream := httptest.NewServer(scenario.Upstream())
	t.Cleanup(upstream.Close)
	upstreamURL, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(t.TempDir(), "tollgate.wasm")
	buildModule(t, module)
	wasm, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(ctx, wasm, host.Options{
		Profile: host.Envoy139, PluginName: "tollgate", RootID: "tollgate", VMID: "tollgate",
		PluginConfig: []byte(scenario.Config),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	tickCtx, stopTicks := context.WithCancel(ctx)
	t.Cleanup(stopTicks)
	go h.RunTicks(tickCtx) // the module's timers, in real time, as Envoy runs them
	gw, err := gateway.New(ctx, h, 2, upstreamURL, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	frontServer := httptest.NewServer(gw)
	t.Cleanup(frontServer.Close)

	tags := []scenario.StatsTag{{Name: scenario.RuleTag, Regex: scenario.RuleTagRegex}}
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "LIVE\n") })
	mux.HandleFunc("/clusters", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream::default_priority::max_connections::1024\nupstream::"+upstreamURL.Host+"::health_flags::healthy\n")
	})
	mux.HandleFunc("/stats/prometheus", func(w http.ResponseWriter, r *http.Request) {
		for _, name := range h.Metrics().Names() {
			value, _ := h.Metrics().Value(name)
			series, err := scenario.EnvoyPrometheusSeries(name, tags)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			metric, _, _ := strings.Cut(series, "{")
			if !strings.Contains(series, "{") {
				series += "{}" // as Envoy prints a series without labels
			}
			fmt.Fprintf(w, "# TYPE %s counter\n%s %d\n", metric, series, value)
		}
	})
	adminServer := httptest.NewServer(mux)
	t.Cleanup(adminServer.Close)
	return frontServer.Listener.Addr().String(), adminServer.Listener.Addr().String()
}
