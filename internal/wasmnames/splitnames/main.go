// Command splitnames is the last step of `make build`: it moves the function names of a built
// module out of it, into a map beside it (internal/wasmnames).
//
//	go run ./internal/wasmnames/splitnames MODULE
//
// writes MODULE.names, the map, and MODULE, the module with its name section reduced to the names
// of the functions it exports. A module whose names were already split, whose every name is an
// exported function's, is refused: its map would overwrite the full one with those few names.
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: splitnames MODULE (writes MODULE.names and the reduced MODULE)")
		os.Exit(2)
	}
	if err := split(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "splitnames:", err)
		os.Exit(1)
	}
}

func split(path string) error {
	module, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	reduced, names, err := wasmnames.Split(module)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	kept, err := wasmnames.FunctionNames(reduced)
	if err != nil {
		return fmt.Errorf("%s: the reduced module: %v", path, err)
	}
	if len(kept) == len(names) {
		return fmt.Errorf("%s names only its %d exported functions: its names were split out already (rebuild it)", path, len(kept))
	}
	var text bytes.Buffer
	names.WriteTo(&text)
	// The map first: a module is never left reduced without the map of its names.
	if err := wasmbin.ReplaceFile(path+".names", text.Bytes()); err != nil {
		return err
	}
	if err := wasmbin.ReplaceFile(path, reduced); err != nil {
		return err
	}
	fmt.Printf("%s: %d function names moved to %s (%d bytes); the module keeps its %d entry points' (%d bytes less)\n",
		path, len(names), path+".names", text.Len(), len(kept), len(module)-len(reduced))
	return nil
}
