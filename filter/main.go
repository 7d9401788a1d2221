package main

import (
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/plugin"
)

// main never runs in a c-shared module; init registers the contexts inside _initialize.
func main() {}

func init() { abi.SetVMContext(plugin.NewVMContext()) }
