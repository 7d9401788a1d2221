package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// demoUpstream answers every request with 200 and a line naming it: something for `make run`
// to protect.
func demoUpstream(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tollgate demo-upstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8081", "`ADDR` to listen on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate demo-upstream: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "tollgate demo-upstream: listening on http://%s\n", ln.Addr())
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("content-type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "hello from the demo upstream: %s %s\n", r.Method, r.URL.RequestURI())
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintf(stderr, "tollgate demo-upstream: %v\n", err)
		return 1
	}
	return 0
}
