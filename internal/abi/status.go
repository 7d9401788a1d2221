package abi

import "github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

// parseStatus reads a :status value: three digits.
func parseStatus(b []byte) (int, error) {
	if len(b) != 3 {
		return 0, types.ErrorStatusBadArgument
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, types.ErrorStatusBadArgument
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}
