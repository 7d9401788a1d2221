// Package abitest drives the plugin natively, in-process, against a host with Envoy's semantics
// (package hostcore's shared data, header maps, local replies and attributes, plus ticks, gRPC
// calls, metrics, logs and clocks moved by hand), through the native twin of internal/abi.
//
// A test starts the plugin (Start), creates streams and delivers their request headers,
// response headers and end (Host.Request, Stream.ResponseHeaders, Stream.End), fires ticks
// (Host.Tick), answers or fails the gRPC calls the plugin made (Host.Calls, Host.Answer,
// Host.Fail), moves the clocks (Host.Advance), and observes what Envoy would: the action of
// each callback, whether and when a paused request went on (Stream.Continued), local replies as
// Envoy shapes them (Stream.Reply), the request headers forwarded upstream, the response
// headers sent to the client, metrics by name, logs, and misuses Envoy answers Ok but mishandles
// (they fail the test unless it takes them, Host.TakeMisuses).
//
// Callbacks run at once and synchronously; the host carries out what a callback asked for (a
// local reply, continuing a request) when it returns, as Envoy does. One Host runs at a time:
// the plugin's package state is one VM's, so tests using it must not run in parallel.
//
// Units: times in nanoseconds, tick periods in milliseconds.
package abitest
