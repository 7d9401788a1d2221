package wasmdata_test

import (
	"bytes"
	"fmt"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
	"github.com/tollgate-proxy/tollgate/internal/wasmdata"
)

// A module of one memory page and three data segments, one of them a record repeated: packed,
// the three become one segment of a sixth of their bytes, which its start function (about 300
// bytes of code, types and sections, once per module) unpacks.
func ExamplePack() {
	data := []byte{3}
	for i, s := range [][]byte{[]byte("a name"), bytes.Repeat([]byte("record\x01\x02"), 40), []byte("another name")} {
		data = append(data, 0, 0x41) // active, at i32.const ...
		data = wasmbin.AppendS32(data, int32(4096+1000*i))
		data = append(wasmbin.AppendU32(append(data, 0x0b), uint32(len(s))), s...)
	}
	module := []byte(wasmbin.Header)
	module = wasmbin.AppendSection(module, 5, []byte{1, 0, 1}) // one memory of one page
	module = wasmbin.AppendSection(module, wasmbin.DataSection, data)

	packed, stats, err := wasmdata.Pack(module)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d segments, a %d-byte section, packed into one of %d bytes\n", stats.Segments, stats.Before, stats.After)
	fmt.Printf("the module: %d bytes, then %d with the start function\n", len(module), len(packed))
	// Output:
	// 3 segments, a 361-byte section, packed into one of 60 bytes
	// the module: 374 bytes, then 370 with the start function
}
