package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// demoUpstream answers every request with a line naming it: something for `make run` to protect.
// The status is 200, or the one the status query parameter asks for (?status=503, 200 to
// 599), to try rules that count or refund by status. POST /v1/chat/completions and
// POST /v1/messages answer as OpenAI's and Anthropic's APIs would, with the token usage the
// client chooses (demollm.go), to try usage-based charging.
func demoUpstream(args []string, stdout, stderr io.Writer) int {
	fs := commandFlags("demo-upstream", stderr)
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
	srv := &http.Server{Handler: demoHandler(), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintf(stderr, "tollgate demo-upstream: %v\n", err)
		return 1
	}
	return 0
}

// demoHandler is the demo upstream's handler: the LLM endpoints (demollm.go), and a line naming
// the request for any other.
func demoHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", serveLLM(openAIEvents, openAIDocument))
	mux.Handle("POST /v1/messages", serveLLM(anthropicEvents, anthropicDocument))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		status := http.StatusOK
		if asked, err := strconv.Atoi(r.URL.Query().Get("status")); err == nil && asked >= 200 && asked <= 599 {
			status = asked
		}
		w.Header().Set("content-type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, "hello from the demo upstream: %s %s\n", r.Method, r.URL.RequestURI())
	})
	return mux
}
