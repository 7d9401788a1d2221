package plugin

import (
	"errors"
	"unsafe"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// What the decision reads and writes through the ABI: the request's attributes
// (admission.Request) and Envoy's shared data (admission.Store).

// request reads request attributes through the ABI. Its strings live in the ABI's scratch arena
// and are valid until proxy_on_request_headers returns: the decision reads them, and copies what it
// keeps (the partition key is built anew from them). The ABI reads the headers once per
// callback, all of them, at the first read (abi.GetHttpRequestHeaders), and again after an edit;
// other attributes are read when the decision asks. An attribute that is absent is not found; any
// other error is kept in err, for the failure mode.
type request struct {
	err error
}

func (r *request) found(err error) bool {
	if err != nil && !errors.Is(err, types.ErrorStatusNotFound) && r.err == nil {
		r.err = err
	}
	return err == nil
}

func (r *request) Header(name string) (string, bool) {
	headers, err := abi.GetHttpRequestHeaders() // read once per callback, by the ABI
	v, found := wire.PairsValue(headers, name)
	if !found && err != nil {
		r.found(err)
	}
	return arenaString(v), found
}

func (r *request) HeaderValues(name string) (string, bool) {
	v, err := abi.GetProperty("request", "headers", name)
	return arenaString(v), r.found(err)
}

func (r *request) SourceAddress() (string, bool) {
	v, err := abi.GetProperty("source", "address")
	return arenaString(v), r.found(err)
}

func (r *request) Property(path []string) (string, bool) {
	v, err := abi.GetProperty(path...)
	return arenaString(v), r.found(err)
}

// arenaString views bytes in the ABI's scratch arena as a string, without copying.
func arenaString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// store is Envoy shared data through the ABI, with the host's not-found and CAS-mismatch
// statuses mapped to admission's errors. It is used through sharedData, a pointer: a zero-size
// value in an interface would add a wrapper call to every Get and Set.
type store struct{}

var sharedData = &store{}

func (*store) Get(key string) ([]byte, uint32, error) {
	value, cas, st := abi.GetSharedData(key)
	if st != wire.StatusOK {
		return nil, 0, storeError(st)
	}
	return value, cas, nil
}

func (*store) Set(key string, value []byte, cas uint32) error {
	if st := abi.SetSharedData(key, value, cas); st != wire.StatusOK {
		return storeError(st)
	}
	return nil
}

func storeError(st wire.Status) error {
	switch st {
	case wire.StatusNotFound:
		return admission.ErrNotFound
	case wire.StatusCasMismatch:
		return admission.ErrCasMismatch
	}
	return abi.StatusError(st)
}
