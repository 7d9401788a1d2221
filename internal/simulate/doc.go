// Package simulate replays an access log through the real module in the embedded host, on a
// manual clock that jumps to each request's start time, and reports what a configuration would
// have done to that traffic: per rule the admitted, limited, shadow-limited, missing-key and
// exempt requests, the keys limited most, each key's peak rate against the limits, and the
// decisions over time (summary.json and a self-contained HTML report with SVG charts).
//
// The decisions are the module's own, read from its counters after each request; the native
// admission code only names the partition key a rule charged, so that figures can be given per
// key. Reading logs: envoy-json (the json_format of docs/simulate.md) and combined.
//
// Units: times in Unix nanoseconds, rates in requests per second.
package simulate
