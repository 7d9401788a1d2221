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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/gateway"
	"github.com/tollgate-proxy/tollgate/internal/host"
)

// serve runs tollgate serve: the module in an Envoy-faithful host behind an HTTP listener, until
// SIGINT or SIGTERM.
func serve(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	opts, ok := parseServeFlags(args, stderr)
	if !ok {
		return 2
	}
	opts.stdin = stdin
	return runServe(opts, stdout, stderr)
}

// runServe loads the configuration and the module, starts the host, the gateway and the
// listeners, and serves until a signal asks it to stop.
func runServe(opts serveOptions, stdout, stderr io.Writer) int {
	errorLog := log.New(stderr, "tollgate serve: ", 0)
	if opts.noFilter {
		return servePassThrough(opts, errorLog, stdout, stderr)
	}
	// The module would reject a bad one too, but the file's own problems read better from here.
	pluginConfig, cfg, ok := loadConfig("serve", opts.configPath, opts.stdin, stderr)
	if !ok {
		return 1
	}
	if missing := opts.clusters.missingClusters(cfg); len(missing) > 0 {
		for _, p := range missing {
			fmt.Fprintln(stderr, "tollgate serve: "+p)
		}
		return 2
	}
	wasm, err := readRegularFile(opts.wasmPath)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: cannot read the module: %v (run `make build`, or pass --wasm)\n", err)
		return 1
	}

	ctx := context.Background()
	h, err := host.New(ctx, wasm, serveHostOptions(opts, pluginConfig, stderr))
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
	gw.SetUpstreamTimeout(opts.upstreamTimeout)
	// The module's timers, in real time: it hands its counters to the host on its ticks.
	tickCtx, stopTicks := context.WithCancel(ctx)
	defer stopTicks()
	go h.RunTicks(tickCtx)

	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: gw, ErrorLog: errorLog, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "tollgate serve: listening on http://%s, proxying to %s with %d worker VM(s), emulating %s\n",
		ln.Addr(), opts.upstream, opts.workers, opts.profile)

	if opts.admin != "" {
		adminSrv, err := serveAdmin(h, opts.admin, errorLog, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate serve: admin: %v\n", err)
			return 1
		}
		defer adminSrv.Close()
	}

	return serveUntilSignal(srv, ln, opts, stderr)
}

// servePassThrough serves --no-filter: the gateway proxies every request, no module runs.
func servePassThrough(opts serveOptions, errorLog *log.Logger, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
		return 1
	}
	gw := gateway.NewPassThrough(opts.upstream, errorLog)
	gw.SetUpstreamTimeout(opts.upstreamTimeout)
	srv := &http.Server{Handler: gw, ErrorLog: errorLog, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "tollgate serve: listening on http://%s, proxying to %s without the filter\n", ln.Addr(), opts.upstream)
	return serveUntilSignal(srv, ln, opts, stderr)
}

// serveHostOptions are the host's options for the flags: the plugin named as Envoy names it from
// config.name, and the module's log lines from --log-level up on stderr.
func serveHostOptions(opts serveOptions, pluginConfig []byte, stderr io.Writer) host.Options {
	return host.Options{
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
	}
}

// serveAdmin starts the admin listener on addr, serving the host's metrics at /stats and
// /stats/prometheus, and says where on stdout.
func serveAdmin(h *host.Host, addr string, errorLog *log.Logger, stdout io.Writer) (*http.Server, error) {
	adminLn, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// The module hands its counters over on its ticks; the admin endpoints fire them first,
	// so that they show every request answered so far (Envoy's show the last tick's).
	stats := gateway.AdminHandler(h.Metrics())
	current := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = h.Tick(r.Context()) // a failed VM is reported by its requests, not here
		stats.ServeHTTP(w, r)
	})
	adminSrv := &http.Server{Handler: current, ErrorLog: errorLog, ReadHeaderTimeout: 10 * time.Second}
	go adminSrv.Serve(adminLn)
	fmt.Fprintf(stdout, "tollgate serve: metrics on http://%s/stats and /stats/prometheus\n", adminLn.Addr())
	return adminSrv, nil
}

// serveUntilSignal serves until the listener fails or SIGINT/SIGTERM asks for a graceful stop:
// the listener closes, the requests in flight get opts.drainTimeout to finish, and any still
// running then is cut, which makes the exit status 1 (a supervisor should know that answers
// were lost). A clean stop exits 0.
func serveUntilSignal(srv *http.Server, ln net.Listener, opts serveOptions, stderr io.Writer) int {
	stop := opts.stop
	if stop == nil {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(signals)
		stop = signals
	}
	var inFlight atomic.Int64
	handler := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		handler.ServeHTTP(w, r)
	})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		fmt.Fprintf(stderr, "tollgate serve: %v\n", err)
		return 1
	case sig := <-stop:
		fmt.Fprintf(stderr, "tollgate serve: %v: stopping; requests in flight have %s to finish\n", sig, opts.drainTimeout)
		ctx, cancel := context.WithTimeout(context.Background(), opts.drainTimeout)
		defer cancel()
		err := srv.Shutdown(ctx)
		if err == nil {
			return 0
		}
		cut := inFlight.Load()
		srv.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(stderr, "tollgate serve: %d request(s) still in flight after %s were cut\n", cut, opts.drainTimeout)
		} else {
			fmt.Fprintf(stderr, "tollgate serve: stop: %v\n", err)
		}
		return 1
	}
}
