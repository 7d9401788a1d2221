package config

import (
	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// Limits of the schema. They keep the per-request work and the
// shared-memory footprint of a configuration small and predictable.
const (
	maxRules          = 64
	maxRuleNameLength = 64
	maxKeyParts       = 8
	maxHeaderLength   = 256
	maxLimitsPerRule  = 8
	maxTokens         = 1_000_000_000
	minDuration       = duration.Millisecond
	maxDuration       = 24 * duration.Hour

	maxTrustedHops            = 10
	maxExemptions             = 64 // entries in each exempt list
	maxMatchEntries           = 16 // entries in each match list
	maxMethodLength           = 256
	maxHostLength             = 253 // the longest DNS name
	maxQueryLength            = 256
	maxAttributeSegments      = 8
	maxAttributeSegmentLength = 256
	maxCost                   = 1_000_000_000
	minStatus                 = 400
	maxStatus                 = 599
	maxBodyLength             = 4096
	maxContentTypeLength      = 256
	maxResponseHeaders        = 16
	maxResponseHeaderValue    = 1024
)

// Defaults filled in by Parse, so that callers never see a zero value where
// the schema documents a default.
const (
	defaultCostUnits        = 1
	defaultMissingKeyStatus = 401
	defaultResponseStatus   = 429
	defaultResponseBody     = "Too Many Requests: retry after {retry_after} s\n"
	defaultContentType      = "text/plain; charset=utf-8"
)

// Examples quoted in fixes, so that every message shows something that works.
const (
	exampleLimit       = `{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}`
	exampleWindowLimit = `{"algorithm": "fixed_window", "capacity": 100, "window": "1m"}`
	exampleKey         = `[{"header": "x-api-key"}]`
	exampleRule        = `{"name": "per-api-key", "key": ` + exampleKey + `, "limits": [` + exampleLimit + `]}`
	minimalExample     = `{"rules": [` + exampleRule + `]}`
)

// Field names known at each level, in the order they are documented.
var (
	documentFields = []string{"rules", "failure_mode", "client_ip", "exempt", "shadow", "response", "rate_limit_headers", "key_table", "escaped_slashes", "operator"}
	keyTableFields = []string{"max_keys", "when_full", "max_key_bytes"}
	whenFullNames  = []string{"reject", "overflow", "allow"}
	ruleFields     = []string{"name", "match", "key", "missing_key", "limits", "limits_by", "cost", "shadow", "global", "count", "refund", "on_limit", "usage"}
	keyPartFields  = []string{"header", "client_ip", "path", "method", "authority", "query", "attribute"}
	limitFields    = []string{"algorithm", "capacity", "refill_tokens", "refill_interval", "window", "calendar", "max_in_flight", "slot_timeout"}

	clientIPFields      = []string{"xff_num_trusted_hops", "ipv4_prefix", "ipv6_prefix"}
	clientIPPartFields  = []string{"ipv4_prefix", "ipv6_prefix"}
	authorityPartFields = []string{"strip_port"}
	exemptFields        = []string{"paths", "client_cidrs", "headers"}
	matchFields         = []string{"path", "methods", "hosts", "headers"}
	pathMatchFields     = []string{"exact", "prefix"}
	headerMatchFields   = []string{"name", "exact", "present"}
	missingKeyFields    = []string{"action", "status", "key"}
	costFields          = []string{"header", "max", "default"}
	responseFields      = []string{"status", "body", "content_type", "headers", "grpc_status"}
)

// Spellings of the enumerations, indexed by value.
var (
	failureModeNames = []string{FailureAllow: "allow", FailureDeny: "deny"}
)

// Explanations appended to problems, saying what a valid value looks like.
const (
	ruleNameRule = `a rule name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-' ` +
		`(it becomes part of a shared-memory key), e.g. "per-api-key"`
	headerRule = `a header name is 1 to 256 characters of letters, digits and !#$%&'*+-.^_` + "`" +
		`|~ (an RFC 9110 token), e.g. "x-api-key", or a request pseudo-header such as ":authority"`
	capacityRule       = "capacity is the burst size, a whole number from 1 to 1000000000"
	windowCapacityRule = "capacity is how many units each window admits, a whole number from 1 to 1000000000"
	anyCapacityRule    = "capacity is a whole number from 1 to 1000000000"
	refillTokensRule   = "refill_tokens is how many tokens are added every refill_interval, " +
		"a whole number from 1 to 1000000000"
	refillIntervalRule = `refill_interval is a duration from "1ms" to "366d" inclusive, ` +
		`written as a number and a unit (ms, s, m, h, d or w), e.g. "500ms", "1s", "1m", "24h" or "7d"`
	windowRule = `window is a duration from "1ms" to "366d" inclusive, ` +
		`written as a number and a unit (ms, s, m, h, d or w), e.g. "1s", "1h", "7d" or "30d"; ` +
		`for UTC calendar days, weeks or months use "calendar" instead`
	algorithmRule = `algorithm is "token_bucket" (the default; uses capacity, refill_tokens and refill_interval), ` +
		`"fixed_window" or "sliding_window" (both use capacity and window), or "concurrency" (uses max_in_flight and lease)`
	failureModeRule = `failure_mode is "allow" (let requests through when the limiter fails, the default) ` +
		`or "deny" (reject them)`
	keyPartShape = `a key part is an object with exactly one field: {"header": "<name>"}, {"client_ip": {}}, ` +
		`{"path": {}}, {"method": {}}, {"authority": {}}, {"query": "<parameter>"} or {"attribute": ["<segment>", ...]}`
	queryRule = `a query parameter name is 1 to 256 bytes without '&', '=', '#', '?', spaces or control characters, ` +
		`such as "tenant" for ?tenant=acme`
	attributeRule = `attribute is an Envoy attribute path, a list of 1 to 8 segments of 1 to 256 bytes without NUL, ` +
		`e.g. ["xds", "route_name"] or ["request", "useragent"]`
	missingKeyShape = `missing_key is an object such as {"action": "allow"}, {"action": "reject", "status": 401} ` +
		`or {"action": "fallback", "key": [{"client_ip": {}}]}`
	missingKeyActionRule = `action is "reject" (answer with status, the default), "allow" (let the request through ` +
		`unlimited by this rule) or "fallback" (use the fallback key instead)`
	missingKeyStatusRule = "status is the HTTP status sent to a request without the rule's key, " +
		"a whole number from 400 to 599 (default 401)"
	costRule = `cost is how many units a request takes from each limit: a whole number from 0 to 1000000000 ` +
		`(default 1), or an object such as {"header": "x-cost", "max": 100} to read it from a request header`
	costMaxRule = "max is the largest cost a request can declare (larger header values count as max), " +
		"a whole number from 1 to 1000000000"
	costDefaultRule = "default is the cost of a request without the header, a whole number from 1 to max (default 1): " +
		"with 0 every request that leaves the header out would be free"
	shadowRule     = "shadow is true (decide and count, but never reject) or false (the default)"
	ipv4PrefixRule = "ipv4_prefix is how many leading bits of an IPv4 client address a client_ip key keeps, " +
		"a whole number from 1 to 32 (default 32, the whole address)"
	ipv6PrefixRule = "ipv6_prefix is how many leading bits of an IPv6 client address a client_ip key keeps, " +
		"a whole number from 1 to 128 (default 128, the whole address; 64 groups a client's /64, the block one client usually owns)"
	escapedSlashesRule = `escaped_slashes is "allow" (the default: a path with %2F or %5C is matched under every reading, ` +
		`a limit applying if any reading matches it, an exemption only if every reading is exempt) or "reject" (answer such requests with 400)`
	trustedHopsRule = "xff_num_trusted_hops is how many trusted proxies in front of Envoy append to x-forwarded-for, " +
		"a whole number from 0 to 10 (0, the default, uses the connection's address only)"
)

func (v *validator) document(root *jsonValue) *Config {
	if root.kind != kindObject {
		v.add("", "got "+describe(root)+", want a JSON object: the configuration is an object such as "+minimalExample)
		return nil
	}
	v.checkFieldNames("", root, documentFields)
	cfg := &Config{
		FailureMode: FailureAllow,
		Response:    Response{Status: defaultResponseStatus, Body: defaultResponseBody, ContentType: defaultContentType},
		KeyTable:    KeyTable{MaxKeys: DefaultMaxKeys, WhenFull: WhenFullOverflow, MaxKeyBytes: DefaultMaxKeyBytes},
	}
	if rules := v.required(root, "", "rules", "["+exampleRule+"]"); rules != nil {
		cfg.Rules = v.rules("rules", rules)
	}
	if mode := root.member("failure_mode"); mode != nil {
		if index, ok := v.enum("failure_mode", mode, failureModeNames, "a failure mode", failureModeRule); ok {
			cfg.FailureMode = FailureMode(index)
		}
	}
	cfg.ClientIP = ClientIP{IPv4Prefix: DefaultIPv4Prefix, IPv6Prefix: DefaultIPv6Prefix}
	if clientIP := root.member("client_ip"); clientIP != nil {
		cfg.ClientIP = v.clientIPSettings("client_ip", clientIP)
	}
	if exempt := root.member("exempt"); exempt != nil {
		cfg.Exempt = v.exempt("exempt", exempt)
	}
	if shadow := root.member("shadow"); shadow != nil {
		cfg.Shadow = v.boolean("shadow", shadow, shadowRule+"; at the top level it applies to every rule")
	}
	for i, r := range cfg.Rules {
		if r.Global != nil {
			v.checkGlobalShadow(fieldPath(indexPath("rules", i), "global"), r.Shadow, cfg.Shadow)
		}
	}
	if response := root.member("response"); response != nil {
		v.response("response", response, &cfg.Response)
	}
	if style := root.member("rate_limit_headers"); style != nil {
		if index, ok := v.enum("rate_limit_headers", style, headerStyleNames[:], "a rate-limit header style", rateLimitHeadersRule); ok {
			cfg.RateLimitHeaders = HeaderStyle(index)
		}
	}
	if table := root.member("key_table"); table != nil {
		v.keyTable("key_table", table, &cfg.KeyTable)
	}
	if escaped := root.member("escaped_slashes"); escaped != nil {
		if index, ok := v.enum("escaped_slashes", escaped, escapedSlashesNames[:], "an escaped_slashes policy", escapedSlashesRule); ok {
			cfg.EscapedSlashes = EscapedSlashes(index)
		}
	}
	if operator := root.member("operator"); operator != nil {
		cfg.Operator = v.operator("operator", operator)
	}
	return cfg
}

// Rules of the key table's fields.
const (
	keyTableShape = `key_table is an object with any of "max_keys", "when_full" and "max_key_bytes", ` +
		`e.g. {"max_keys": 100000, "when_full": "reject"}`
	maxKeysRule = "max_keys is the number of buckets kept in shared memory (about 100 bytes each), " +
		"a whole number from 16 to 10000000 (default 100000)"
	whenFullRule = `when_full is "overflow" (charge one bucket per rule and limit shared by the keys that find no free slot, the default), ` +
		`"reject" (answer like an over-limit request until a slot frees up) or "allow" (let the request through uncounted)`
	whenFullShareRemoved = `"share" was removed (it charged another key's bucket): use "overflow", the default, ` +
		`which gives the keys that find no free slot a bucket of their own`
	maxKeyBytesRule = "max_key_bytes is the longest partition key kept as it is, in bytes (its values added up); " +
		"a longer key is limited by a keyed hash of it, " +
		"a whole number from 16 to 65536 (default 1024)"
)

func (v *validator) keyTable(path string, value *jsonValue, t *KeyTable) {
	if !v.wantKind(path, value, kindObject, keyTableShape) {
		return
	}
	v.checkFieldNames(path, value, keyTableFields)
	if n := value.member("max_keys"); n != nil {
		if count, ok := v.wholeNumber(fieldPath(path, "max_keys"), n, 16, 10_000_000, maxKeysRule); ok {
			t.MaxKeys = int(count)
		}
	}
	if policy := value.member("when_full"); policy != nil {
		if policy.kind == kindString && policy.text == "share" {
			v.add(fieldPath(path, "when_full"), whenFullShareRemoved)
		} else if index, ok := v.enum(fieldPath(path, "when_full"), policy, whenFullNames, "a when_full policy", whenFullRule); ok {
			t.WhenFull = WhenFull(index)
		}
	}
	if n := value.member("max_key_bytes"); n != nil {
		if count, ok := v.wholeNumber(fieldPath(path, "max_key_bytes"), n, 16, 65536, maxKeyBytesRule); ok {
			t.MaxKeyBytes = int(count)
		}
	}
}

func (v *validator) clientIPSettings(path string, value *jsonValue) ClientIP {
	settings := ClientIP{IPv4Prefix: DefaultIPv4Prefix, IPv6Prefix: DefaultIPv6Prefix}
	if !v.wantKind(path, value, kindObject, `client_ip is an object such as {"xff_num_trusted_hops": 1} or {"ipv6_prefix": 64}`) {
		return settings
	}
	v.checkFieldNames(path, value, clientIPFields)
	if hops := value.member("xff_num_trusted_hops"); hops != nil {
		count, _ := v.wholeNumber(fieldPath(path, "xff_num_trusted_hops"), hops, 0, maxTrustedHops, trustedHopsRule)
		settings.XFFNumTrustedHops = int(count)
	}
	v.addressPrefixes(path, value, &settings.IPv4Prefix, &settings.IPv6Prefix)
	return settings
}
