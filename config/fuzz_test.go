package config_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// FuzzParse checks that Parse never panics and always either returns a
// Config that satisfies every documented limit or a *config.Error with at
// least one explained problem. An accepted Config must also survive being
// written back out as JSON and parsed again unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(exampleJSON))
	f.Add([]byte(kitchenSinkJSON))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Parse returned both a Config and an error: %v", err)
			}
			var parseErr *config.Error
			if !errors.As(err, &parseErr) {
				t.Fatalf("Parse error is %T, want *config.Error: %v", err, err)
			}
			if len(parseErr.Problems) == 0 {
				t.Fatal("*config.Error has no problems")
			}
			for i, problem := range parseErr.Problems {
				if problem.Message == "" {
					t.Fatalf("problem %d (field %q) has an empty message", i, problem.Field)
				}
			}
			if err.Error() == "" {
				t.Fatal("Error() is empty")
			}
			return
		}
		if cfg == nil {
			t.Fatal("Parse returned neither a Config nor an error")
		}
		if err := revalidate(cfg); err != nil {
			t.Fatalf("Parse accepted an invalid Config: %v\ninput: %q", err, data)
		}
		again, err := config.Parse(encode(t, cfg))
		if err != nil {
			t.Fatalf("re-parsing the accepted Config failed: %v", err)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("re-parsed Config differs:\n got %+v\nwant %+v", again, cfg)
		}
	})
}

// revalidate checks a Config against the documented limits independently
// of the package's own validation code.
func revalidate(cfg *config.Config) error {
	if cfg.FailureMode != config.FailureAllow && cfg.FailureMode != config.FailureDeny {
		return errors.New("failure mode " + cfg.FailureMode.String())
	}
	if cfg.ClientIP.XFFNumTrustedHops < 0 || cfg.ClientIP.XFFNumTrustedHops > 10 {
		return errors.New("xff_num_trusted_hops " + strconv.Itoa(cfg.ClientIP.XFFNumTrustedHops))
	}
	if p4, p6 := cfg.ClientIP.IPv4Prefix, cfg.ClientIP.IPv6Prefix; p4 < 1 || p4 > 32 || p6 < 1 || p6 > 128 {
		return errors.New("client_ip prefixes " + strconv.Itoa(p4) + " and " + strconv.Itoa(p6))
	}
	if cfg.EscapedSlashes != config.EscapedSlashesAllow && cfg.EscapedSlashes != config.EscapedSlashesReject {
		return errors.New("escaped_slashes " + cfg.EscapedSlashes.String())
	}
	if err := revalidateExempt(cfg.Exempt); err != nil {
		return errors.New("exempt: " + err.Error())
	}
	if err := revalidateOperator(cfg.Operator); err != nil {
		return errors.New("operator: " + err.Error())
	}
	if err := revalidateResponse(cfg.Response); err != nil {
		return errors.New("response: " + err.Error())
	}
	switch cfg.RateLimitHeaders {
	case config.HeadersOff, config.HeadersDraft, config.HeadersXRateLimit:
	default:
		return errors.New("rate_limit_headers " + cfg.RateLimitHeaders.String())
	}
	if kt := cfg.KeyTable; kt.MaxKeys < 16 || kt.MaxKeys > 10_000_000 || kt.MaxKeyBytes < 16 || kt.MaxKeyBytes > 65536 || kt.WhenFull > config.WhenFullAllow {
		return errors.New("key_table " + strconv.Itoa(kt.MaxKeys) + " " + kt.WhenFull.String())
	}
	if len(cfg.Rules) < 1 || len(cfg.Rules) > 64 {
		return errors.New(strconv.Itoa(len(cfg.Rules)) + " rules")
	}
	names := make(map[string]bool)
	for _, rule := range cfg.Rules {
		if len(rule.Name) < 1 || len(rule.Name) > 64 || strings.Trim(rule.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
			return errors.New("rule name " + strconv.Quote(rule.Name))
		}
		if names[rule.Name] {
			return errors.New("repeated rule name " + strconv.Quote(rule.Name))
		}
		names[rule.Name] = true
		if err := revalidateRule(rule); err != nil {
			return errors.New(rule.Name + ": " + err.Error())
		}
	}
	return nil
}

func revalidateRule(rule config.Rule) error {
	if err := revalidateGlobal(rule.Global); err != nil {
		return errors.New("global: " + err.Error())
	}
	if rule.Global != nil && rule.Shadow {
		return errors.New("global limit on a shadow rule")
	}
	if err := revalidateOutcomes(rule); err != nil {
		return err
	}
	switch o := rule.OnLimit; {
	case o.Action == config.OnLimitReject && o.MaxDelay != 0:
		return errors.New("max_delay on a rejecting rule")
	case o.Action == config.OnLimitDelay && (o.MaxDelay < time.Millisecond || o.MaxDelay > time.Minute):
		return errors.New("max_delay " + o.MaxDelay.String())
	case o.Action == config.OnLimitDelay:
		for _, l := range rule.Limits {
			if l.Algorithm == config.FixedWindow || l.Algorithm == config.SlidingWindow {
				return errors.New("a delaying rule with a " + l.Algorithm.String() + " limit")
			}
		}
	case o.Action != config.OnLimitReject:
		return errors.New("on_limit action " + o.Action.String())
	}
	if err := revalidateMatch(rule.Match); err != nil {
		return errors.New("match: " + err.Error())
	}
	if err := revalidateKey(rule.Key); err != nil {
		return err
	}
	switch rule.MissingKey.Action {
	case config.MissingKeyReject, config.MissingKeyAllow:
		if rule.MissingKey.Fallback != nil {
			return errors.New("fallback key with action " + rule.MissingKey.Action.String())
		}
	case config.MissingKeyFallback:
		if err := revalidateKey(rule.MissingKey.Fallback); err != nil {
			return errors.New("fallback " + err.Error())
		}
	default:
		return errors.New("missing_key action " + rule.MissingKey.Action.String())
	}
	if rule.MissingKey.Status < 400 || rule.MissingKey.Status > 599 {
		return errors.New("missing_key status " + strconv.Itoa(rule.MissingKey.Status))
	}
	lists := [][]config.Limit{rule.Limits}
	if by := rule.LimitsBy; by != nil {
		if rule.Limits != nil {
			return errors.New("both limits and limits_by")
		}
		if len(by.Tiers) < 1 || len(by.Tiers) > 64 || by.Default < 0 || by.Default >= len(by.Tiers) {
			return errors.New(strconv.Itoa(len(by.Tiers)) + " tiers, default " + strconv.Itoa(by.Default))
		}
		if err := revalidateKeyPart(by.Part); err != nil {
			return errors.New("limits_by part: " + err.Error())
		}
		lists = lists[:0]
		names := map[string]bool{}
		for _, tier := range by.Tiers {
			if tier.Name == "" || len(tier.Name) > 256 || names[tier.Name] {
				return errors.New("tier name " + strconv.Quote(tier.Name))
			}
			names[tier.Name] = true
			lists = append(lists, tier.Limits)
		}
	}
	smallest := int64(math.MaxInt64)
	for _, limits := range lists {
		if len(limits) < 1 || len(limits) > 8 {
			return errors.New(strconv.Itoa(len(limits)) + " limits")
		}
		for _, limit := range limits {
			if err := revalidateLimit(limit); err != nil {
				return err
			}
			if limit.Algorithm != config.Concurrency { // one slot a request, whatever its cost
				smallest = min(smallest, limit.Capacity)
			}
		}
	}
	cost := rule.Cost
	if cost.Units < 0 || cost.Units > 1_000_000_000 {
		return errors.New("cost " + strconv.FormatInt(cost.Units, 10))
	}
	if cost.Header == "" {
		if cost.Max != 0 {
			return errors.New("cost max without a header")
		}
		if cost.Units > smallest {
			return errors.New("cost above the smallest capacity")
		}
		return nil
	}
	if err := revalidateHeaderName(cost.Header); err != nil {
		return errors.New("cost " + err.Error())
	}
	if cost.Max < 1 || cost.Max > smallest || cost.Units > cost.Max {
		return errors.New("cost max " + strconv.FormatInt(cost.Max, 10) + " default " + strconv.FormatInt(cost.Units, 10))
	}
	return nil
}

func revalidateKey(key []config.KeyPart) error {
	if len(key) < 1 || len(key) > 8 {
		return errors.New(strconv.Itoa(len(key)) + " key parts")
	}
	for _, part := range key {
		if err := revalidateKeyPart(part); err != nil {
			return err
		}
	}
	return nil
}

func revalidateKeyPart(part config.KeyPart) error {
	if part.Kind != config.KeyHeader && part.Header != "" || part.Kind != config.KeyQuery && part.Query != "" ||
		part.Kind != config.KeyAttribute && part.Attribute != nil {
		return errors.New("stray fields in a " + part.Kind.String() + " key part")
	}
	if part.Kind != config.KeyClientIP && (part.IPv4Prefix != 0 || part.IPv6Prefix != 0) ||
		part.IPv4Prefix < 0 || part.IPv4Prefix > 32 || part.IPv6Prefix < 0 || part.IPv6Prefix > 128 {
		return errors.New("prefixes in a " + part.Kind.String() + " key part")
	}
	switch part.Kind {
	case config.KeyClientIP, config.KeyPath, config.KeyMethod, config.KeyAuthority:
		return nil
	case config.KeyHeader:
		return revalidateHeaderName(part.Header)
	case config.KeyQuery:
		if len(part.Query) < 1 || len(part.Query) > 256 || strings.ContainsAny(part.Query, "&=#? \t\r\n\x00\x7f") {
			return errors.New("query " + strconv.Quote(part.Query))
		}
		for _, r := range part.Query {
			if r < ' ' {
				return errors.New("query " + strconv.Quote(part.Query))
			}
		}
		return nil
	case config.KeyAttribute:
		if len(part.Attribute) < 1 || len(part.Attribute) > 8 {
			return errors.New(strconv.Itoa(len(part.Attribute)) + " attribute segments")
		}
		for _, segment := range part.Attribute {
			if len(segment) < 1 || len(segment) > 256 || strings.Contains(segment, "\x00") {
				return errors.New("attribute segment " + strconv.Quote(segment))
			}
		}
		return nil
	}
	return errors.New("key part kind " + strconv.Itoa(int(part.Kind)))
}

// revalidateHeaderName checks a request header name: lower-cased, and a
// request pseudo-header or an RFC 9110 token of 1 to 256 characters.
func revalidateHeaderName(header string) error {
	if header != strings.ToLower(header) {
		return errors.New("header not lower-cased: " + strconv.Quote(header))
	}
	switch header {
	case ":authority", ":method", ":path", ":scheme", ":protocol":
		return nil
	}
	if len(header) < 1 || len(header) > 256 || strings.Trim(header, "abcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~") != "" {
		return errors.New("header " + strconv.Quote(header))
	}
	return nil
}

func revalidateLimit(limit config.Limit) error {
	if limit.Algorithm == config.Concurrency {
		if limit.Capacity != 0 || limit.RefillTokens != 0 || limit.RefillInterval != 0 || limit.Window != 0 {
			return errors.New("rate fields on a concurrency limit")
		}
		if limit.MaxInFlight < 1 || limit.MaxInFlight > 1_000_000 {
			return errors.New("max_in_flight " + strconv.FormatInt(limit.MaxInFlight, 10))
		}
		if limit.SlotTimeout < time.Second || limit.SlotTimeout > 24*time.Hour {
			return errors.New("lease " + limit.SlotTimeout.String())
		}
		return nil
	}
	if limit.MaxInFlight != 0 || limit.SlotTimeout != 0 {
		return errors.New("concurrency fields on a " + limit.Algorithm.String())
	}
	if limit.Capacity < 1 || limit.Capacity > 1_000_000_000 {
		return errors.New("capacity " + strconv.FormatInt(limit.Capacity, 10))
	}
	switch limit.Algorithm {
	case config.FixedWindow, config.SlidingWindow:
		if limit.RefillTokens != 0 || limit.RefillInterval != 0 {
			return errors.New("refill fields on a " + limit.Algorithm.String())
		}
		if limit.Calendar != config.NoCalendar {
			if limit.Algorithm != config.FixedWindow || limit.Window != 0 || limit.Calendar > config.CalendarMonth {
				return errors.New("calendar " + limit.Calendar.String() + " on a " + limit.Algorithm.String() + " of window " + limit.Window.String())
			}
			return nil
		}
		if limit.Window < time.Millisecond || limit.Window > 366*24*time.Hour {
			return errors.New("window " + limit.Window.String())
		}
		return nil
	case config.TokenBucket:
	default:
		return errors.New("algorithm " + limit.Algorithm.String())
	}
	if limit.Window != 0 || limit.Calendar != config.NoCalendar {
		return errors.New("window or calendar on a token bucket")
	}
	if limit.RefillTokens < 1 || limit.RefillTokens > 1_000_000_000 {
		return errors.New("refill_tokens " + strconv.FormatInt(limit.RefillTokens, 10))
	}
	if limit.RefillInterval < time.Millisecond || limit.RefillInterval > 366*24*time.Hour {
		return errors.New("refill_interval " + limit.RefillInterval.String())
	}
	return nil
}

func revalidateMatch(match config.Match) error {
	if match.Path != nil {
		if err := revalidatePathMatch(*match.Path); err != nil {
			return err
		}
	}
	if match.Methods != nil && (len(match.Methods) < 1 || len(match.Methods) > 16) {
		return errors.New(strconv.Itoa(len(match.Methods)) + " methods")
	}
	seen := make(map[string]bool)
	for _, method := range match.Methods {
		if method != strings.ToUpper(method) || len(method) < 1 || len(method) > 256 ||
			strings.Trim(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~") != "" || seen[method] {
			return errors.New("method " + strconv.Quote(method))
		}
		seen[method] = true
	}
	if match.Hosts != nil && (len(match.Hosts) < 1 || len(match.Hosts) > 16) {
		return errors.New(strconv.Itoa(len(match.Hosts)) + " hosts")
	}
	seenHosts := make(map[string]bool)
	for _, host := range match.Hosts {
		if len(host) < 1 || len(host) > 253 || strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" || seenHosts[host] ||
			strings.HasSuffix(host, ".") {
			return errors.New("host " + strconv.Quote(host))
		}
		seenHosts[host] = true
	}
	return revalidateHeaderMatches(match.Headers, 16)
}

func revalidatePathMatch(match config.PathMatch) error {
	path := match.Exact
	if (match.Exact == "") == (match.Prefix == "") {
		return errors.New("path match with both or neither of exact and prefix")
	}
	if path == "" {
		path = match.Prefix
	}
	if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?# \x7f") {
		return errors.New("path " + strconv.Quote(path))
	}
	for _, r := range path {
		if r < ' ' {
			return errors.New("path " + strconv.Quote(path))
		}
	}
	return nil
}

func revalidateHeaderMatches(matches []config.HeaderMatch, maximum int) error {
	if matches != nil && (len(matches) < 1 || len(matches) > maximum) {
		return errors.New(strconv.Itoa(len(matches)) + " header matches")
	}
	for _, match := range matches {
		if err := revalidateHeaderName(match.Name); err != nil {
			return err
		}
		switch match.Kind {
		case config.HeaderPresent, config.HeaderAbsent:
			if match.Value != "" {
				return errors.New("value with a " + match.Kind.String() + " header match")
			}
		case config.HeaderExact:
			if strings.ContainsAny(match.Value, "\r\n\x00") || strings.Trim(match.Value, " \t") != match.Value {
				return errors.New("header match value " + strconv.Quote(match.Value))
			}
		default:
			return errors.New("header match kind " + match.Kind.String())
		}
	}
	return nil
}

func revalidateExempt(exempt config.Exemptions) error {
	if exempt.Paths != nil && (len(exempt.Paths) < 1 || len(exempt.Paths) > 64) {
		return errors.New(strconv.Itoa(len(exempt.Paths)) + " paths")
	}
	for _, path := range exempt.Paths {
		if err := revalidatePathMatch(path); err != nil {
			return err
		}
	}
	if exempt.ClientCIDRs != nil && (len(exempt.ClientCIDRs) < 1 || len(exempt.ClientCIDRs) > 64) {
		return errors.New(strconv.Itoa(len(exempt.ClientCIDRs)) + " CIDRs")
	}
	for _, prefix := range exempt.ClientCIDRs {
		if !prefix.IsValid() || prefix != prefix.Masked() {
			return errors.New("CIDR " + prefix.String())
		}
	}
	return revalidateHeaderMatches(exempt.Headers, 64)
}

func revalidateResponse(response config.Response) error {
	if response.Status < 400 || response.Status > 599 {
		return errors.New("status " + strconv.Itoa(response.Status))
	}
	if len(response.Body) > 4096 {
		return errors.New("body of " + strconv.Itoa(len(response.Body)) + " bytes")
	}
	if len(response.ContentType) < 1 || len(response.ContentType) > 256 {
		return errors.New("content type " + strconv.Quote(response.ContentType))
	}
	for i := 0; i < len(response.ContentType); i++ {
		if c := response.ContentType[i]; c < ' ' || c > '~' {
			return errors.New("content type " + strconv.Quote(response.ContentType))
		}
	}
	if len(response.Headers) > 16 {
		return errors.New(strconv.Itoa(len(response.Headers)) + " headers")
	}
	seen := make(map[string]bool)
	for _, header := range response.Headers {
		name, value := header[0], header[1]
		switch name {
		case "retry-after", "content-type", "content-length", "ratelimit", "ratelimit-policy",
			"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset":
			return errors.New("header the filter sets: " + name)
		}
		if seen[name] || strings.HasPrefix(name, ":") {
			return errors.New("header " + strconv.Quote(name))
		}
		seen[name] = true
		if err := revalidateHeaderName(name); err != nil {
			return err
		}
		if len(value) > 1024 || strings.ContainsAny(value, "\r\n\x00") {
			return errors.New("header value " + strconv.Quote(value))
		}
	}
	return nil
}

// encode writes cfg back out in the configuration's JSON schema.
func encode(t *testing.T, cfg *config.Config) []byte {
	document := map[string]any{
		"failure_mode": cfg.FailureMode.String(),
		"client_ip": map[string]any{"xff_num_trusted_hops": cfg.ClientIP.XFFNumTrustedHops,
			"ipv4_prefix": cfg.ClientIP.IPv4Prefix, "ipv6_prefix": cfg.ClientIP.IPv6Prefix},
		"escaped_slashes":    cfg.EscapedSlashes.String(),
		"shadow":             cfg.Shadow,
		"rate_limit_headers": cfg.RateLimitHeaders.String(),
		"key_table": map[string]any{"max_keys": cfg.KeyTable.MaxKeys, "when_full": cfg.KeyTable.WhenFull.String(),
			"max_key_bytes": cfg.KeyTable.MaxKeyBytes},
	}
	exempt := map[string]any{}
	if cfg.Exempt.Paths != nil {
		exempt["paths"] = encodePaths(cfg.Exempt.Paths)
	}
	if cfg.Exempt.ClientCIDRs != nil {
		var cidrs []string
		for _, prefix := range cfg.Exempt.ClientCIDRs {
			cidrs = append(cidrs, prefix.String())
		}
		exempt["client_cidrs"] = cidrs
	}
	if cfg.Exempt.Headers != nil {
		exempt["headers"] = encodeHeaderMatches(cfg.Exempt.Headers)
	}
	document["exempt"] = exempt
	response := map[string]any{
		"status":       cfg.Response.Status,
		"body":         cfg.Response.Body,
		"content_type": cfg.Response.ContentType,
	}
	if cfg.Response.Headers != nil {
		// An object whose members keep Response.Headers' order.
		var members []string
		for _, header := range cfg.Response.Headers {
			members = append(members, marshal(t, header[0])+": "+marshal(t, header[1]))
		}
		response["headers"] = json.RawMessage("{" + strings.Join(members, ", ") + "}")
	}
	document["response"] = response
	if cfg.Operator != nil {
		document["operator"] = encodeOperator(cfg.Operator)
	}
	var rules []map[string]any
	for _, rule := range cfg.Rules {
		encoded := map[string]any{"name": rule.Name, "key": encodeKey(rule.Key), "shadow": rule.Shadow}
		match := map[string]any{}
		if rule.Match.Path != nil {
			match["path"] = encodePaths([]config.PathMatch{*rule.Match.Path})[0]
		}
		if rule.Match.Methods != nil {
			match["methods"] = rule.Match.Methods
		}
		if rule.Match.Hosts != nil {
			match["hosts"] = rule.Match.Hosts
		}
		if rule.Match.Headers != nil {
			match["headers"] = encodeHeaderMatches(rule.Match.Headers)
		}
		encoded["match"] = match
		missingKey := map[string]any{"action": rule.MissingKey.Action.String()}
		if rule.MissingKey.Action != config.MissingKeyAllow {
			missingKey["status"] = rule.MissingKey.Status
		}
		if rule.MissingKey.Action == config.MissingKeyFallback {
			missingKey["key"] = encodeKey(rule.MissingKey.Fallback)
		}
		encoded["missing_key"] = missingKey
		if by := rule.LimitsBy; by != nil {
			// An object whose members keep the tiers' order.
			var tiers []string
			for _, tier := range by.Tiers {
				tiers = append(tiers, marshal(t, tier.Name)+": "+marshalValue(t, encodeLimits(tier.Limits)))
			}
			encoded["limits_by"] = map[string]any{"part": encodeKey([]config.KeyPart{by.Part})[0],
				"default": by.Tiers[by.Default].Name, "tiers": json.RawMessage("{" + strings.Join(tiers, ", ") + "}")}
		} else {
			encoded["limits"] = encodeLimits(rule.Limits)
		}
		if rule.Cost.Header != "" {
			encoded["cost"] = map[string]any{"header": rule.Cost.Header, "max": rule.Cost.Max, "default": rule.Cost.Units}
		} else {
			encoded["cost"] = rule.Cost.Units
		}
		if g := rule.Global; g != nil {
			global := map[string]any{"cluster": g.Cluster, "domain": g.Domain, "rule_entry": g.RuleEntry,
				"key_entry": g.KeyEntry, "timeout": g.Timeout.String(), "failure_mode": g.FailureMode.String()}
			if g.Entries != nil {
				entries := []map[string]string{}
				for _, e := range g.Entries {
					entries = append(entries, map[string]string{"key": e.Key, "value": e.Value})
				}
				global["entries"] = entries
			}
			encoded["global"] = global
		}
		if rule.Count != nil {
			encoded["count"] = encodeStatuses(rule.Count)
		}
		if rule.Refund != nil {
			encoded["refund"] = encodeStatuses(rule.Refund)
		}
		switch rule.OnLimit.Action {
		case config.OnLimitDelay:
			encoded["on_limit"] = map[string]any{"action": "delay", "max_delay": rule.OnLimit.MaxDelay.String()}
		default:
			encoded["on_limit"] = map[string]any{"action": "reject"}
		}
		rules = append(rules, encoded)
	}
	document["rules"] = rules
	data, err := json.Marshal(document)
	if err != nil {
		t.Fatalf("encoding the accepted Config: %v", err)
	}
	return data
}

func encodeLimits(limits []config.Limit) []map[string]any {
	var encoded []map[string]any
	for _, limit := range limits {
		encodedLimit := map[string]any{"algorithm": limit.Algorithm.String(), "capacity": limit.Capacity}
		if limit.Algorithm == config.Concurrency {
			encodedLimit = map[string]any{"algorithm": "concurrency", "max_in_flight": limit.MaxInFlight, "slot_timeout": limit.SlotTimeout.String()}
		} else if limit.Algorithm == config.TokenBucket {
			encodedLimit["refill_tokens"] = limit.RefillTokens
			encodedLimit["refill_interval"] = limit.RefillInterval.String()
		} else if limit.Calendar != config.NoCalendar {
			encodedLimit["calendar"] = limit.Calendar.String()
		} else {
			encodedLimit["window"] = limit.Window.String()
		}
		encoded = append(encoded, encodedLimit)
	}
	return encoded
}

func marshalValue(t *testing.T, v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func encodeKey(key []config.KeyPart) []map[string]any {
	var parts []map[string]any
	for _, part := range key {
		switch part.Kind {
		case config.KeyHeader:
			parts = append(parts, map[string]any{"header": part.Header})
		case config.KeyQuery:
			parts = append(parts, map[string]any{"query": part.Query})
		case config.KeyAttribute:
			parts = append(parts, map[string]any{"attribute": part.Attribute})
		case config.KeyClientIP:
			options := map[string]any{}
			if part.IPv4Prefix != 0 {
				options["ipv4_prefix"] = part.IPv4Prefix
			}
			if part.IPv6Prefix != 0 {
				options["ipv6_prefix"] = part.IPv6Prefix
			}
			parts = append(parts, map[string]any{"client_ip": options})
		default:
			parts = append(parts, map[string]any{part.Kind.String(): struct{}{}})
		}
	}
	return parts
}

func encodePaths(paths []config.PathMatch) []map[string]string {
	var encoded []map[string]string
	for _, path := range paths {
		if path.Exact != "" {
			encoded = append(encoded, map[string]string{"exact": path.Exact})
		} else {
			encoded = append(encoded, map[string]string{"prefix": path.Prefix})
		}
	}
	return encoded
}

func encodeHeaderMatches(matches []config.HeaderMatch) []map[string]any {
	var encoded []map[string]any
	for _, match := range matches {
		switch match.Kind {
		case config.HeaderExact:
			encoded = append(encoded, map[string]any{"name": match.Name, "exact": match.Value})
		default:
			encoded = append(encoded, map[string]any{"name": match.Name, "present": match.Kind == config.HeaderPresent})
		}
	}
	return encoded
}

func marshal(t *testing.T, s string) string {
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("encoding %q: %v", s, err)
	}
	return string(data)
}

func TestRevalidateAcceptsExample(t *testing.T) {
	for _, input := range []string{exampleJSON, kitchenSinkJSON} {
		cfg, err := config.Parse([]byte(input))
		if err != nil {
			t.Fatal(err)
		}
		if err := revalidate(cfg); err != nil {
			t.Fatal(err)
		}
		again, err := config.Parse(encode(t, cfg))
		if err != nil {
			t.Fatalf("re-parsing the encoded Config: %v", err)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("re-parsed Config differs:\n got %+v\nwant %+v", again, cfg)
		}
	}
}

// revalidateGlobal checks a global limit against the documented rules.
func revalidateGlobal(g *config.Global) error {
	if g == nil {
		return nil
	}
	text := func(what, s string) error {
		if s == "" || len(s) > 256 || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return errors.New(what + " " + strconv.Quote(s))
		}
		return nil
	}
	if err := text("cluster", g.Cluster); err != nil {
		return err
	}
	if strings.ContainsFunc(g.Cluster, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return errors.New("cluster " + strconv.Quote(g.Cluster))
	}
	if err := text("domain", g.Domain); err != nil {
		return err
	}
	if len(g.Entries) > 8 {
		return errors.New(strconv.Itoa(len(g.Entries)) + " entries")
	}
	keys := map[string]bool{}
	for _, key := range []string{g.RuleEntry, g.KeyEntry} {
		if err := text("entry key", key); err != nil {
			return err
		}
		keys[key] = true
	}
	for _, e := range g.Entries {
		if err := text("entry key", e.Key); err != nil {
			return err
		}
		if err := text("entry value", e.Value); err != nil {
			return err
		}
		keys[e.Key] = true
	}
	if len(keys) != 2+len(g.Entries) {
		return errors.New("entry keys repeat")
	}
	if g.Timeout < time.Millisecond || g.Timeout > time.Minute || g.Timeout%time.Millisecond != 0 {
		return errors.New("timeout " + g.Timeout.String())
	}
	if g.FailureMode != config.FailureAllow && g.FailureMode != config.FailureDeny {
		return errors.New("failure mode " + g.FailureMode.String())
	}
	return nil
}

// revalidateOutcomes checks a rule's count and refund against the documented rules.
func revalidateOutcomes(rule config.Rule) error {
	if rule.Count != nil && rule.Refund != nil {
		return errors.New("both count and refund")
	}
	for _, s := range []*config.Statuses{rule.Count, rule.Refund} {
		if s == nil {
			continue
		}
		if rule.Global != nil {
			return errors.New("count or refund with a global limit")
		}
		n := len(s.Codes) + len(s.Classes)
		if n < 1 || n > 32 {
			return fmt.Errorf("%d statuses", n)
		}
		for i, c := range s.Classes {
			if c < 1 || c > 5 || slices.Contains(s.Classes[:i], c) {
				return fmt.Errorf("class %d", c)
			}
		}
		for i, c := range s.Codes {
			if c < 100 || c > 599 || slices.Contains(s.Codes[:i], c) || slices.Contains(s.Classes, c/100) {
				return fmt.Errorf("status %d", c)
			}
		}
	}
	return nil
}

// encodeStatuses writes a status set as its statuses field: the codes, then the classes.
func encodeStatuses(s *config.Statuses) map[string]any {
	list := []string{}
	for _, c := range s.Codes {
		list = append(list, strconv.Itoa(c))
	}
	for _, c := range s.Classes {
		list = append(list, strconv.Itoa(c)+"xx")
	}
	return map[string]any{"statuses": list}
}
