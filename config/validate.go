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
	minRefillInterval = time.Millisecond
	maxRefillInterval = 24 * time.Hour
	// maxTokenArithmetic bounds capacity × (refill interval in ns / gcd)
	// so that the limiter's fixed-point token arithmetic cannot overflow int64.
	maxTokenArithmetic = 1 << 62
)

// Examples quoted in fixes, so that every message shows something that works.
const (
	exampleLimit   = `{"capacity": 10, "refill_tokens": 1, "refill_interval": "1s"}`
	exampleKey     = `[{"header": "x-api-key"}]`
	exampleRule    = `{"name": "per-api-key", "key": ` + exampleKey + `, "limits": [` + exampleLimit + `]}`
	minimalExample = `{"rules": [` + exampleRule + `]}`
)

// Field names known at each level, in the order they are documented.
var (
	documentFields = []string{"rules", "failure_mode"}
	ruleFields     = []string{"name", "key", "limits"}
	keyPartFields  = []string{"header", "client_ip"}
	limitFields    = []string{"capacity", "refill_tokens", "refill_interval"}
)

// Explanations appended to problems, saying what a valid value looks like.
const (
	ruleNameRule = `a rule name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-' ` +
		`(it becomes part of a shared-memory key), e.g. "per-api-key"`
	headerRule = `a header name is 1 to 256 characters of letters, digits and !#$%&'*+-.^_` + "`" +
		`|~ (an RFC 9110 token), e.g. "x-api-key", or a request pseudo-header such as ":authority"`
	capacityRule     = "capacity is the burst size, a whole number from 1 to 1000000000"
	refillTokensRule = "refill_tokens is how many tokens are added every refill_interval, " +
		"a whole number from 1 to 1000000000"
	refillIntervalRule = `refill_interval is a duration from "1ms" to "24h" inclusive, ` +
		`written as a number and a unit (ms, s, m or h), e.g. "500ms", "1s", "1m" or "24h"`
	failureModeRule = `failure_mode is "allow" (let requests through when the limiter fails, the default) ` +
		`or "deny" (reject them)`
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
	cfg := &Config{FailureMode: FailureAllow}
	if rules := v.required(root, "", "rules", "["+exampleRule+"]"); rules != nil {
		cfg.Rules = v.rules("rules", rules)
	}
	if mode := root.member("failure_mode"); mode != nil {
		cfg.FailureMode = v.failureMode("failure_mode", mode)
	}
	return cfg
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
	var rule Rule
	if !v.wantKind(path, value, kindObject, `a rule is an object with "name", "key" and "limits", e.g. `+exampleRule) {
		return rule
	}
	v.checkFieldNames(path, value, ruleFields)
	if name := v.required(value, path, "name", `"per-api-key"`); name != nil {
		rule.Name = v.ruleName(fieldPath(path, "name"), name, index, ruleIndexByName)
	}
	if key := v.required(value, path, "key", exampleKey); key != nil {
		rule.Key = v.key(fieldPath(path, "key"), key)
	}
	if limits := v.required(value, path, "limits", "["+exampleLimit+"]"); limits != nil {
		rule.Limits = v.limits(fieldPath(path, "limits"), limits)
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
		parts = append(parts, v.keyPart(indexPath(path, i), item))
	}
	return parts
}

func (v *validator) keyPart(path string, value *jsonValue) KeyPart {
	const shape = `a key part is an object with exactly one field, {"header": "<name>"} or {"client_ip": {}}`
	if !v.wantKind(path, value, kindObject, shape) {
		return KeyPart{}
	}
	v.checkFieldNames(path, value, keyPartFields)
	header, clientIP := value.member("header"), value.member("client_ip")
	switch {
	case header != nil && clientIP != nil:
		v.add(path, `has both "header" and "client_ip": a key part takes exactly one, `+
			`so split them into two parts, e.g. [{"header": "x-api-key"}, {"client_ip": {}}]`)
		// Validate both anyway so that their own problems are reported now.
		v.headerName(fieldPath(path, "header"), header)
		v.clientIP(fieldPath(path, "client_ip"), clientIP)
		return KeyPart{}
	case header != nil:
		return KeyPart{Kind: KeyHeader, Header: v.headerName(fieldPath(path, "header"), header)}
	case clientIP != nil:
		v.clientIP(fieldPath(path, "client_ip"), clientIP)
		return KeyPart{Kind: KeyClientIP}
	case len(value.members) == 0:
		v.add(path, "the key part is empty: "+shape)
	}
	// Otherwise only unknown fields were given; checkFieldNames has said so.
	return KeyPart{}
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
	for _, r := range name {
		if !isTokenChar(r) {
			v.add(path, quoteClipped(name)+" contains "+strconv.QuoteRune(r)+", which is not allowed: "+headerRule)
			return ""
		}
	}
	return lower
}

// isTokenChar reports whether r is an RFC 9110 tchar.
func isTokenChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' ||
		strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

func (v *validator) clientIP(path string, value *jsonValue) {
	if !v.wantKind(path, value, kindObject, `client_ip takes no options yet, write "client_ip": {}`) {
		return
	}
	// Every member is unknown: client_ip has no options, but is an object
	// so that options can be added later without breaking configurations.
	for _, member := range value.members {
		v.add(path, "unknown field "+quoteClipped(member.name)+`: client_ip takes no fields yet, write "client_ip": {}`)
	}
}

func (v *validator) limits(path string, value *jsonValue) []Limit {
	if !v.wantKind(path, value, kindArray, "limits is a list of 1 to 8 token buckets such as ["+exampleLimit+"]") {
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
	if !v.wantKind(path, value, kindObject, "a limit is an object such as "+exampleLimit) {
		return limit
	}
	v.checkFieldNames(path, value, limitFields)
	capacityOK, refillTokensOK, refillIntervalOK := false, false, false
	if capacity := v.required(value, path, "capacity", "10"); capacity != nil {
		limit.Capacity, capacityOK = v.tokenCount(fieldPath(path, "capacity"), capacity, capacityRule)
	}
	if refillTokens := v.required(value, path, "refill_tokens", "1"); refillTokens != nil {
		limit.RefillTokens, refillTokensOK = v.tokenCount(fieldPath(path, "refill_tokens"), refillTokens, refillTokensRule)
	}
	refillInterval := v.required(value, path, "refill_interval", `"1s"`)
	if refillInterval != nil {
		limit.RefillInterval, refillIntervalOK = v.refillInterval(fieldPath(path, "refill_interval"), refillInterval)
	}
	if capacityOK && refillTokensOK && refillIntervalOK && overflowsTokenArithmetic(limit) {
		v.add(path, "capacity "+strconv.FormatInt(limit.Capacity, 10)+
			" with refill_tokens "+strconv.FormatInt(limit.RefillTokens, 10)+
			" every "+strconv.Quote(refillInterval.text)+" would overflow the token arithmetic "+
			"(capacity * refill_interval_ns / gcd(refill_interval_ns, refill_tokens) is above 2^62): "+
			"use a shorter refill_interval or a smaller capacity")
	}
	return limit
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
	if !v.wantKind(path, value, kindNumber, rule+", written without quotes") {
		return 0, false
	}
	count, verdict := parseWholeNumber(value.text, 1, maxTokens)
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

func (v *validator) refillInterval(path string, value *jsonValue) (time.Duration, bool) {
	if value.kind == kindNumber {
		// Most likely seconds or milliseconds were meant; only a unit says which.
		v.add(path, "got "+describe(value)+`, want a string: quote the duration and give it a unit, e.g. "1s" or "500ms"`)
		return 0, false
	}
	if !v.wantKind(path, value, kindString, refillIntervalRule) {
		return 0, false
	}
	interval, err := time.ParseDuration(value.text)
	switch {
	case err != nil:
		v.add(path, quoteClipped(value.text)+" is not a valid duration: "+refillIntervalRule)
	case interval < minRefillInterval:
		v.add(path, quoteClipped(value.text)+" is shorter than 1ms: "+refillIntervalRule)
	case interval > maxRefillInterval:
		v.add(path, quoteClipped(value.text)+" is longer than 24h: "+refillIntervalRule)
	default:
		return interval, true
	}
	return 0, false
}

func (v *validator) failureMode(path string, value *jsonValue) FailureMode {
	if !v.wantKind(path, value, kindString, failureModeRule) {
		return FailureAllow
	}
	switch value.text {
	case "allow":
		return FailureAllow
	case "deny":
		return FailureDeny
	}
	v.add(path, quoteClipped(value.text)+" is not a failure mode: "+failureModeRule)
	return FailureAllow
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
