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
// every level, and JSON null counts as a value of the wrong type. Only
// "rules" is required; every other field has a default, which Parse fills in.
//
//	{
//	  "rules": [                          required, 1 to 64 rules
//	    {
//	      "name": "per-api-key",          required, 1 to 64 of A-Z a-z 0-9 . _ -, unique
//	      "match": {                      optional, the requests the rule applies to (default all);
//	                                      every condition given must hold
//	        "path": {"prefix": "/api/"},  exactly one of "exact" or "prefix", starting with "/",
//	                                      without query string or fragment
//	        "methods": ["GET", "POST"],   1 to 16 RFC 9110 tokens, stored upper-cased, no repeats
//	        "hosts": ["api.example.com"], 1 to 16 names of letters, digits, '.' and '-' (no port,
//	                                      no wildcards), stored lower-cased, no repeats
//	        "headers": [...]              1 to 16 header matches (below)
//	      },
//	      "key": [                        required, 1 to 8 parts, each with exactly one of:
//	        {"header": "x-api-key"},      an RFC 9110 header name (up to 256 characters, stored
//	                                      lower-cased) or a request pseudo-header such as ":authority"
//	        {"client_ip": {}},            the client address (see the top-level "client_ip")
//	        {"path": {}},                 the path without the query string
//	        {"method": {}},               the method
//	        {"authority": {}},            the host and its canonical port (lower-cased, no trailing
//	                                      dot, no leading zeros, no empty or default port);
//	                                      {"strip_port": true}: the host alone
//	        {"query": "tenant"},          a query parameter's first value: 1 to 256 bytes,
//	                                      without & = # ? spaces or control characters
//	        {"attribute": ["xds", "route_name"]}
//	                                      an Envoy attribute path: 1 to 8 segments of 1 to 256
//	                                      bytes, without NUL
//	      ],                              path and method take no fields yet
//	      "missing_key": {                optional, for requests the key cannot be built for
//	        "action": "reject",           "reject" (default), "allow" (the rule does not apply)
//	                                      or "fallback" (use "key" below instead)
//	        "status": 401,                400 to 599, default 401; not with "allow"
//	        "key": [{"client_ip": {}}]    required with "fallback" and only allowed there; must
//	                                      leave out at least one part of the rule's key
//	      },
//	      "limits": [                     required, 1 to 8 limits, all of which must pass
//	        {
//	          "algorithm": "token_bucket",
//	                                      optional: "token_bucket" (default), "fixed_window",
//	                                      "sliding_window" or "concurrency"
//	          "capacity": 3,              required, 1 to 1000000000: the burst size of a token
//	                                      bucket, or the units admitted per window
//	          "refill_tokens": 1,         token_bucket only, required: tokens added per interval,
//	                                      1 to 1000000000
//	          "refill_interval": "1s",    token_bucket only, required: a duration from "1ms" to
//	                                      "366d" in ms, s, m, h, days ("d") or weeks ("w"): "7d"
//	          "window": "1m"              fixed_window and sliding_window only, required unless
//	                                      calendar is given: a duration as refill_interval
//	          "calendar": "month"         fixed_window only, instead of window: "day", "week" (ISO,
//	                                      from Monday) or "month", windows aligned on UTC calendar
//	                                      boundaries of the wall clock
//	        },
//	        {
//	          "algorithm": "concurrency", a concurrency limit takes these two fields instead:
//	          "max_in_flight": 4,         required: requests of a key between admission and the
//	                                      end of their stream, 1 to 1000000
//	          "slot_timeout": "30s"       optional (default "1m"): a slot whose end is never seen
//	                                      is free after 1 to 2 timeouts; "1s" to "24h"
//	        }
//	      ],
//	      "limits_by": {                  instead of "limits" (a rule has exactly one): the limits
//	                                      of the tier one key part's value names
//	        "part": {"header": "x-plan"}, required: a key part of any kind (see "key"); it must
//	                                      come from something the client cannot set
//	        "default": "free",            required: the tier of a request without the value or
//	                                      with a value that names no tier
//	        "tiers": {                    required: 1 to 64 tiers, each a name (1 to 256 bytes) and
//	          "free": [...],              1 to 8 limits as in "limits"; every tier's limit at one
//	          "pro": [...]                position is one bucket of the key
//	        }
//	      },
//	      "cost": 1,                      optional: units per request, 0 to 1000000000 (default 1),
//	                                      or {"header": "x-cost", "max": 100, "default": 1} to read
//	                                      it from a request header (max 1 to 1000000000; default 0
//	                                      to max, 1 if absent); the cost, or max, must not exceed
//	                                      the smallest capacity of the rule's limits (of every
//	                                      tier's, with limits_by; a concurrency limit takes one
//	                                      slot whatever the cost)
//	      "shadow": false,                optional: true decides and counts but never rejects
//	      "global": {                     optional: also check requests the limits admit with a
//	                                      rate limit service shared by every replica (Envoy's
//	                                      RateLimitService/ShouldRateLimit: envoyproxy/ratelimit,
//	                                      Limitador); not on a shadow rule
//	        "cluster": "ratelimit",       required: the service's gRPC cluster as Envoy knows it,
//	                                      1 to 256 visible ASCII characters that do not also parse
//	                                      as protobuf (Envoy would read them as a GrpcService)
//	        "domain": "tollgate",         required: the rate limit domain, 1 to 256 bytes without
//	                                      control characters
//	        "entries": [{"key": "env", "value": "prod"}],
//	                                      optional: up to 8 constant descriptor entries, sent
//	                                      before the rule and key entries
//	        "rule_entry": "rule",         optional: the key of the entry whose value is the rule
//	                                      name (default "rule")
//	        "key_entry": "key",           optional: the key of the entry whose value is the
//	                                      hashed partition key (default "key"); entry keys are
//	                                      1 to 256 bytes without control characters, all distinct
//	        "timeout": "20ms",            optional: whole milliseconds from "1ms" to "60s"
//	                                      (default "20ms")
//	        "failure_mode": "allow",      optional: "allow" (default) or "deny" (503) when the
//	                                      service fails or times out
//	        "lease": {                    optional: take tokens from the service ahead of demand
//	                                      and spend them without a call per request
//	          "max_tokens": 16,           required: the most tokens one lease request asks for,
//	                                      1 to 10000
//	          "ttl": "1s"                 optional: how long leased tokens may be spent, "10ms"
//	                                      to "1h" (default "1s"); also never past the end of
//	                                      the service's window
//	        }
//	      }                               the request's cost is sent as hits_addend; a request
//	                                      that costs 0 is not sent
//	      "count": {"statuses": ["401"]}, optional: charge a request only when its response
//	                                      status is listed; 1 to 32 exact codes "100" to "599"
//	                                      or classes "1xx" to "5xx", strings, no repeats, no code
//	                                      whose class is listed too
//	      "refund": {"statuses": ["5xx"]} optional: give an admitted request's charge back when
//	                                      its response status is listed (same list); a rule has
//	                                      count or refund, not both, and neither with global
//	      "on_limit": {                   optional: what happens to a request over the limits
//	        "action": "delay",            required: "reject" (429 at once, the default) or
//	                                      "delay" (hold it until its tokens are due, and until
//	                                      a slot is free with a concurrency limit); token
//	                                      buckets and concurrency limits only; a shadow rule
//	                                      never holds
//	        "max_delay": "2s"             "delay" only, required: the longest a request is held,
//	                                      "1ms" to "60s", counted from its arrival; a later
//	                                      one is rejected at once
//	      }
//	    }
//	  ],
//	  "failure_mode": "allow",            optional: "allow" (default) or "deny" the request
//	                                      when the limiter itself fails (shared memory errors)
//	  "client_ip": {                      optional
//	    "xff_num_trusted_hops": 0         0 to 10, default 0: use the connection's address; N > 0
//	  },                                  uses the Nth address from the right of x-forwarded-for
//	  "exempt": {                         optional, requests no rule limits; any entry matching
//	                                      exempts the request; each list has 1 to 64 entries
//	    "paths": [{"exact": "/healthz"}, {"prefix": "/internal/"}],
//	    "client_cidrs": ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"],
//	                                      a single address means /32 or /128; stored masked
//	    "headers": [...]                  header matches (below)
//	  },
//	  "shadow": false,                    optional: true makes every rule a shadow rule
//	  "response": {                       optional, the reply to a rejected request
//	    "status": 429,                    400 to 599, default 429
//	    "body": "...",                    at most 4096 bytes, "{retry_after}" replaced with the
//	                                      seconds to wait; default
//	                                      "Too Many Requests: retry after {retry_after} s\n"
//	    "content_type": "text/plain; charset=utf-8"
//	                                      1 to 256 characters of visible ASCII and spaces
//	    "headers": {"x-served-by": "tollgate"}
//	                                      up to 16, kept in order; names are RFC 9110 tokens
//	                                      (stored lower-cased) other than pseudo-headers and those
//	                                      the filter sets (retry-after, content-type,
//	                                      content-length, ratelimit, ratelimit-policy,
//	                                      x-ratelimit-limit, -remaining and -reset); values are at
//	                                      most 1024 bytes without CR, LF or NUL
//	  },
//	  "rate_limit_headers": "off",        optional: "off" (default), "draft" (RateLimit and
//	                                      RateLimit-Policy) or "x-ratelimit" (X-RateLimit-*)
//	  "operator": {                       optional: the operator endpoint, off without it
//	    "path_prefix": "/.tollgate/",     required: 2 to 256 bytes of letters, digits, - . _ ~
//	                                      and /, starting and ending with '/', no "//"
//	    "client_cidrs": ["10.0.0.0/8"],   required: 1 to 64 CIDRs the peer (source.address) must
//	                                      be in; x-forwarded-for is never read
//	    "token_sha256": ["<hex>"],        required: 1 to 8 SHA-256 digests (64 hex digits) of the
//	                                      accepted bearer tokens
//	    "raw_keys": false,                optional: show keys, not their hashes, in the top view
//	    "top_keys": 32                    optional: keys kept per rule's top offenders, 1 to 256
//	  }
//	}
//
// A header match is {"name": "x-tier", "exact": "free"} (the header's first
// value equals "free"), {"name": "authorization", "present": true} (the
// header is there) or {"name": "x-debug", "present": false} (it is not). The
// name follows the rules of a key part's header; an exact value cannot
// contain CR, LF or NUL, nor start or end with a space or tab, since such a
// value could never match.
//
// Whole numbers may be written as 3, 3.0 or 3e0, because Istio converts
// pluginConfig through protobuf Struct where every number is a double, but
// must be whole. Durations use time.ParseDuration syntax with the units ms,
// s, m and h only, such as "500ms", "1.5s", "1m" or "24h"; refill_interval and
// window also take whole days ("d") and weeks ("w"), as in "7d", "1w" or
// "1d12h", up to "366d". A bare number
// is rejected because its unit would be a guess. Every combination of
// capacity, refill_tokens and refill_interval in range is exact: the limiter
// keeps a bucket's level as whole tokens and the credits toward the next one.
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
