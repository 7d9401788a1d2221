package config

import (
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/netaddr"
)

// Explanations of the request-matching fields, appended to problems.
const (
	matchShape = `match is an object with any of "path", "methods", "hosts" and "headers", ` +
		`e.g. {"path": {"prefix": "/api/"}, "methods": ["POST"]}`
	exemptShape = `exempt is an object with any of "paths", "client_cidrs" and "headers", ` +
		`e.g. {"paths": [{"exact": "/healthz"}], "client_cidrs": ["10.0.0.0/8"]}`
	pathMatchShape = `a path match is an object with exactly one field, {"exact": "/healthz"} or {"prefix": "/internal/"}`
	pathRule       = `a path starts with "/" and has no query string or fragment, e.g. "/healthz" or "/internal/"`
	methodRule     = `a method is 1 to 256 characters of letters, digits and !#$%&'*+-.^_` + "`" +
		`|~ (an RFC 9110 token), e.g. "GET" or "POST"`
	hostRule = `a host is a name of 1 to 253 letters, digits, '.' and '-', without a port, ` +
		`e.g. "api.example.com"`
	cidrRule = `a client CIDR is an address range such as "10.0.0.0/8" or "2001:db8::/32", ` +
		`or a single address such as "192.0.2.7"`
	headerMatchShape = `a header match is an object with "name" and exactly one of "exact" and "present", ` +
		`e.g. {"name": "x-tier", "exact": "free"}, {"name": "authorization", "present": true} ` +
		`or {"name": "x-debug", "present": false}`
	headerMatchValueRule = `exact is the value the header's first value must equal, e.g. "free"`
	presentRule          = `present is true (the header must be there, with any value) or false (it must be absent)`
)

func (v *validator) match(path string, value *jsonValue) Match {
	var match Match
	if !v.wantKind(path, value, kindObject, matchShape) {
		return match
	}
	v.checkFieldNames(path, value, matchFields)
	if pathValue := value.member("path"); pathValue != nil {
		if pathMatch, ok := v.pathMatch(fieldPath(path, "path"), pathValue); ok {
			match.Path = &pathMatch
		}
	}
	match.Methods = v.methods(memberAt(path, value, "methods"))
	match.Hosts = v.hosts(memberAt(path, value, "hosts"))
	match.Headers = v.headerMatches(path, value, maxMatchEntries, `{"name": "x-tier", "exact": "free"}`)
	return match
}

func (v *validator) exempt(path string, value *jsonValue) Exemptions {
	var exempt Exemptions
	if !v.wantKind(path, value, kindObject, exemptShape) {
		return exempt
	}
	v.checkFieldNames(path, value, exemptFields)
	exempt.Paths = v.pathMatches(memberAt(path, value, "paths"))
	cidrsPath, cidrs := memberAt(path, value, "client_cidrs")
	exempt.ClientCIDRs = v.clientCIDRs(cidrsPath, cidrs, `client_cidrs is a list of 1 to 64 CIDRs such as ["10.0.0.0/8", "2001:db8::/32"]`,
		`add a CIDR such as "10.0.0.0/8", or remove "client_cidrs"`)
	exempt.Headers = v.headerMatches(path, value, maxExemptions, `{"name": "x-internal", "exact": "1"}`)
	return exempt
}

// pathMatches reads exempt's paths: nil when absent.
func (v *validator) pathMatches(path string, value *jsonValue) []PathMatch {
	var matches []PathMatch
	for i, item := range v.listItems(path, value, maxExemptions, "paths",
		`paths is a list of 1 to 64 path matches such as [{"exact": "/healthz"}, {"prefix": "/internal/"}]`,
		`add a path match such as {"exact": "/healthz"}, or remove "paths"`) {
		itemPath := indexPath(path, i)
		match, ok := v.pathMatch(itemPath, item)
		if ok && match.Prefix == "/" {
			v.add(itemPath, `{"prefix": "/"} exempts every request, which turns the limiter off: `+
				`exempt the paths that need it, e.g. {"exact": "/healthz"}, or remove the rules instead`)
		}
		matches = append(matches, match)
	}
	return matches
}

func (v *validator) pathMatch(path string, value *jsonValue) (PathMatch, bool) {
	var match PathMatch
	if value.kind == kindString {
		example := "/api/"
		if strings.HasPrefix(value.text, "/") && len(value.text) <= maxQuotedLength {
			example = value.text
		}
		v.add(path, "got "+describe(value)+`, want an object: write {"exact": `+strconv.Quote(example)+
			`} to match that path only, or {"prefix": `+strconv.Quote(example)+`} to match every path starting with it`)
		return match, false
	}
	if !v.wantKind(path, value, kindObject, pathMatchShape) {
		return match, false
	}
	v.checkFieldNames(path, value, pathMatchFields)
	exact, prefix := value.member("exact"), value.member("prefix")
	switch {
	case exact != nil && prefix != nil:
		v.add(path, `has both "exact" and "prefix": a path match takes exactly one, `+
			`so use two path matches if both are meant, e.g. [{"exact": "/api"}, {"prefix": "/api/"}]`)
		v.pathValue(fieldPath(path, "exact"), exact)
		v.pathValue(fieldPath(path, "prefix"), prefix)
		return match, false
	case exact != nil:
		var ok bool
		match.Exact, ok = v.pathValue(fieldPath(path, "exact"), exact)
		return match, ok
	case prefix != nil:
		var ok bool
		match.Prefix, ok = v.pathValue(fieldPath(path, "prefix"), prefix)
		return match, ok
	case len(value.members) == 0:
		v.add(path, "the path match is empty: "+pathMatchShape)
	}
	// Otherwise only unknown fields were given; checkFieldNames has said so.
	return match, false
}

func (v *validator) pathValue(path string, value *jsonValue) (string, bool) {
	text, ok := v.nonEmptyString(path, value, pathRule)
	switch {
	case !ok:
		return "", false
	case text[0] != '/':
		v.add(path, quoteClipped(text)+` does not start with "/": `+pathRule)
		return "", false
	}
	for _, r := range text {
		switch {
		case r == '?':
			v.add(path, quoteClipped(text)+" contains '?': paths are compared without the query string, "+
				"so it could never match: "+pathRule)
			return "", false
		case r == '#':
			v.add(path, quoteClipped(text)+" contains '#': a fragment is never sent to the server, "+
				"so it could never match: "+pathRule)
			return "", false
		case r <= ' ' || r == 0x7f:
			v.addContains(path, text, r,
				", which a request path cannot contain: "+pathRule)
			return "", false
		}
	}
	return text, true
}

// methods reads match's methods, upper-cased: nil when absent.
func (v *validator) methods(path string, value *jsonValue) []string {
	var methods []string
	indexByMethod := make(map[string]int)
	for i, item := range v.listItems(path, value, maxMatchEntries, "methods", `methods is a list of 1 to 16 methods such as ["GET", "HEAD"]`,
		`add a method such as "GET", or remove "methods" to match every method`) {
		itemPath := indexPath(path, i)
		method := v.boundedString(itemPath, item, maxMethodLength, methodRule)
		if method == "" {
			continue
		}
		if r, ok := firstNonToken(method); !ok {
			v.addContains(itemPath, method, r, ", which is not allowed: "+methodRule)
			continue
		}
		upper := upperASCII(method)
		if first, listed := indexByMethod[upper]; listed {
			v.add(itemPath, strconv.Quote(method)+" is already listed at "+indexPath(path, first)+
				" (methods are compared upper-cased): list each method once")
			continue
		}
		indexByMethod[upper] = i
		methods = append(methods, upper)
	}
	return methods
}

// hosts reads match's hosts, lower-cased: nil when absent.
func (v *validator) hosts(path string, value *jsonValue) []string {
	var hosts []string
	indexByHost := make(map[string]int)
	for i, item := range v.listItems(path, value, maxMatchEntries, "hosts", `hosts is a list of 1 to 16 host names such as ["api.example.com"]`,
		`add a host such as "api.example.com", or remove "hosts" to match every host`) {
		itemPath := indexPath(path, i)
		host, ok := v.host(itemPath, item)
		if !ok {
			continue
		}
		if first, listed := indexByHost[host]; listed {
			v.add(itemPath, strconv.Quote(item.text)+" is already listed at "+indexPath(path, first)+
				" (hosts are compared lower-cased): list each host once")
			continue
		}
		indexByHost[host] = i
		hosts = append(hosts, host)
	}
	return hosts
}

func (v *validator) host(path string, value *jsonValue) (string, bool) {
	host, ok := v.nonEmptyString(path, value, hostRule)
	switch {
	case !ok:
		return "", false
	case host == ".":
		v.add(path, `"." is not a host name: `+hostRule)
		return "", false
	case host == "*":
		v.add(path, `"*" would match every host, but wildcards are not supported: remove "hosts" to match any host`)
		return "", false
	case strings.Contains(host, "://"):
		v.add(path, quoteClipped(host)+` is a URL: write only its host name: `+hostRule)
		return "", false
	case strings.Contains(host, "*"):
		v.add(path, quoteClipped(host)+` contains '*', but wildcards are not supported: list each host name instead: `+hostRule)
		return "", false
	case len(host) > maxHostLength:
		v.add(path, quoteClipped(host)+" is "+strconv.Itoa(len(host))+" bytes long: "+hostRule)
		return "", false
	}
	if i := strings.IndexByte(host, ':'); i > 0 && i < len(host)-1 && isDigitString(host[i+1:]) {
		v.add(path, quoteClipped(host)+" includes a port, but hosts are compared with the request's host "+
			"without its port: write "+quoteClipped(host[:i]))
		return "", false
	}
	for _, r := range host {
		if !isHostChar(r) {
			v.addContains(path, host, r, ", which is not allowed: "+hostRule)
			return "", false
		}
	}
	// "api.example.com." is the same host, fully qualified; requests are compared without
	// that dot too.
	return strings.ToLower(strings.TrimSuffix(host, ".")), true
}

func isHostChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '-'
}

// clientCIDRs reads a list of CIDRs: nil when value is nil (an absent member). shape is the fix
// of a value that is no list, addFix that of an empty one.
func (v *validator) clientCIDRs(path string, value *jsonValue, shape, addFix string) []netaddr.Prefix {
	var prefixes []netaddr.Prefix
	for i, item := range v.listItems(path, value, maxExemptions, "CIDRs", shape, addFix) {
		if prefix, ok := v.clientCIDR(indexPath(path, i), item); ok {
			prefixes = append(prefixes, prefix)
		}
	}
	return prefixes
}

// clientCIDR reads a CIDR, or a single address standing for the CIDR that holds only it. A CIDR
// with bits set beyond its length is refused rather than masked.
func (v *validator) clientCIDR(path string, value *jsonValue) (netaddr.Prefix, bool) {
	if !v.wantKind(path, value, kindString, cidrRule) {
		return netaddr.Prefix{}, false
	}
	text := value.text
	// Split where netaddr.ParsePrefix (and net/netip's) does, at the last '/'.
	addressText, hasLength := text, false
	if i := strings.LastIndexByte(text, '/'); i >= 0 {
		addressText, hasLength = text[:i], true
	}
	address, zone, parsed := netaddr.ParseAddr(addressText)
	switch {
	case !parsed && hasLength:
		v.add(path, quoteClipped(text)+" is not a valid CIDR: "+quoteClipped(addressText)+" is not an IP address: "+cidrRule)
		return netaddr.Prefix{}, false
	case !parsed:
		v.add(path, quoteClipped(text)+" is not an IP address or CIDR: "+cidrRule)
		return netaddr.Prefix{}, false
	case zone != "":
		v.add(path, quoteClipped(text)+" has an IPv6 zone (%"+clip(zone)+
			"), which a client address never carries: remove it: "+cidrRule)
		return netaddr.Prefix{}, false
	case !hasLength:
		return netaddr.PrefixFrom(address.Unmap(), address.Unmap().BitLen()), true
	}
	prefix, parsed := netaddr.ParsePrefix(text)
	if !parsed {
		v.add(path, quoteClipped(text)+" is not a valid CIDR: the prefix length after '/' must be a whole number from 0 to "+
			strconv.Itoa(address.BitLen())+" for an IPv"+ipVersion(address)+" address, written without leading zeros: "+cidrRule)
		return netaddr.Prefix{}, false
	}
	if address.Is4In6() && prefix.Bits() < 96 {
		v.add(path, quoteClipped(text)+" is an IPv4-mapped prefix shorter than /96, which covers more than IPv4 "+
			"addresses: write the IPv4 CIDR instead, e.g. \"10.0.0.0/8\": "+cidrRule)
		return netaddr.Prefix{}, false
	}
	if masked := prefix.Masked(); masked.Addr() != prefix.Addr() {
		// "127.0.0.2/8" is most likely a single address with a slip of the length; widening it
		// silently would exempt a whole network.
		v.add(path, quoteClipped(text)+" has bits set after its first "+strconv.Itoa(prefix.Bits())+
			", so it is not the start of a range: write "+strconv.Quote(masked.String())+" for the whole range, or "+
			strconv.Quote(prefix.Addr().String())+" for that address alone")
		return netaddr.Prefix{}, false
	}
	if address.Is4In6() {
		// Client addresses are compared unmapped (::ffff:10.0.0.1 is 10.0.0.1), so an
		// IPv4-mapped prefix is stored as the IPv4 prefix it stands for.
		return netaddr.PrefixFrom(address.Unmap(), prefix.Bits()-96), true
	}
	return prefix, true
}

func ipVersion(address netaddr.Addr) string {
	if address.Is4() {
		return "4"
	}
	return "6"
}

// headerMatches reads object's headers, if it has them: a list of 1 to maximum header matches
// such as example.
func (v *validator) headerMatches(path string, object *jsonValue, maximum int, example string) []HeaderMatch {
	var matches []HeaderMatch
	path, value := memberAt(path, object, "headers")
	for i, item := range v.listItems(path, value, maximum, "header matches",
		"headers is a list of 1 to "+strconv.Itoa(maximum)+` header matches such as [{"name": "x-tier", "exact": "free"}]`,
		"add a header match such as "+example+`, or remove "headers"`) {
		matches = append(matches, v.headerMatch(indexPath(path, i), item))
	}
	return matches
}

func (v *validator) headerMatch(path string, value *jsonValue) HeaderMatch {
	var match HeaderMatch
	if !v.wantKind(path, value, kindObject, headerMatchShape) {
		return match
	}
	if len(value.members) == 0 {
		v.add(path, "the header match is empty: "+headerMatchShape)
		return match
	}
	v.checkFieldNames(path, value, headerMatchFields)
	if name := v.required(value, path, "name", `"x-tier"`); name != nil {
		match.Name = v.headerName(fieldPath(path, "name"), name)
	}
	exact, present := value.member("exact"), value.member("present")
	switch {
	case exact != nil && present != nil:
		v.add(path, `has both "exact" and "present": a header match takes exactly one, `+
			`"exact" to compare the header's value or "present" to test only whether it is there`)
		v.headerMatchValue(fieldPath(path, "exact"), exact)
		v.boolean(fieldPath(path, "present"), present, presentRule)
	case exact != nil:
		match.Kind = HeaderExact
		match.Value = v.headerMatchValue(fieldPath(path, "exact"), exact)
	case present != nil:
		match.Kind = HeaderAbsent
		if v.boolean(fieldPath(path, "present"), present, presentRule) {
			match.Kind = HeaderPresent
		}
	case !hasUnknownField(value, headerMatchFields):
		// With an unknown field, checkFieldNames has already pointed at the likely typo.
		v.add(path, `has neither "exact" nor "present": add "exact": "<value>" to compare the header's value, `+
			`or "present": true or false to test whether it is there`)
	}
	return match
}

func (v *validator) headerMatchValue(path string, value *jsonValue) string {
	if !v.wantKind(path, value, kindString, headerMatchValueRule) {
		return ""
	}
	text := value.text
	for _, r := range text {
		if r == '\r' || r == '\n' || r == 0 {
			v.addContains(path, text, r, ", which a request header value never "+
				"contains, so it could never match: remove it")
			return ""
		}
	}
	if text != "" && (isBlank(text[0]) || isBlank(text[len(text)-1])) {
		v.add(path, quoteClipped(text)+" starts or ends with a space or tab, which Envoy strips from header values, "+
			"so it could never match: remove them")
		return ""
	}
	return text
}

// isBlank reports a space or a tab, which Envoy strips from both ends of a header value.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// upperASCII upper-cases the ASCII letters of s: for the tokens it is given (methods), what
// strings.ToUpper gives, without linking Unicode's upper-casing into the module.
func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
