package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/gateway"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

var logLevelNames = []string{"trace", "debug", "info", "warn", "error", "critical"}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tollgate serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "plugin configuration `FILE` (JSON), required")
	listen := fs.String("listen", "127.0.0.1:8080", "`ADDR` to listen on")
	upstream := fs.String("upstream", "", "upstream base `URL` for admitted requests, required")
	wasmPath := fs.String("wasm", "build/tollgate.wasm", "the module `FILE`")
	workers := fs.Int("workers", 2, "worker VMs, like Envoy's --concurrency")
	envoy := fs.String("envoy", "1.33", "Envoy generation to emulate: 1.33 (1.33 to 1.38) or 1.39")
	pluginName := fs.String("plugin-name", "tollgate", "Envoy's config.name for the plugin")
	logLevel := fs.String("log-level", "info", "lowest module log level shown: trace, debug, info, warn, error, critical")
	noFilter := fs.Bool("no-filter", false, "proxy without the module (no --config needed): a baseline for load tests")
	admin := fs.String("admin", "", "`ADDR` for the admin listener serving /stats and /stats/prometheus (off when empty)")
	clusters := grpcClusters{}
	fs.Var(clusters, "grpc-cluster", "`NAME=HOST:PORT` of a gRPC cluster the global limits call, e.g. ratelimit=127.0.0.1:8081 (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
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
	profile := host.Envoy133
	switch *envoy {
	case "1.33":
	case "1.39":
		profile = host.Envoy139
	default:
		problems = append(problems, fmt.Sprintf("--envoy %q is not supported: use 1.33 (Envoy 1.33 to 1.38) or 1.39", *envoy))
	}
	minLevel := -1
	for i, n := range logLevelNames {
		if n == *logLevel {
			minLevel = i
		}
	}
	if minLevel < 0 {
		problems = append(problems, fmt.Sprintf("--log-level %q is not a level: use trace, debug, info, warn, error or critical", *logLevel))
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "tollgate serve: "+p)
		}
		return 2
	}

	errorLog := log.New(stderr, "tollgate serve: ", 0)
	if *noFilter {
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
			return 1
		}
		srv := &http.Server{Handler: gateway.NewPassThrough(upstreamURL, errorLog), ErrorLog: errorLog, ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintf(stdout, "tollgate serve: listening on http://%s, proxying to %s without the filter\n", ln.Addr(), upstreamURL)
		return serveUntilSignal(srv, ln, stderr)
	}
	pluginConfig, err := os.ReadFile(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
		return 1
	}
	// The module would reject it too, but the file's own problems read better from here.
	cfg, err := config.Parse(pluginConfig)
	if err != nil {
		printProblems(stderr, *configPath, err)
		return 1
	}
	if missing := clusters.missingClusters(cfg); len(missing) > 0 {
		for _, p := range missing {
			fmt.Fprintln(stderr, "tollgate serve: "+p)
		}
		return 2
	}
	wasm, err := os.ReadFile(*wasmPath)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: cannot read the module: %v (run `make build`, or pass --wasm)\n", err)
		return 1
	}

	ctx := context.Background()
	h, err := host.New(ctx, wasm, host.Options{
		Profile:      profile,
		PluginName:   *pluginName,
		RootID:       *pluginName,
		VMID:         *pluginName,
		PluginConfig: pluginConfig,
		LogLevel:     uint32(minLevel),
		GrpcClusters: clusters,
		Log: func(e host.LogEntry) {
			if int(e.Level) >= minLevel {
				fmt.Fprintf(stderr, "[vm %d] %s: %s\n", e.VM, logLevelNames[min(int(e.Level), 5)], e.Message)
			}
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: load %s: %v\n", *wasmPath, err)
		return 1
	}
	defer h.Close(ctx)
	gw, err := gateway.New(ctx, h, *workers, upstreamURL, errorLog)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
		return 1
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: gw, ErrorLog: errorLog, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "tollgate serve: listening on http://%s, proxying to %s with %d worker VM(s), emulating %s\n",
		ln.Addr(), upstreamURL, *workers, profile)

	if *admin != "" {
		adminLn, err := net.Listen("tcp", *admin)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate serve: admin: %v\n", err)
			return 1
		}
		adminSrv := &http.Server{Handler: gateway.AdminHandler(h.Metrics()), ErrorLog: errorLog, ReadHeaderTimeout: 10 * time.Second}
		go adminSrv.Serve(adminLn)
		defer adminSrv.Close()
		fmt.Fprintf(stdout, "tollgate serve: metrics on http://%s/stats and /stats/prometheus\n", adminLn.Addr())
	}

	return serveUntilSignal(srv, ln, stderr)
}

// serveUntilSignal serves until the listener fails or SIGINT/SIGTERM asks for a graceful stop.
func serveUntilSignal(srv *http.Server, ln net.Listener, stderr io.Writer) int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
		return 1
	case <-stop:
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "tollgate serve: shutdown: %v\n", err)
		}
		return 0
	}
}
