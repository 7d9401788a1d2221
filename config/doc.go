// Package config parses and validates Tollgate's plugin configuration, the
// JSON document that Envoy (or Istio's WasmPlugin pluginConfig) hands to the
// rate-limit filter.
//
// The same package is linked into the wasm module and into the
// `tollgate check` command, so both accept and reject exactly the same
// documents: a configuration that passes `tollgate check` will load in the
// proxy, and one the proxy would refuse fails the check with the same
// messages. For that reason it depends only on the standard library.
//
// # Schema
//
// Field names are snake_case. Unknown and repeated fields are rejected at
// every level, and JSON null counts as a value of the wrong type.
//
//	{
//	  "rules": [                          required, 1 to 64 rules
//	    {
//	      "name": "per-api-key",          required, 1 to 64 of A-Z a-z 0-9 . _ -, unique
//	      "key": [                        required, 1 to 8 parts, each with exactly one of:
//	        {"header": "x-api-key"},      an RFC 9110 header name (up to 256 characters, stored
//	                                      lower-cased) or a request pseudo-header such as ":authority"
//	        {"client_ip": {}}             the downstream client address; takes no fields yet
//	      ],
//	      "limits": [                     required, 1 to 8 token buckets, all of which must pass
//	        {
//	          "capacity": 3,              required, tokens: the burst size, 1 to 1000000000
//	          "refill_tokens": 1,         required, tokens added per interval, 1 to 1000000000
//	          "refill_interval": "1s"     required, a Go duration string from "1ms" to "24h"
//	        }
//	      ]
//	    }
//	  ],
//	  "failure_mode": "allow"             optional: "allow" (default) or "deny" the request
//	}                                     when the limiter itself fails (shared memory errors)
//
// Token counts may be written as 3, 3.0 or 3e0, because Istio converts
// pluginConfig through protobuf Struct where every number is a double, but
// must be whole. Durations use time.ParseDuration syntax such as "500ms",
// "1s", "1m" or "24h"; a bare number is rejected because its unit would be
// a guess. A limit is also rejected when capacity × (refill_interval in
// nanoseconds / gcd(refill_interval in nanoseconds, refill_tokens)) exceeds
// 2^62, since the limiter's exact token arithmetic would overflow.
//
// # Errors
//
// Parse reports every problem it finds, not just the first, as an *Error
// (up to 100; beyond that a final problem says how many more there are).
// Each Problem names the field by its path (for example
// "rules[0].limits[1].refill_interval"), the offending value, and how to fix
// it. Broken JSON syntax is the exception: it is reported once, with its line,
// column and byte offset, because nothing after it can be trusted.
package config
