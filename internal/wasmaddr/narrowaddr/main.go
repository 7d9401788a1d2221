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
	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
)

func main() {
	os.Exit(wasmbin.RewriteModules("narrowaddr", os.Args[1:],
		func(path string) (string, error) {
			count, err := wasmaddr.NarrowFile(path)
			return fmt.Sprintf("%s: %d 64-bit computations narrowed", path, count), err
		}))
}
