// Command packdata is the step of `make build` after wasm-opt: it packs the data segments of
// each module named, in place, into one compressed segment that a start function unpacks when
// the module is instantiated (internal/wasmdata). A module it cannot read is left as it is, and
// the command fails.
//
//	go run ./internal/wasmdata/packdata MODULE...
package main

import (
	"fmt"
	"os"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
	"github.com/tollgate-proxy/tollgate/internal/wasmdata"
)

func main() {
	os.Exit(wasmbin.RewriteModules("packdata", os.Args[1:],
		func(path string) (string, error) {
			stats, err := wasmdata.PackFile(path)
			return fmt.Sprintf("%s: %d data segments (a %d-byte section) packed into one of %d bytes, unpacked at instantiation into %d bytes of memory",
				path, stats.Segments, stats.Before, stats.After, stats.Image), err
		}))
}
