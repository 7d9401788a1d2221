// Command threadjumps is a step of `make build` before wasm-opt: it threads the forward jumps of
// each module named in place, so that they no longer go through their function's dispatch loop
// (internal/wasmjump). A module it cannot read is left as it is, and the command fails.
//
//	go run ./internal/wasmjump/threadjumps MODULE...
package main

import (
	"fmt"
	"os"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
	"github.com/tollgate-proxy/tollgate/internal/wasmjump"
)

func main() {
	os.Exit(wasmbin.RewriteModules("threadjumps", os.Args[1:],
		func(path string) (string, error) {
			count, err := wasmjump.ThreadFile(path)
			return fmt.Sprintf("%s: %d jumps threaded", path, count), err
		}))
}
