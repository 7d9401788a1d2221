// Command fsimport is a test module that touches the file system, which makes upstream Go import
// WASI functions that Envoy provides only from 1.39.
package main

import (
	"os"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
)

func main() {}

func init() {
	abi.SetVMContext(&types.DefaultVMContext{})
	_, _ = os.Stat("/etc/hostname")
}
