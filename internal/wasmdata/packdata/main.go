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

	"github.com/tollgate-proxy/tollgate/internal/wasmdata"
)

func main() {
	modules := os.Args[1:]
	if len(modules) == 0 {
		fmt.Fprintln(os.Stderr, "usage: packdata MODULE... (rewrites each MODULE in place)")
		os.Exit(2)
	}
	failed := false
	for _, path := range modules {
		stats, err := wasmdata.PackFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "packdata:", err)
			failed = true
			continue
		}
		fmt.Printf("%s: %d data segments (a %d-byte section) packed into one of %d bytes, unpacked at instantiation into %d bytes of memory\n",
			path, stats.Segments, stats.Before, stats.After, stats.Image)
	}
	if failed {
		os.Exit(1)
	}
}
