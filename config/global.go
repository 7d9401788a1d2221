package config

import (
	"strconv"

	"github.com/tollgate-proxy/tollgate/internal/duration"
)

// Global is a rule's global limit: a request its local limits admit is also checked with a rate
// limit service speaking Envoy's protocol (envoy.service.ratelimit.v3.RateLimitService, served by
// envoyproxy/ratelimit or Limitador), which counts for every replica.
type Global struct {
	// Cluster is the gRPC cluster of the service as Envoy knows it (static_resources.clusters, or
	// Istio's outbound|PORT||HOST name).
	Cluster string
	// Domain is the rate limit domain: the service's configuration for it decides the limit.
	Domain string
	// Entries are constant descriptor entries sent before the rule and key entries.
	Entries []GlobalEntry
	// RuleEntry is the key of the entry whose value is the rule name; KeyEntry the key of the
	// entry whose value is the hashed partition key.
	RuleEntry, KeyEntry string
	// Timeout bounds the call, in whole milliseconds (proxy_grpc_call takes milliseconds).
	Timeout duration.Duration
	// FailureMode applies when the service fails or does not answer within Timeout.
	FailureMode FailureMode
	// Lease, when set, takes tokens from the service ahead of demand (lease.go); nil asks the
	// service for every request.
	Lease *GlobalLease
}

// GlobalEntry is a constant descriptor entry.
type GlobalEntry struct{ Key, Value string }

// Defaults of a global limit.
const (
	DefaultGlobalTimeout   = 20 * duration.Millisecond
	DefaultGlobalRuleEntry = "rule"
	DefaultGlobalKeyEntry  = "key"
)

// Limits of a global limit's fields.
const (
	maxGlobalEntries     = 8
	maxGlobalTextLength  = 256
	minGlobalTimeout     = duration.Millisecond
	maxGlobalTimeout     = 60 * duration.Second
	exampleGlobal        = `{"cluster": "ratelimit", "domain": "tollgate"}`
	exampleGlobalEntries = `[{"key": "env", "value": "prod"}]`
)

var (
	globalFields      = []string{"cluster", "domain", "entries", "rule_entry", "key_entry", "timeout", "failure_mode", "lease"}
	globalEntryFields = []string{"key", "value"}
)

const (
	globalShape = `global is an object such as ` + exampleGlobal + `: the gRPC cluster of a rate limit service ` +
		`(envoyproxy/ratelimit, Limitador) and the domain of its configuration`
	globalClusterRule = `cluster is the name of the rate limit service's cluster as Envoy knows it, ` +
		`1 to 256 visible ASCII characters, e.g. "ratelimit" or "outbound|8081||ratelimit.default.svc.cluster.local"`
	globalDomainRule = `domain is the rate limit domain the service's configuration defines, ` +
		`1 to 256 bytes without control characters, e.g. "tollgate"`
	globalEntryRule = `an entry is {"key": "<key>", "value": "<value>"}, each 1 to 256 bytes without control characters`
	globalEntryKey  = `rule_entry and key_entry are descriptor entry keys, 1 to 256 bytes without control characters ` +
		`(defaults "rule" and "key")`
	globalTimeoutRule = `timeout is how long to wait for the service, whole milliseconds from "1ms" to "60s" ` +
		`(default "20ms"), e.g. "20ms" or "1s"`
	globalFailureModeRule = `failure_mode is "allow" (let the request through when the service fails or times out, ` +
		`the default) or "deny" (answer 503)`
)

// global reads a rule's global limit.
func (v *validator) global(path string, value *jsonValue) *Global {
	g := &Global{RuleEntry: DefaultGlobalRuleEntry, KeyEntry: DefaultGlobalKeyEntry, Timeout: DefaultGlobalTimeout,
		FailureMode: FailureAllow}
	if !v.wantKind(path, value, kindObject, globalShape) {
		return g
	}
	v.checkFieldNames(path, withoutMember(value, "timeout_ms"), globalFields)
	if ms := value.member("timeout_ms"); ms != nil {
		example := "20ms"
		if n, verdict := parseWholeNumber(ms.text, 1, 60_000); ms.kind == kindNumber && verdict == wholeNumberOK {
			example = strconv.FormatInt(n, 10) + "ms"
		}
		v.add(path, `unknown field "timeout_ms": the timeout is a duration with its unit, write "timeout": "`+example+`"`)
	}
	if cluster := v.required(value, path, "cluster", `"ratelimit"`); cluster != nil {
		g.Cluster = v.globalCluster(fieldPath(path, "cluster"), cluster)
	}
	if domain := v.required(value, path, "domain", `"tollgate"`); domain != nil {
		g.Domain, _ = v.globalText(fieldPath(path, "domain"), domain, globalDomainRule)
	}
	// Which entry key came from where, to name the first use in a message about a repeat.
	used := map[string]string{}
	repeated := func(entryPath, key string) {
		if key == "" {
			return
		}
		if first, ok := used[key]; ok {
			v.add(entryPath, strconv.Quote(key)+" is already the key of "+first+": every entry of a descriptor "+
				"needs its own key, or the service could not tell them apart; rename one")
			return
		}
		used[key] = entryPath
	}
	if entries := value.member("entries"); entries != nil {
		g.Entries = v.globalEntries(fieldPath(path, "entries"), entries)
		for i, e := range g.Entries {
			repeated(fieldPath(indexPath(fieldPath(path, "entries"), i), "key"), e.Key)
		}
	}
	for _, name := range []string{"rule_entry", "key_entry"} {
		key := g.RuleEntry
		if name == "key_entry" {
			key = g.KeyEntry
		}
		if member := value.member(name); member != nil {
			key, _ = v.globalText(fieldPath(path, name), member, globalEntryKey)
		}
		if name == "rule_entry" {
			g.RuleEntry = key
		} else {
			g.KeyEntry = key
		}
		repeated(fieldPath(path, name), key)
	}
	if timeout := value.member("timeout"); timeout != nil {
		g.Timeout = v.globalTimeout(fieldPath(path, "timeout"), timeout)
	}
	if mode := value.member("failure_mode"); mode != nil {
		if index, ok := v.enum(fieldPath(path, "failure_mode"), mode, failureModeNames, "a failure mode", globalFailureModeRule); ok {
			g.FailureMode = FailureMode(index)
		}
	}
	if lease := value.member("lease"); lease != nil {
		g.Lease = v.lease(fieldPath(path, "lease"), lease)
	}
	return g
}

// withoutMember returns object without the named member, for a field reported on its own.
func withoutMember(object *jsonValue, name string) *jsonValue {
	if object.member(name) == nil {
		return object
	}
	copied := *object
	copied.members = nil
	for _, m := range object.members {
		if m.name != name {
			copied.members = append(copied.members, m)
		}
	}
	return &copied
}

func (v *validator) globalCluster(path string, value *jsonValue) string {
	name, ok := v.globalText(path, value, globalClusterRule)
	if !ok {
		return ""
	}
	for _, r := range name {
		if r <= ' ' || r > '~' {
			v.addContains(path, name, r, ", which is not allowed: "+globalClusterRule)
			return ""
		}
	}
	// Envoy's proxy_grpc_call first tries to read its argument as a serialized GrpcService and
	// only otherwise takes it as a cluster name.
	if isProtobufMessage([]byte(name)) {
		v.add(path, strconv.Quote(name)+" is also valid protobuf, and Envoy would read it as a serialized "+
			"GrpcService instead of a cluster name: rename the cluster, e.g. \"ratelimit\"")
		return ""
	}
	return name
}

// globalText reads a string of 1 to 256 bytes without control characters.
func (v *validator) globalText(path string, value *jsonValue, rule string) (string, bool) {
	s := v.boundedString(path, value, maxGlobalTextLength, rule)
	if s == "" {
		return "", false
	}
	// Control characters are ASCII, and no byte of a longer UTF-8 sequence is one.
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			v.addContains(path, s, rune(s[i]), ", which is not allowed: "+rule)
			return "", false
		}
	}
	return s, true
}

func (v *validator) globalEntries(path string, value *jsonValue) []GlobalEntry {
	if !v.wantKind(path, value, kindArray, "entries is a list of up to 8 constant descriptor entries sent before "+
		"the rule and key entries, e.g. "+exampleGlobalEntries) {
		return nil
	}
	if len(value.items) > maxGlobalEntries {
		v.add(path, strconv.Itoa(len(value.items))+" entries are too many: at most "+strconv.Itoa(maxGlobalEntries)+" are allowed")
	}
	entries := make([]GlobalEntry, 0, len(value.items))
	for i, item := range value.items {
		itemPath := indexPath(path, i)
		if !v.wantKind(itemPath, item, kindObject, globalEntryRule) {
			continue
		}
		v.checkFieldNames(itemPath, item, globalEntryFields)
		var e GlobalEntry
		if key := v.required(item, itemPath, "key", `"env"`); key != nil {
			e.Key, _ = v.globalText(fieldPath(itemPath, "key"), key, globalEntryRule)
		}
		if val := v.required(item, itemPath, "value", `"prod"`); val != nil {
			e.Value, _ = v.globalText(fieldPath(itemPath, "value"), val, globalEntryRule)
		}
		entries = append(entries, e)
	}
	return entries
}

var globalTimeouts = durationBounds{parseDuration, minGlobalTimeout, maxGlobalTimeout, "1ms", "60s",
	`quote the timeout and give it a unit, e.g. "20ms" or "1s"`}

func (v *validator) globalTimeout(path string, value *jsonValue) duration.Duration {
	d, ok := v.boundedDuration(path, value, &globalTimeouts, globalTimeoutRule)
	if !ok {
		return DefaultGlobalTimeout
	}
	if d%duration.Millisecond != 0 {
		v.add(path, quoteClipped(value.text)+" is not a whole number of milliseconds, which is what Envoy takes: "+globalTimeoutRule)
		return DefaultGlobalTimeout
	}
	return d
}

// checkGlobalShadow reports a global limit on a rule that is a shadow rule, by its own shadow or
// the document's: a shadow rule never holds a request back, and a global check has to.
func (v *validator) checkGlobalShadow(path string, ruleShadow, documentShadow bool) {
	switch {
	case ruleShadow:
		v.add(path, `a shadow rule cannot have a global limit: a shadow rule never holds a request back, `+
			`and the global check has to wait for the service; remove "shadow": true, or remove global `+
			`and try the limit with the service's own shadow_mode`)
	case documentShadow:
		v.add(path, `the top-level "shadow": true makes this rule a shadow rule, which cannot have a global limit: `+
			`a shadow rule never holds a request back, and the global check has to wait for the service; `+
			`remove the top-level shadow, or use the service's own shadow_mode for this limit`)
	}
}
