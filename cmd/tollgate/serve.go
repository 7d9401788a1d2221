package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/gateway"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// serve runs tollgate serve: the module in an Envoy-faithful host behind an HTTP listener, until
// SIGINT or SIGTERM.
func serve(args []string, stdout, stderr io.Writer) int {
	opts, ok := parseServeFlags(args, stderr)
	if !ok {
		return 2
	}
	return runServe(opts, stdout, stderr)
}

// runServe loads the configuration and the module, starts the host, the gateway and the
// listeners, and serves until a signal asks it to stop.
func runServe(opts serveOptions, stdout, stderr io.Writer) int {
	errorLog := log.New(stderr, "tollgate serve: ", 0)
	if opts.noFilter {
		ln, err := net.Listen("tcp", opts.listen)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
			return 1
		}
		srv := &http.Server{Handler: gateway.NewPassThrough(opts.upstream, errorLog), ErrorLog: errorLog, ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintf(stdout, "tollgate serve: listening on http://%s, proxying to %s without the filter\n", ln.Addr(), opts.upstream)
		return serveUntilSignal(srv, ln, stderr)
	}
	pluginConfig, err := readInput(opts.configPath, nil)
	if errors.Is(err, config.ErrTooLarge) {
		printProblems(stderr, opts.configPath, err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
		return 1
	}
	// The module would reject it too, but the file's own problems read better from here.
	cfg, err := config.Parse(pluginConfig)
	if err != nil {
		printProblems(stderr, opts.configPath, err)
		return 1
	}
	if missing := opts.clusters.missingClusters(cfg); len(missing) > 0 {
		for _, p := range missing {
			fmt.Fprintln(stderr, "tollgate serve: "+p)
		}
		return 2
	}
	wasm, err := os.ReadFile(opts.wasmPath)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: cannot read the module: %v (run `make build`, or pass --wasm)\n", err)
		return 1
	}

	ctx := context.Background()
	h, err := host.New(ctx, wasm, host.Options{
		Profile:      opts.profile,
		PluginName:   opts.pluginName,
		RootID:       opts.pluginName,
		VMID:         opts.pluginName,
		PluginConfig: pluginConfig,
		LogLevel:     uint32(opts.minLevel),
		GrpcClusters: opts.clusters,
		Log: func(e host.LogEntry) {
			if int(e.Level) >= opts.minLevel {
				fmt.Fprintf(stderr, "[vm %d] %s: %s\n", e.VM, logLevelNames[min(int(e.Level), 5)], e.Message)
			}
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: load %s: %v\n", opts.wasmPath, err)
		return 1
	}
	defer h.Close(ctx)
	gw, err := gateway.New(ctx, h, opts.workers, opts.upstream, errorLog)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
		return 1
	}

	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: gw, ErrorLog: errorLog, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "tollgate serve: listening on http://%s, proxying to %s with %d worker VM(s), emulating %s\n",
		ln.Addr(), opts.upstream, opts.workers, opts.profile)

	if opts.admin != "" {
		adminLn, err := net.Listen("tcp", opts.admin)
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
