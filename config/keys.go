package config

import (
	"strconv"
	"strings"
)

// requestPseudoHeaders are the HTTP/2 pseudo-headers a request carries.
// Only these are accepted so that a typo such as ":authorty" is reported
// instead of silently keying every request on an empty value.
var requestPseudoHeaders = []string{":authority", ":method", ":path", ":scheme", ":protocol"}

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
		part := KeyPart{Kind: KeyClientIP}
		v.clientIPPart(path, value, &part)
		return part
	case "path":
		v.noOptions(path, value, name, `; to select requests by path, use the rule's "match": {"path": {"prefix": "/api/"}}`)
		return KeyPart{Kind: KeyPath}
	case "method":
		v.noOptions(path, value, name, `; to select requests by method, use the rule's "match": {"methods": ["POST"]}`)
		return KeyPart{Kind: KeyMethod}
	case "authority":
		return KeyPart{Kind: KeyAuthority, StripPort: v.authorityPart(path, value)}
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
	name := v.boundedString(path, value, maxHeaderLength, headerRule)
	if name == "" {
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
		v.addContains(path, name, r, ", which is not allowed: "+headerRule)
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

// authorityPart reads the options of an authority key part: whether it drops the port.
func (v *validator) authorityPart(path string, value *jsonValue) (stripPort bool) {
	const rule = `authority is an object such as {} (the host and its port) or {"strip_port": true} (the host alone); ` +
		`to select requests by host, use the rule's "match": {"hosts": ["api.example.com"]}`
	if !v.wantKind(path, value, kindObject, rule) {
		return false
	}
	v.checkFieldNames(path, value, authorityPartFields)
	if n := value.member("strip_port"); n != nil {
		stripPort = v.boolean(fieldPath(path, "strip_port"), n, `strip_port is true (key on the host alone) or false (the default: the host and its port)`)
	}
	return stripPort
}

// clientIPPart reads the options of a client_ip key part: the address prefixes it keeps.
func (v *validator) clientIPPart(path string, value *jsonValue, part *KeyPart) {
	if !v.wantKind(path, value, kindObject, `client_ip is an object such as {} (the whole address) or {"ipv6_prefix": 64}`) {
		return
	}
	others := *value
	others.members = nil
	for _, member := range value.members {
		if member.name == "xff_num_trusted_hops" {
			v.add(path, `unknown field "xff_num_trusted_hops": it belongs in the top-level "client_ip": {"xff_num_trusted_hops": 1}, `+
				"which says how every rule finds the client address")
			continue
		}
		others.members = append(others.members, member)
	}
	v.checkFieldNames(path, &others, clientIPPartFields)
	v.addressPrefixes(path, value, &part.IPv4Prefix, &part.IPv6Prefix)
}

// addressPrefixes reads ipv4_prefix and ipv6_prefix, leaving absent ones as they are.
func (v *validator) addressPrefixes(path string, value *jsonValue, ipv4, ipv6 *int) {
	if n := value.member("ipv4_prefix"); n != nil {
		if bits, ok := v.wholeNumber(fieldPath(path, "ipv4_prefix"), n, 1, 32, ipv4PrefixRule); ok {
			*ipv4 = int(bits)
		}
	}
	if n := value.member("ipv6_prefix"); n != nil {
		if bits, ok := v.wholeNumber(fieldPath(path, "ipv6_prefix"), n, 1, 128, ipv6PrefixRule); ok {
			*ipv6 = int(bits)
		}
	}
}

func (v *validator) queryName(path string, value *jsonValue) string {
	name := v.boundedString(path, value, maxQueryLength, queryRule)
	if name == "" {
		return ""
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("&=#?", r) {
			v.addContains(path, name, r, ", which is not allowed: "+queryRule)
			return ""
		}
	}
	return name
}

func (v *validator) attribute(path string, value *jsonValue) []string {
	if value.kind == kindString && strings.Contains(value.text, ".") && len(value.text) <= maxQuotedLength {
		// A dotted attribute name as Envoy's documentation writes it.
		// Each segment quoted: '.' is never escaped, nor part of a character that is.
		segments := strings.ReplaceAll(strconv.Quote(value.text), ".", `", "`)
		v.add(path, "got "+describe(value)+", want an array: attribute is a list of path segments, "+
			"so write ["+segments+"]")
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
