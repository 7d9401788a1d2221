//go:build tollgate_faults

package plugin

// This file is compiled only with -tags tollgate_faults, by the end-to-end tests that force the
// module's panic paths (e2e/panic_test.go). It is never part of build/tollgate.wasm.
//
// A request carrying "x-tollgate-fault: <point>" panics at that fault point:
//
//	request   in OnHttpRequestHeaders, inside the filter's own recover (the failure mode applies)
//	response  in OnHttpResponseHeaders of the same stream
//	context   arms a panic in NewHttpContext of the next stream (headers cannot be read there)
//	gcstats   logs the number of garbage collections so far ("tollgate_faults: gc N"), for the
//	          soak test; nothing panics
//	trap      a fatal error of Go's runtime, which no recover catches: the VM traps, and
//	          Envoy's failure_policy decides what happens next

import (
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/tollgate-proxy/tollgate/internal/abi"
)

const faultHeader = "x-tollgate-fault"

// faultsBuilt is whether this is the test build that forces panics: its response headers
// callback reaches the plugin whatever the configuration, so that "response" can panic there.
const faultsBuilt = true

// contextArmed makes the next NewHttpContext panic.
var contextArmed bool

func faultPoint(where string) {
	if where == "context" {
		if contextArmed {
			contextArmed = false
			panic("tollgate_faults: forced panic in NewHttpContext")
		}
		return
	}
	if where != "request" && where != "response" {
		return
	}
	// The request headers are readable in the request phase only; a response-phase fault is
	// remembered from it (see noteFault).
	if where == "response" {
		if pendingResponsePanic {
			pendingResponsePanic = false
			panic("tollgate_faults: forced panic in OnHttpResponseHeaders")
		}
		return
	}
	value, err := abi.GetHttpRequestHeader(faultHeader)
	if err != nil {
		return
	}
	switch value {
	case "request":
		panic("tollgate_faults: forced panic in OnHttpRequestHeaders")
	case "response":
		pendingResponsePanic = true
	case "context":
		contextArmed = true
	case "trap":
		var mu sync.Mutex
		mu.Unlock()
	case "gcstats":
		var stats debug.GCStats
		debug.ReadGCStats(&stats)
		abi.Log(abi.LogLevelInfo, "tollgate_faults: gc "+strconv.FormatInt(stats.NumGC, 10))
	}
}

// pendingResponsePanic makes the response phase of the current stream panic. A VM runs one
// callback at a time, and the e2e tests finish each stream before the next.
var pendingResponsePanic bool
