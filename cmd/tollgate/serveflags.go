package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

var logLevelNames = []string{"trace", "debug", "info", "warn", "error", "critical"}

// serveOptions are the flags of tollgate serve once they have been checked.
type serveOptions struct {
	configPath string
	listen     string
	upstream   *url.URL
	wasmPath   string
	workers    int
	profile    host.Profile
	pluginName string
	// minLevel indexes logLevelNames: the lowest module log level shown.
	minLevel int
	noFilter bool
	admin    string
	clusters grpcClusters
	// upstreamTimeout bounds each upstream response (504 when it fires); drainTimeout is how long
	// a stop waits for the requests in flight before it cuts them.
	upstreamTimeout, drainTimeout time.Duration
	// stdin is read for --config - (nil: not read).
	stdin io.Reader
	// stop, when set, replaces SIGINT and SIGTERM (tests).
	stop <-chan os.Signal
}

// parseServeFlags reads and checks the flags of tollgate serve. When they are wrong it says why
// on stderr, every problem at once, and returns false: the command then exits with 2.
func parseServeFlags(args []string, stderr io.Writer) (serveOptions, bool) {
	fs := commandFlags("serve", stderr)
	configPath := fs.String("config", "", "plugin configuration `FILE` (JSON; - reads standard input), required")
	listen := fs.String("listen", "127.0.0.1:8080", "`ADDR` to listen on")
	upstream := fs.String("upstream", "", "upstream base `URL` for admitted requests, required")
	wasmPath := moduleFlag(fs)
	workers := fs.Int("workers", 2, "worker VMs, like Envoy's --concurrency")
	envoy := fs.String("envoy", "1.33", "Envoy generation to emulate: 1.33 (1.33 to 1.38) or 1.39")
	pluginName := fs.String("plugin-name", "tollgate", "Envoy's config.name for the plugin")
	logLevel := fs.String("log-level", "info", "lowest module log level shown: trace, debug, info, warn, error, critical")
	noFilter := fs.Bool("no-filter", false, "proxy without the module (no --config needed): a baseline for load tests")
	admin := fs.String("admin", "", "`ADDR` for the admin listener serving /stats and /stats/prometheus (off when empty)")
	upstreamTimeout := fs.Duration("upstream-timeout", 15*time.Second,
		"longest wait for the upstream's whole response, as Envoy's route timeout (504 when it fires)")
	drainTimeout := fs.Duration("drain-timeout", 20*time.Second,
		"on SIGINT or SIGTERM, how long the requests in flight may finish before they are cut (exit 1 if any is)")
	clusters := grpcClusters{}
	fs.Var(clusters, "grpc-cluster", "`NAME=HOST:PORT` of a gRPC cluster the global limits call, e.g. ratelimit=127.0.0.1:8081 (repeatable)")
	if err := fs.Parse(args); err != nil {
		return serveOptions{}, false
	}
	var problems []string
	if *configPath == "" && !*noFilter {
		problems = append(problems, "--config is required: the plugin configuration file, e.g. --config examples/tollgate.json")
	}
	upstreamURL, err := url.Parse(*upstream)
	if *upstream == "" {
		problems = append(problems, "--upstream is required: the base URL of the service to protect, e.g. --upstream http://127.0.0.1:8081")
	} else if err != nil || (upstreamURL.Scheme != "http" && upstreamURL.Scheme != "https") || upstreamURL.Host == "" {
		problems = append(problems, fmt.Sprintf("--upstream %q is not an http(s) URL with a host, e.g. http://127.0.0.1:8081", *upstream))
	}
	if *workers < 1 || *workers > 256 {
		problems = append(problems, fmt.Sprintf("--workers %d is out of range: use 1 to 256", *workers))
	}
	profile, ok := envoyProfile(*envoy)
	if !ok {
		problems = append(problems, fmt.Sprintf("--envoy %q is not supported: use 1.33 (Envoy 1.33 to 1.38) or 1.39", *envoy))
	}
	minLevel := logLevelIndex(*logLevel)
	if minLevel < 0 {
		problems = append(problems, fmt.Sprintf("--log-level %q is not a level: use trace, debug, info, warn, error or critical", *logLevel))
	}
	if *upstreamTimeout <= 0 || *upstreamTimeout > time.Hour {
		problems = append(problems, fmt.Sprintf("--upstream-timeout %s is out of range: use a duration from 1ms to 1h, e.g. 15s", *upstreamTimeout))
	}
	if *drainTimeout <= 0 || *drainTimeout > time.Hour {
		problems = append(problems, fmt.Sprintf("--drain-timeout %s is out of range: use a duration from 1ms to 1h, e.g. 20s", *drainTimeout))
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "tollgate serve: "+p)
		}
		return serveOptions{}, false
	}
	return serveOptions{
		configPath: *configPath,
		listen:     *listen,
		upstream:   upstreamURL,
		wasmPath:   *wasmPath,
		workers:    *workers,
		profile:    profile,
		pluginName: *pluginName,
		minLevel:   minLevel,
		noFilter:   *noFilter,
		admin:      *admin,
		clusters:   clusters,

		upstreamTimeout: *upstreamTimeout,
		drainTimeout:    *drainTimeout,
	}, true
}

// envoyProfile is the host profile of an --envoy value, and false for an unsupported one.
func envoyProfile(version string) (host.Profile, bool) {
	switch version {
	case "1.33":
		return host.Envoy133, true
	case "1.39":
		return host.Envoy139, true
	}
	return host.Envoy133, false
}

// logLevelIndex is the proxy-wasm log level named by a --log-level value, or -1.
func logLevelIndex(name string) int {
	for i, n := range logLevelNames {
		if n == name {
			return i
		}
	}
	return -1
}
