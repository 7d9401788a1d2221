// Command narrowaddr is the step of `make build` before wasm-opt: it rewrites the address
// arithmetic of each module named in place, so that the optimizer can fold it, and the 64-bit
// loads and comparisons whose upper half is never used (internal/wasmaddr). A module it cannot
// read is left as it is, and the command fails.
//
//	go run ./internal/wasmaddr/narrowaddr MODULE...
package main

import (
	"fmt"
	"os"

	"github.com/tollgate-proxy/tollgate/internal/wasmaddr"
)

func main() {
	modules := os.Args[1:]
	if len(modules) == 0 {
		fmt.Fprintln(os.Stderr, "usage: narrowaddr MODULE... (rewrites each MODULE in place)")
		os.Exit(2)
	}
	failed := false
	for _, path := range modules {
		count, err := wasmaddr.NarrowFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "narrowaddr:", err)
			failed = true
			continue
		}
		fmt.Printf("%s: %d 64-bit computations narrowed\n", path, count)
	}
	if failed {
		os.Exit(1)
	}
}
