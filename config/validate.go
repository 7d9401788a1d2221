package config

import (
	"math/bits"
	"strconv"
	"strings"
	"time"
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
	minDuration       = time.Millisecond
	maxDuration       = 24 * time.Hour
	// maxTokenArithmetic bounds capacity × (refill interval in ns / gcd)
	// so that the limiter's fixed-point token arithmetic cannot overflow int64.
	maxTokenArithmetic = 1 << 62

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
	documentFields = []string{"rules", "failure_mode", "client_ip", "exempt", "shadow", "response", "rate_limit_headers", "key_table"}
	keyTableFields = []string{"max_keys", "when_full", "max_key_bytes"}
	whenFullNames  = []string{"reject", "share", "allow"}
	ruleFields     = []string{"name", "match", "key", "missing_key", "limits", "cost", "shadow", "global"}
	keyPartFields  = []string{"header", "client_ip", "path", "method", "authority", "query", "attribute"}
	limitFields    = []string{"algorithm", "capacity", "refill_tokens", "refill_interval", "window"}

	clientIPFields    = []string{"xff_num_trusted_hops"}
	exemptFields      = []string{"paths", "client_cidrs", "headers"}
	matchFields       = []string{"path", "methods", "hosts", "headers"}
	pathMatchFields   = []string{"exact", "prefix"}
	headerMatchFields = []string{"name", "exact", "present"}
	missingKeyFields  = []string{"action", "status", "key"}
	costFields        = []string{"header", "max", "default"}
	responseFields    = []string{"status", "body", "content_type", "headers"}
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
	refillIntervalRule = `refill_interval is a duration from "1ms" to "24h" inclusive, ` +
		`written as a number and a unit (ms, s, m or h), e.g. "500ms", "1s", "1m" or "24h"`
	windowRule = `window is a duration from "1ms" to "24h" inclusive, ` +
		`written as a number and a unit (ms, s, m or h), e.g. "1s", "1m" or "1h"`
	algorithmRule = `algorithm is "token_bucket" (the default; uses capacity, refill_tokens and refill_interval), ` +
		`"fixed_window" or "sliding_window" (both use capacity and window)`
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
	costDefaultRule = "default is the cost of a request without the header, a whole number from 0 to max (default 1)"
	shadowRule      = "shadow is true (decide and count, but never reject) or false (the default)"
	trustedHopsRule = "xff_num_trusted_hops is how many trusted proxies in front of Envoy append to x-forwarded-for, " +
		"a whole number from 0 to 10 (0, the default, uses the connection's address only)"
)

// requestPseudoHeaders are the HTTP/2 pseudo-headers a request carries.
// Only these are accepted so that a typo such as ":authorty" is reported
// instead of silently keying every request on an empty value.
var requestPseudoHeaders = []string{":authority", ":method", ":path", ":scheme", ":protocol"}

// maxProblems bounds how many problems are listed, so that a document with
// thousands of mistakes (or a generated one gone wrong) produces a readable
// error and a bounded log line rather than megabytes.
const maxProblems = 100

// validator walks a decoded document, building the Config and collecting
// every problem rather than stopping at the first.
type validator struct {
	problems []Problem
	unlisted int // problems found beyond maxProblems
}

func (v *validator) add(field, message string) {
	if len(v.problems) >= maxProblems {
		v.unlisted++
		return
	}
	v.problems = append(v.problems, Problem{Field: field, Message: message})
}

// count is how many problems have been found so far, listed or not; callers
// compare counts to learn whether a part of the document was valid.
func (v *validator) count() int {
	return len(v.problems) + v.unlisted
}

// result returns the problems found, ending with a note of how many were
// not listed, if any.
func (v *validator) result() []Problem {
	if v.unlisted == 0 {
		return v.problems
	}
	return append(v.problems, Problem{Message: "and " + strconv.Itoa(v.unlisted) +
		" more problems not listed: fix the ones above and check again"})
}

func (v *validator) document(root *jsonValue) *Config {
	if root.kind != kindObject {
		v.add("", "got "+describe(root)+", want a JSON object: the configuration is an object such as "+minimalExample)
		return nil
	}
	v.checkFieldNames("", root, documentFields)
	cfg := &Config{
		FailureMode: FailureAllow,
		Response:    Response{Status: defaultResponseStatus, Body: defaultResponseBody, ContentType: defaultContentType},
		KeyTable:    KeyTable{MaxKeys: DefaultMaxKeys, WhenFull: WhenFullShare, MaxKeyBytes: DefaultMaxKeyBytes},
	}
	if rules := v.required(root, "", "rules", "["+exampleRule+"]"); rules != nil {
		cfg.Rules = v.rules("rules", rules)
	}
	if mode := root.member("failure_mode"); mode != nil {
		if index, ok := v.enum("failure_mode", mode, failureModeNames, "a failure mode", failureModeRule); ok {
			cfg.FailureMode = FailureMode(index)
		}
	}
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
	return cfg
}

// Rules of the key table's fields.
const (
	keyTableShape = `key_table is an object with any of "max_keys", "when_full" and "max_key_bytes", ` +
		`e.g. {"max_keys": 100000, "when_full": "reject"}`
	maxKeysRule = "max_keys is the number of buckets kept in shared memory (about 100 bytes each), " +
		"a whole number from 16 to 10000000 (default 100000)"
	whenFullRule = `when_full is "share" (charge the bucket that holds the slot, the default), ` +
		`"reject" (answer like an over-limit request until the slot frees up) or "allow" (let the request through uncounted)`
	maxKeyBytesRule = "max_key_bytes is the longest partition key kept, in bytes; a longer key counts as missing, " +
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
		if index, ok := v.enum(fieldPath(path, "when_full"), policy, whenFullNames, "a when_full policy", whenFullRule); ok {
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
	var settings ClientIP
	if !v.wantKind(path, value, kindObject, `client_ip is an object such as {"xff_num_trusted_hops": 1}`) {
		return settings
	}
	v.checkFieldNames(path, value, clientIPFields)
	if hops := value.member("xff_num_trusted_hops"); hops != nil {
		count, _ := v.wholeNumber(fieldPath(path, "xff_num_trusted_hops"), hops, 0, maxTrustedHops, trustedHopsRule)
		settings.XFFNumTrustedHops = int(count)
	}
	return settings
}

func (v *validator) rules(path string, value *jsonValue) []Rule {
	if !v.wantKind(path, value, kindArray, "rules is a list of rule objects such as ["+exampleRule+"]") {
		return nil
	}
	v.checkCount(path, len(value.items), maxRules, "rules", "add a rule such as "+exampleRule)
	rules := make([]Rule, 0, len(value.items))
	ruleIndexByName := make(map[string]int)
	for i, item := range value.items {
		rules = append(rules, v.rule(indexPath(path, i), item, i, ruleIndexByName))
	}
	return rules
}

func (v *validator) rule(path string, value *jsonValue, index int, ruleIndexByName map[string]int) Rule {
	rule := Rule{
		MissingKey: MissingKey{Action: MissingKeyReject, Status: defaultMissingKeyStatus},
		Cost:       Cost{Units: defaultCostUnits},
	}
	if !v.wantKind(path, value, kindObject, `a rule is an object with "name", "key" and "limits", e.g. `+exampleRule) {
		return rule
	}
	v.checkFieldNames(path, value, ruleFields)
	if name := v.required(value, path, "name", `"per-api-key"`); name != nil {
		rule.Name = v.ruleName(fieldPath(path, "name"), name, index, ruleIndexByName)
	}
	if match := value.member("match"); match != nil {
		rule.Match = v.match(fieldPath(path, "match"), match)
	}
	before := v.count()
	if key := v.required(value, path, "key", exampleKey); key != nil {
		rule.Key = v.key(fieldPath(path, "key"), key)
	}
	keyOK := v.count() == before
	if missingKey := value.member("missing_key"); missingKey != nil {
		var ruleKey []KeyPart
		if keyOK {
			ruleKey = rule.Key
		}
		rule.MissingKey = v.missingKey(fieldPath(path, "missing_key"), missingKey, ruleKey)
	}
	if limits := v.required(value, path, "limits", "["+exampleLimit+"]"); limits != nil {
		rule.Limits = v.limits(fieldPath(path, "limits"), limits)
	}
	if costValue := value.member("cost"); costValue != nil {
		costPath := fieldPath(path, "cost")
		cost, ok := v.cost(costPath, costValue)
		rule.Cost = cost
		if ok {
			v.checkCostFits(costPath, cost, costValue.kind == kindObject, fieldPath(path, "limits"), rule.Limits)
		}
	}
	if shadow := value.member("shadow"); shadow != nil {
		rule.Shadow = v.boolean(fieldPath(path, "shadow"), shadow, shadowRule)
	}
	if global := value.member("global"); global != nil {
		rule.Global = v.global(fieldPath(path, "global"), global)
	}
	return rule
}

func (v *validator) ruleName(path string, value *jsonValue, index int, ruleIndexByName map[string]int) string {
	if !v.wantKind(path, value, kindString, ruleNameRule) {
		return ""
	}
	name := value.text
	switch {
	case name == "":
		v.add(path, `"" is not allowed: `+ruleNameRule)
		return ""
	case len(name) > maxRuleNameLength:
		v.add(path, quoteClipped(name)+" is "+strconv.Itoa(len(name))+" bytes long: "+ruleNameRule)
		return ""
	}
	for _, r := range name {
		if !isRuleNameChar(r) {
			v.add(path, strconv.Quote(name)+" contains "+strconv.QuoteRune(r)+", which is not allowed: "+ruleNameRule)
			return ""
		}
	}
	if first, used := ruleIndexByName[name]; used {
		v.add(path, strconv.Quote(name)+" is already used by "+indexPath("rules", first)+": rule names must be unique")
		return name
	}
	ruleIndexByName[name] = index
	return name
}

func isRuleNameChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-'
}

func (v *validator) key(path string, value *jsonValue) []KeyPart {
	if !v.wantKind(path, value, kindArray, "key is a list of 1 to 8 parts such as "+exampleKey+` or [{"client_ip": {}}]`) {
		return nil
	}
	v.checkCount(path, len(value.items), maxKeyParts, "parts", `add a part such as {"header": "x-api-key"} or {"client_ip": {}}`)
	parts := make([]KeyPart, 0, len(value.items))
	for i, item := range value.items {
		part := v.keyPart(indexPath(path, i), item)
		for j, earlier := range parts {
			if part.Kind != 0 && sameKeyPart(part, earlier) {
				v.add(indexPath(path, i), "repeats "+indexPath(path, j)+": a part given twice adds nothing to the key, remove one")
				break
			}
		}
		parts = append(parts, part)
	}
	return parts
}

func (v *validator) keyPart(path string, value *jsonValue) KeyPart {
	if !v.wantKind(path, value, kindObject, keyPartShape) {
		return KeyPart{}
	}
	v.checkFieldNames(path, value, keyPartFields)
	var given []string // known fields, in document order
	for _, member := range value.members {
		if containsString(keyPartFields, member.name) {
			given = append(given, member.name)
		}
	}
	switch {
	case len(given) > 1:
		examples := make([]string, len(given))
		for i, name := range given {
			examples[i] = keyPartExample(name)
		}
		v.add(path, "has "+quotedList(given)+": a key part takes exactly one, so split them into "+
			countWord(len(given))+" parts, e.g. ["+strings.Join(examples, ", ")+"]")
		// Validate each anyway so that their own problems are reported now.
		for _, name := range given {
			v.keyPartField(path, name, value.member(name))
		}
		return KeyPart{}
	case len(given) == 1:
		return v.keyPartField(path, given[0], value.member(given[0]))
	case len(value.members) == 0:
		v.add(path, "the key part is empty: "+keyPartShape)
	}
	// Otherwise only unknown fields were given; checkFieldNames has said so.
	return KeyPart{}
}

// keyPartField reads the one field of a key part.
func (v *validator) keyPartField(partPath, name string, value *jsonValue) KeyPart {
	path := fieldPath(partPath, name)
	switch name {
	case "header":
		return KeyPart{Kind: KeyHeader, Header: v.headerName(path, value)}
	case "client_ip":
		v.noOptions(path, value, name, `; to trust x-forwarded-for, set the top-level "client_ip": {"xff_num_trusted_hops": 1}`)
		return KeyPart{Kind: KeyClientIP}
	case "path":
		v.noOptions(path, value, name, `; to select requests by path, use the rule's "match": {"path": {"prefix": "/api/"}}`)
		return KeyPart{Kind: KeyPath}
	case "method":
		v.noOptions(path, value, name, `; to select requests by method, use the rule's "match": {"methods": ["POST"]}`)
		return KeyPart{Kind: KeyMethod}
	case "authority":
		v.noOptions(path, value, name, `; to select requests by host, use the rule's "match": {"hosts": ["api.example.com"]}`)
		return KeyPart{Kind: KeyAuthority}
	case "query":
		return KeyPart{Kind: KeyQuery, Query: v.queryName(path, value)}
	default: // "attribute"
		return KeyPart{Kind: KeyAttribute, Attribute: v.attribute(path, value)}
	}
}

// keyPartExample is a valid key part with the given field, for messages.
func keyPartExample(name string) string {
	switch name {
	case "header":
		return `{"header": "x-api-key"}`
	case "query":
		return `{"query": "tenant"}`
	case "attribute":
		return `{"attribute": ["xds", "route_name"]}`
	}
	return `{"` + name + `": {}}`
}

func (v *validator) headerName(path string, value *jsonValue) string {
	if !v.wantKind(path, value, kindString, headerRule) {
		return ""
	}
	name := value.text
	switch {
	case name == "":
		v.add(path, `"" is not allowed: `+headerRule)
		return ""
	case len(name) > maxHeaderLength:
		v.add(path, quoteClipped(name)+" is "+strconv.Itoa(len(name))+" bytes long: "+headerRule)
		return ""
	}
	// Envoy presents header names lower-cased, as HTTP/2 requires, so the
	// configured name is compared in that form.
	lower := strings.ToLower(name)
	if lower[0] == ':' {
		for _, pseudo := range requestPseudoHeaders {
			if lower == pseudo {
				return lower
			}
		}
		v.add(path, quoteClipped(name)+" is not a request pseudo-header: use one of "+
			strings.Join(requestPseudoHeaders, ", ")+", or a regular header name")
		return ""
	}
	if r, ok := firstNonToken(name); !ok {
		v.add(path, quoteClipped(name)+" contains "+strconv.QuoteRune(r)+", which is not allowed: "+headerRule)
		return ""
	}
	return lower
}

// isTokenChar reports whether r is an RFC 9110 tchar.
func isTokenChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' ||
		strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// firstNonToken returns the first rune of s that is not an RFC 9110 tchar,
// and false, or true if s is made of tchars only.
func firstNonToken(s string) (rune, bool) {
	for _, r := range s {
		if !isTokenChar(r) {
			return r, false
		}
	}
	return 0, true
}

// noOptions checks the value of a key part that takes no options yet, such
// as "client_ip": {}. It is an object so that options can be added later
// without breaking configurations. hint follows the fix in messages.
func (v *validator) noOptions(path string, value *jsonValue, name, hint string) {
	fix := name + ` takes no options yet, write "` + name + `": {}`
	if !v.wantKind(path, value, kindObject, fix+hint) {
		return
	}
	// Every member is unknown.
	for _, member := range value.members {
		message := "unknown field " + quoteClipped(member.name) + ": " + name + ` takes no fields yet, write "` + name + `": {}`
		if name == "client_ip" && member.name == "xff_num_trusted_hops" {
			message += `; xff_num_trusted_hops belongs in the top-level "client_ip": {"xff_num_trusted_hops": 1}`
		}
		v.add(path, message)
	}
}

func (v *validator) queryName(path string, value *jsonValue) string {
	if !v.wantKind(path, value, kindString, queryRule) {
		return ""
	}
	name := value.text
	switch {
	case name == "":
		v.add(path, `"" is not allowed: `+queryRule)
		return ""
	case len(name) > maxQueryLength:
		v.add(path, quoteClipped(name)+" is "+strconv.Itoa(len(name))+" bytes long: "+queryRule)
		return ""
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("&=#?", r) {
			v.add(path, quoteClipped(name)+" contains "+strconv.QuoteRune(r)+", which is not allowed: "+queryRule)
			return ""
		}
	}
	return name
}

func (v *validator) attribute(path string, value *jsonValue) []string {
	if value.kind == kindString && strings.Contains(value.text, ".") && len(value.text) <= maxQuotedLength {
		// A dotted attribute name as Envoy's documentation writes it.
		segments := strings.Split(value.text, ".")
		for i, segment := range segments {
			segments[i] = strconv.Quote(segment)
		}
		v.add(path, "got "+describe(value)+", want an array: attribute is a list of path segments, "+
			"so write ["+strings.Join(segments, ", ")+"]")
		return nil
	}
	if !v.wantKind(path, value, kindArray, attributeRule) {
		return nil
	}
	v.checkCount(path, len(value.items), maxAttributeSegments, "segments", `add a segment: `+attributeRule)
	segments := make([]string, 0, len(value.items))
	for i, item := range value.items {
		itemPath := indexPath(path, i)
		if !v.wantKind(itemPath, item, kindString, attributeRule) {
			continue
		}
		segment := item.text
		switch {
		case segment == "":
			v.add(itemPath, `"" is not allowed: every segment names one step of the path: `+attributeRule)
		case len(segment) > maxAttributeSegmentLength:
			v.add(itemPath, quoteClipped(segment)+" is "+strconv.Itoa(len(segment))+" bytes long: "+attributeRule)
		case strings.IndexByte(segment, 0) >= 0:
			v.add(itemPath, quoteClipped(segment)+` contains '\x00', which separates the segments when the path `+
				"is passed to Envoy: "+attributeRule)
		default:
			segments = append(segments, segment)
		}
	}
	return segments
}

// missingKey reads a rule's missing_key. ruleKey is the rule's key if it is
// valid, else nil.
func (v *validator) missingKey(path string, value *jsonValue, ruleKey []KeyPart) MissingKey {
	missing := MissingKey{Action: MissingKeyReject, Status: defaultMissingKeyStatus}
	if !v.wantKind(path, value, kindObject, missingKeyShape) {
		return missing
	}
	v.checkFieldNames(path, value, missingKeyFields)
	action := value.member("action")
	actionOK := true
	if action != nil {
		var index int
		index, actionOK = v.enum(fieldPath(path, "action"), action, missingKeyActionNames[:], "a missing-key action", missingKeyActionRule)
		missing.Action = MissingKeyAction(index)
	}
	if status := value.member("status"); status != nil {
		statusPath := fieldPath(path, "status")
		if actionOK && missing.Action == MissingKeyAllow {
			v.add(statusPath, `status is not used with "action": "allow", which lets the request through: `+
				`remove status, or use "action": "reject" or "fallback"`)
		} else if code, ok := v.wholeNumber(statusPath, status, minStatus, maxStatus, missingKeyStatusRule); ok {
			missing.Status = int(code)
		}
	}
	keyPath := fieldPath(path, "key")
	key := value.member("key")
	switch {
	case !actionOK:
		// Whether key belongs depends on the action; check only its shape.
		if key != nil {
			v.key(keyPath, key)
		}
	case missing.Action == MissingKeyFallback && key == nil:
		v.add(keyPath, `required field is missing with "action": "fallback": add "key": [{"client_ip": {}}], `+
			"the key used for requests without the rule's key")
	case missing.Action == MissingKeyFallback:
		before := v.count()
		missing.Fallback = v.key(keyPath, key)
		if v.count() == before && ruleKey != nil && containsKey(missing.Fallback, ruleKey) {
			v.add(keyPath, "the fallback key includes every part of the rule's key, so it is missing whenever "+
				`the rule's key is: use a fallback key that leaves out a part of the rule's key, e.g. [{"client_ip": {}}], `+
				`or "action": "reject"`)
		}
	case key != nil:
		message := `key is used only with "action": "fallback"`
		if action == nil {
			message += ` (the default action is "reject")`
		}
		v.add(keyPath, message+`: remove it, or add "action": "fallback" so that requests without the rule's key are limited on this key instead`)
		// Report its own problems too, so that they are not discovered one at a time.
		v.key(keyPath, key)
	}
	return missing
}

// containsKey reports whether every part of inner is also a part of outer.
func containsKey(outer, inner []KeyPart) bool {
	for _, part := range inner {
		found := false
		for _, candidate := range outer {
			if sameKeyPart(part, candidate) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func sameKeyPart(a, b KeyPart) bool {
	if a.Kind != b.Kind || a.Header != b.Header || a.Query != b.Query || len(a.Attribute) != len(b.Attribute) {
		return false
	}
	for i := range a.Attribute {
		if a.Attribute[i] != b.Attribute[i] {
			return false
		}
	}
	return true
}

// cost reads a rule's cost. ok says whether the value compared with the
// limits' capacities, the fixed cost or max, is valid.
func (v *validator) cost(path string, value *jsonValue) (cost Cost, ok bool) {
	cost.Units = defaultCostUnits
	switch value.kind {
	case kindNumber:
		cost.Units, ok = v.wholeNumber(path, value, 0, maxCost, costRule)
		return cost, ok
	case kindObject:
	default:
		v.add(path, "got "+describe(value)+", want a number or an object: "+costRule)
		return cost, false
	}
	v.checkFieldNames(path, value, costFields)
	if header := v.required(value, path, "header", `"x-cost"`); header != nil {
		cost.Header = v.headerName(fieldPath(path, "header"), header)
	}
	if maximum := v.required(value, path, "max", "100"); maximum != nil {
		cost.Max, ok = v.wholeNumber(fieldPath(path, "max"), maximum, 1, maxCost, costMaxRule)
	}
	if units := value.member("default"); units != nil {
		defaultPath := fieldPath(path, "default")
		if n, unitsOK := v.wholeNumber(defaultPath, units, 0, maxCost, costDefaultRule); unitsOK {
			cost.Units = n
			if ok && n > cost.Max {
				v.add(defaultPath, strconv.FormatInt(n, 10)+" is above max "+strconv.FormatInt(cost.Max, 10)+
					": "+costDefaultRule)
			}
		}
	}
	return cost, ok
}

// checkCostFits reports a cost that exceeds the capacity of one of the
// rule's limits: no request could ever be admitted. fromHeader says cost
// was given as an object, so that its max is what must fit.
func (v *validator) checkCostFits(path string, cost Cost, fromHeader bool, limitsPath string, limits []Limit) {
	smallest := -1
	for i, limit := range limits {
		// A capacity of 0 is a limit whose capacity was invalid, already reported.
		if limit.Capacity > 0 && (smallest < 0 || limit.Capacity < limits[smallest].Capacity) {
			smallest = i
		}
	}
	if smallest < 0 {
		return
	}
	capacity := limits[smallest].Capacity
	limitName := indexPath(limitsPath, smallest)
	if !fromHeader && cost.Units > capacity {
		v.add(path, strconv.FormatInt(cost.Units, 10)+" is above the capacity "+strconv.FormatInt(capacity, 10)+
			" of "+limitName+", so no request could ever be admitted: use a cost of at most "+
			strconv.FormatInt(capacity, 10)+" or raise that limit's capacity")
	}
	if fromHeader && cost.Max > capacity {
		v.add(path, "max "+strconv.FormatInt(cost.Max, 10)+" is above the capacity "+strconv.FormatInt(capacity, 10)+
			" of "+limitName+", so a request declaring that cost could never be admitted: use a max of at most "+
			strconv.FormatInt(capacity, 10)+" or raise that limit's capacity")
	}
}

func (v *validator) limits(path string, value *jsonValue) []Limit {
	if !v.wantKind(path, value, kindArray, "limits is a list of 1 to 8 limit objects such as ["+exampleLimit+"] or ["+exampleWindowLimit+"]") {
		return nil
	}
	v.checkCount(path, len(value.items), maxLimitsPerRule, "limits", "add a limit such as "+exampleLimit)
	limits := make([]Limit, 0, len(value.items))
	for i, item := range value.items {
		limits = append(limits, v.limit(indexPath(path, i), item))
	}
	return limits
}

func (v *validator) limit(path string, value *jsonValue) Limit {
	var limit Limit
	if !v.wantKind(path, value, kindObject, "a limit is an object such as "+exampleLimit+" or "+exampleWindowLimit) {
		return limit
	}
	v.checkFieldNames(path, value, limitFields)
	algorithm := value.member("algorithm")
	if algorithm != nil {
		index, ok := v.enum(fieldPath(path, "algorithm"), algorithm, algorithmNames[:], "an algorithm", algorithmRule)
		if !ok {
			// Which other fields belong depends on the algorithm; only
			// capacity is common to all.
			if capacity := v.required(value, path, "capacity", "10"); capacity != nil {
				v.tokenCount(fieldPath(path, "capacity"), capacity, anyCapacityRule)
			}
			return limit
		}
		limit.Algorithm = Algorithm(index)
	}
	if limit.Algorithm == TokenBucket {
		v.tokenBucket(path, value, &limit, algorithm == nil)
	} else {
		v.window(path, value, &limit)
	}
	return limit
}

// tokenBucket reads the fields of a token bucket limit. defaulted says the
// algorithm was not given.
func (v *validator) tokenBucket(path string, value *jsonValue, limit *Limit, defaulted bool) {
	window := value.member("window")
	// A limit with a window and neither refill field was meant to be a
	// window limit: say only that the algorithm is missing.
	meantWindow := defaulted && window != nil && value.member("refill_tokens") == nil && value.member("refill_interval") == nil
	capacityOK, refillTokensOK, refillIntervalOK := false, false, false
	if capacity := v.required(value, path, "capacity", "10"); capacity != nil {
		limit.Capacity, capacityOK = v.tokenCount(fieldPath(path, "capacity"), capacity, capacityRule)
	}
	var refillInterval *jsonValue
	if !meantWindow {
		if refillTokens := v.required(value, path, "refill_tokens", "1"); refillTokens != nil {
			limit.RefillTokens, refillTokensOK = v.tokenCount(fieldPath(path, "refill_tokens"), refillTokens, refillTokensRule)
		}
		refillInterval = v.required(value, path, "refill_interval", `"1s"`)
		if refillInterval != nil {
			limit.RefillInterval, refillIntervalOK = v.duration(fieldPath(path, "refill_interval"), refillInterval, refillIntervalRule)
		}
	}
	if window != nil {
		message := `window belongs to the window algorithms, "fixed_window" and "sliding_window", but this limit is a token bucket`
		if defaulted {
			message += ` (the default algorithm)`
		}
		if meantWindow {
			message += `: add "algorithm": "fixed_window" or "sliding_window"`
		} else {
			message += `: remove window, or set "algorithm": "fixed_window" or "sliding_window" and remove refill_tokens and refill_interval`
		}
		v.add(fieldPath(path, "window"), message)
	}
	if capacityOK && refillTokensOK && refillIntervalOK && overflowsTokenArithmetic(*limit) {
		v.add(path, "capacity "+strconv.FormatInt(limit.Capacity, 10)+
			" with refill_tokens "+strconv.FormatInt(limit.RefillTokens, 10)+
			" every "+strconv.Quote(refillInterval.text)+" would overflow the token arithmetic "+
			"(capacity * refill_interval_ns / gcd(refill_interval_ns, refill_tokens) is above 2^62): "+
			"use a shorter refill_interval or a smaller capacity")
	}
}

// window reads the fields of a fixed or sliding window limit.
func (v *validator) window(path string, value *jsonValue, limit *Limit) {
	if capacity := v.required(value, path, "capacity", "100"); capacity != nil {
		limit.Capacity, _ = v.tokenCount(fieldPath(path, "capacity"), capacity, windowCapacityRule)
	}
	for _, name := range []string{"refill_tokens", "refill_interval"} {
		if value.member(name) != nil {
			v.add(fieldPath(path, name), name+` belongs to the "token_bucket" algorithm, but this limit is a `+
				strconv.Quote(limit.Algorithm.String())+`, which admits capacity units per window: remove it, `+
				`or remove "algorithm" to use a token bucket`)
		}
	}
	if window := v.required(value, path, "window", `"1m"`); window != nil {
		limit.Window, _ = v.duration(fieldPath(path, "window"), window, windowRule)
	}
}

// overflowsTokenArithmetic reports whether the limiter's exact token
// arithmetic for this limit, which scales the capacity by the refill period
// reduced by its common factor with refill_tokens, would exceed 2^62.
func overflowsTokenArithmetic(limit Limit) bool {
	intervalNanos := uint64(limit.RefillInterval)
	period := intervalNanos / gcd(intervalNanos, uint64(limit.RefillTokens))
	high, low := bits.Mul64(uint64(limit.Capacity), period)
	return high != 0 || low > maxTokenArithmetic
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// tokenCount reads a whole number of tokens from 1 to maxTokens.
func (v *validator) tokenCount(path string, value *jsonValue, rule string) (int64, bool) {
	return v.wholeNumber(path, value, 1, maxTokens, rule)
}

// wholeNumber reads a whole number from lowest to highest.
func (v *validator) wholeNumber(path string, value *jsonValue, lowest, highest int64, rule string) (int64, bool) {
	if !v.wantKind(path, value, kindNumber, rule+", written without quotes") {
		return 0, false
	}
	count, verdict := parseWholeNumber(value.text, lowest, highest)
	switch verdict {
	case wholeNumberOK:
		return count, true
	case wholeNumberFraction:
		v.add(path, clip(value.text)+" is not a whole number: "+rule)
	case wholeNumberTooSmall:
		v.add(path, clip(value.text)+" is not allowed: "+rule)
	case wholeNumberTooLarge:
		v.add(path, clip(value.text)+" is too large: "+rule)
	}
	return 0, false
}

// duration reads a duration from minDuration to maxDuration.
func (v *validator) duration(path string, value *jsonValue, rule string) (time.Duration, bool) {
	if value.kind == kindNumber {
		// Most likely seconds or milliseconds were meant; only a unit says which.
		v.add(path, "got "+describe(value)+`, want a string: quote the duration and give it a unit, e.g. "1s" or "500ms"`)
		return 0, false
	}
	if !v.wantKind(path, value, kindString, rule) {
		return 0, false
	}
	duration, err := time.ParseDuration(value.text)
	switch {
	case err != nil:
		v.add(path, quoteClipped(value.text)+" is not a valid duration: "+rule)
	case duration < minDuration:
		v.add(path, quoteClipped(value.text)+" is shorter than 1ms: "+rule)
	case duration > maxDuration:
		v.add(path, quoteClipped(value.text)+" is longer than 24h: "+rule)
	default:
		return duration, true
	}
	return 0, false
}

// enum reads a string that must be one of names, returning its index.
// noun names what the value should have been, e.g. "a failure mode".
func (v *validator) enum(path string, value *jsonValue, names []string, noun, rule string) (int, bool) {
	if !v.wantKind(path, value, kindString, rule) {
		return 0, false
	}
	for i, name := range names {
		if value.text == name {
			return i, true
		}
	}
	message := quoteClipped(value.text) + " is not " + noun + ": " + rule
	if suggestion := closestName(value.text, names); suggestion != "" {
		message += " (did you mean " + strconv.Quote(suggestion) + "?)"
	}
	v.add(path, message)
	return 0, false
}

func (v *validator) boolean(path string, value *jsonValue, rule string) bool {
	if !v.wantKind(path, value, kindBool, rule) {
		return false
	}
	return value.boolean
}

// required returns the named member of object, reporting it if absent.
func (v *validator) required(object *jsonValue, path, name, example string) *jsonValue {
	value := object.member(name)
	if value == nil {
		v.add(fieldPath(path, name), "required field is missing: add "+strconv.Quote(name)+": "+example)
	}
	return value
}

// wantKind reports a value of the wrong JSON type, null included.
func (v *validator) wantKind(path string, value *jsonValue, kind jsonKind, fix string) bool {
	if value.kind == kind {
		return true
	}
	v.add(path, "got "+describe(value)+", want "+kindName(kind)+": "+fix)
	return false
}

// checkCount reports an empty list or one with more than max entries.
func (v *validator) checkCount(path string, count, maximum int, noun, addFix string) {
	switch {
	case count == 0:
		v.add(path, "an empty list is not allowed: "+addFix)
	case count > maximum:
		v.add(path, strconv.Itoa(count)+" "+noun+" are too many: at most "+strconv.Itoa(maximum)+" are allowed")
	}
}

// checkFieldNames reports repeated and unknown members of object. Both are
// rejected rather than ignored: a misspelt or repeated field almost always
// means the configuration does not say what its author thinks it says.
func (v *validator) checkFieldNames(path string, object *jsonValue, known []string) {
	for _, name := range object.repeated {
		v.add(fieldPath(path, name), "the field is given more than once in the same object: keep exactly one "+
			"(JSON parsers disagree about which copy wins)")
	}
	for _, member := range object.members {
		if containsString(known, member.name) {
			continue
		}
		message := "unknown field " + quoteClipped(member.name) + ": known fields are " + strings.Join(known, ", ")
		if suggestion := closestName(member.name, known); suggestion != "" {
			message += " (did you mean " + strconv.Quote(suggestion) + "?)"
		}
		v.add(path, message)
	}
}

// closestName returns the known name within two edits of name, if any,
// to catch typos such as "capcity" and camelCase such as "refillTokens".
func closestName(name string, known []string) string {
	if len(name) > 64 {
		return ""
	}
	best, bestDistance := "", 3
	for _, candidate := range known {
		if d := editDistance(strings.ToLower(name), candidate); d < bestDistance {
			best, bestDistance = candidate, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance over bytes:
// insertions, deletions, substitutions and adjacent transpositions.
func editDistance(a, b string) int {
	previous2 := make([]int, len(b)+1)
	previous := make([]int, len(b)+1)
	current := make([]int, len(b)+1)
	for j := range previous {
		previous[j] = j
	}
	for i := 1; i <= len(a); i++ {
		current[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			current[j] = min(previous[j]+1, current[j-1]+1, previous[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				current[j] = min(current[j], previous2[j-2]+1)
			}
		}
		previous2, previous, current = previous, current, previous2
	}
	return previous[len(b)]
}

func containsString(list []string, s string) bool {
	for _, item := range list {
		if item == s {
			return true
		}
	}
	return false
}

func fieldPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func indexPath(path string, index int) string {
	return path + "[" + strconv.Itoa(index) + "]"
}

// describe names a value's type together with the value itself, for
// "got ..., want ..." messages.
func describe(value *jsonValue) string {
	switch value.kind {
	case kindNull:
		return "null"
	case kindBool:
		return strconv.FormatBool(value.boolean)
	case kindNumber:
		return "the number " + clip(value.text)
	case kindString:
		return "the string " + quoteClipped(value.text)
	case kindArray:
		return "an array"
	default:
		return "an object"
	}
}

func kindName(kind jsonKind) string {
	switch kind {
	case kindNull:
		return "null"
	case kindBool:
		return "true or false"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindArray:
		return "an array"
	default:
		return "an object"
	}
}

// maxQuotedLength bounds how much of a value a message repeats, so that a
// huge value cannot make a huge error.
const maxQuotedLength = 40

// clip shortens s to maxQuotedLength runes, marking the cut with "...".
func clip(s string) string {
	count := 0
	for i := range s {
		if count == maxQuotedLength {
			return s[:i] + "..."
		}
		count++
	}
	return s
}

func quoteClipped(s string) string {
	return strconv.Quote(clip(s))
}

// hasUnknownField reports whether object has a member not in known.
func hasUnknownField(object *jsonValue, known []string) bool {
	for _, member := range object.members {
		if !containsString(known, member.name) {
			return true
		}
	}
	return false
}

// quotedList quotes names and joins them for a sentence: `both "a" and "b"`
// for two, `"a", "b" and "c"` for more.
func quotedList(names []string) string {
	quoted := make([]string, len(names))
	for i, name := range names {
		quoted[i] = strconv.Quote(name)
	}
	if len(quoted) == 2 {
		return "both " + quoted[0] + " and " + quoted[1]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " and " + quoted[len(quoted)-1]
}

// countWord spells out the small numbers of parts a message can mention.
func countWord(n int) string {
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight"}
	if n < len(words) {
		return words[n]
	}
	return strconv.Itoa(n)
}
