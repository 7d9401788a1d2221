package wasmnames_test

import (
	"fmt"
	"os"

	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

// Split a module's names out of it, then resolve a frame Envoy prints without a name.
func ExampleSplit() {
	reduced, names, err := wasmnames.Split(tiny())
	if err != nil {
		fmt.Println(err)
		return
	}
	kept, _ := wasmnames.FunctionNames(reduced)
	fmt.Println("the module names:", kept)
	names.WriteTo(os.Stdout)
	name, _ := names.Lookup(3)
	fmt.Println("unknown(function index:3) is", name)
	// Output:
	// the module names: [{2 run}]
	// 0 env.note
	// 1 helper
	// 2 run
	// 3 inner
	// unknown(function index:3) is inner
}
