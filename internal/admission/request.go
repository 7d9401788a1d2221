package admission

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/netaddr"
)

// Request gives the parts of a request that rules match on and keys are made of.
type Request interface {
	// Header returns the first value of a request header (name lower-case; pseudo-headers such
	// as ":path" included).
	Header(name string) (value string, found bool)
	// HeaderValues returns every value of a request header joined with ",", as Envoy's
	// request.headers attribute does; used for x-forwarded-for, which may be split over lines.
	HeaderValues(name string) (values string, found bool)
	// SourceAddress returns the downstream address as Envoy reports it ("10.0.0.1:5000",
	// "[::1]:5000").
	SourceAddress() (address string, found bool)
	// Property returns an Envoy attribute (proxy_get_property) as text.
	Property(path []string) (value string, found bool)
}

// requestView reads a request's attributes at most once each during one decision.
type requestView struct {
	req      Request
	clientIP config.ClientIP
	// secret keys the digests of long keys; maxKeyBytes is the longest key kept as it is.
	secret      [2]uint64
	maxKeyBytes int

	// paths holds the readings of the path (paths.go), in the Gate's reused buffer.
	paths *pathReadings

	pathDone, clientDone, authorityDone, hasAuthority bool
	host, port                                        string // of :authority (splitAuthority)
	rawPath                                           string // without the query string
	readings                                          []string
	query                                             string
	client                                            netaddr.Addr // invalid when unknown
}

// split reads :path once: the path without its query string, and the query string.
func (v *requestView) split() {
	if !v.pathDone {
		v.pathDone = true
		full, _ := v.req.Header(":path")
		v.rawPath, v.query = full, ""
		if i := strings.IndexByte(full, '?'); i >= 0 {
			v.rawPath, v.query = full[:i], full[i+1:]
		}
	}
}

// authority reads :authority once, for every rule's match.hosts, authority key part and tier:
// its host, without one trailing dot, and its port, without leading zeros; found is false when
// the request has none (or an empty one).
func (v *requestView) authority() (host, port string, found bool) {
	if !v.authorityDone {
		v.authorityDone = true
		var authority string
		if authority, v.hasAuthority = nonEmpty(v.req.Header(":authority")); v.hasAuthority {
			v.host, v.port = splitAuthority(authority)
		}
	}
	return v.host, v.port, v.hasAuthority
}

// pathReadings returns the readings of the request's path (see paths.go), computed once.
func (v *requestView) pathReadings() []string {
	if v.readings == nil {
		v.split()
		if v.paths == nil {
			v.paths = new(pathReadings)
		}
		v.readings = v.paths.read(v.rawPath)
	}
	return v.readings
}

// keyPath is the path a path key part takes: the most decoded reading, so that the spellings of
// one path share one bucket.
func (v *requestView) keyPath() string {
	v.pathReadings()
	return v.paths.mostDecoded
}

// hasEscapedSlash reports whether the path (without the query string) has %2F or %5C.
func (v *requestView) hasEscapedSlash() bool {
	v.split()
	return hasEscapedSlash(v.rawPath)
}

// queryString is the request's query string, without the '?'.
func (v *requestView) queryString() string {
	v.split()
	return v.query
}

// clientAddress is the client's IP address, from source.address, or from x-forwarded-for when
// trusted hops are configured: the Nth entry from the right, since the entries nearest Envoy
// were appended by the trusted proxies and anything further left may be the client's own
// invention. IPv4-mapped IPv6 addresses are unmapped and zones (fe80::1%eth0) dropped, so one
// client has one address.
func (v *requestView) clientAddress() (netaddr.Addr, bool) {
	if v.clientDone {
		return v.client, v.client.IsValid()
	}
	v.clientDone = true
	source, sourceFound := v.req.SourceAddress()
	if hops := v.clientIP.XFFNumTrustedHops; hops > 0 {
		// Counted on the header as the filter receives it: an entry Envoy appended itself
		// (use_remote_address) is one of the N. Guessing whether Envoy appended one is not
		// safe: the same header arrives from a proxy that appended the peer's address.
		if xff, found := v.req.HeaderValues("x-forwarded-for"); found {
			if entry, ok := nthFromRight(xff, hops); ok {
				if addr, _, ok := netaddr.ParseAddr(entry); ok {
					v.client = addr.Unmap() // without its zone
					return v.client, true
				}
			}
		}
	}
	if sourceFound {
		if addr, _, ok := netaddr.ParseAddr(hostOf(source)); ok {
			v.client = addr.Unmap() // without its zone
		}
	}
	return v.client, v.client.IsValid()
}

// nthFromRight returns the nth (1-based) comma-separated entry from the right, trimmed.
func nthFromRight(list string, n int) (string, bool) {
	end := len(list)
	for i := len(list) - 1; i >= -1; i-- {
		if i >= 0 && list[i] != ',' {
			continue
		}
		n--
		if n == 0 {
			entry := strings.TrimSpace(list[i+1 : end])
			return entry, entry != ""
		}
		end = i
	}
	return "", false
}

// hostOf strips the port from an Envoy address: "10.0.0.1:5000" → "10.0.0.1",
// "[::1]:5000" → "::1"; an address without a port is returned as is.
func hostOf(addr string) string {
	if len(addr) > 0 && addr[0] == '[' {
		if i := strings.IndexByte(addr, ']'); i > 0 {
			return addr[1:i]
		}
		return ""
	}
	if i := strings.IndexByte(addr, ':'); i >= 0 && strings.LastIndexByte(addr, ':') == i {
		return addr[:i]
	}
	return addr // no port, or a bare IPv6 address
}

func (v *requestView) keyPart(p config.KeyPart) (value string, found bool) {
	switch p.Kind {
	case config.KeyHeader:
		return nonEmpty(v.req.Header(p.Header))
	case config.KeyPath:
		path := v.keyPath()
		return path, path != ""
	case config.KeyMethod:
		return nonEmpty(v.req.Header(":method"))
	case config.KeyQuery:
		return queryParam(v.queryString(), p.Query)
	case config.KeyAttribute:
		return nonEmpty(v.req.Property(p.Attribute))
	}
	return "", false
}

func nonEmpty(v string, found bool) (string, bool) { return v, found && v != "" }

// describePart names a key part for a response body, without its value.
func describePart(p config.KeyPart) string {
	switch p.Kind {
	case config.KeyHeader:
		return "header " + p.Header
	case config.KeyClientIP:
		return "client address"
	case config.KeyPath:
		return "path"
	case config.KeyMethod:
		return "method"
	case config.KeyAuthority:
		return "host"
	case config.KeyQuery:
		return "query parameter " + p.Query
	case config.KeyAttribute:
		return "attribute " + strings.Join(p.Attribute, ".")
	}
	return "key part"
}

// appendPartitionKey appends the key parts to buf as one key. Each part is length-prefixed so
// that no two different part lists produce the same key ("a|b"+"c" never equals "a"+"b|c").
// missing is the first part the request lacks.
//
// A key whose values add up to more than max_key_bytes is still a key: it is replaced by its
// digest, a keyed 128-bit hash, so that a long value (a JWT, a hostile header) is limited like
// any other and never counts as missing. A single value over the limit is digested on its own
// first, so the buffer never holds more than a few times the limit whatever the request sends.
// A digest starts with '#', which no length prefix does.
func (v *requestView) appendPartitionKey(buf []byte, parts []config.KeyPart) (key []byte, missing *config.KeyPart) {
	limit := v.maxKeyBytes
	if limit <= 0 {
		limit = config.DefaultMaxKeyBytes
	}
	start, framing := len(buf), 0
	for i := range parts {
		before := len(buf)
		if parts[i].Kind == config.KeyClientIP {
			addr, found := v.clientAddress()
			if !found {
				return buf, &parts[i]
			}
			var text [64]byte // an IPv6 address is at most 39 characters, and "/128"
			ip := v.appendClientGroup(text[:0], addr, &parts[i])
			buf = strconv.AppendInt(buf, int64(len(ip)), 10)
			buf = append(buf, ':')
			framing += len(buf) - before
			buf = append(buf, ip...)
			continue
		}
		if parts[i].Kind == config.KeyAuthority {
			var prefix int
			var found bool
			if buf, prefix, found = v.appendAuthority(buf, parts[i].StripPort); !found {
				return buf, &parts[i]
			}
			framing += prefix
			continue
		}
		value, found := v.keyPart(parts[i])
		if !found {
			return buf, &parts[i]
		}
		if len(value) > limit {
			buf = appendDigest(buf, v.secret, unsafe.Slice(unsafe.StringData(value), len(value)))
			continue
		}
		buf = strconv.AppendInt(buf, int64(len(value)), 10)
		buf = append(buf, ':')
		framing += len(buf) - before
		buf = append(buf, value...)
	}
	if len(buf)-start-framing > limit {
		var digest [keyDigestSize]byte
		d := appendDigest(digest[:0], v.secret, buf[start:])
		buf = append(buf[:start], d...)
	}
	return buf, nil
}

// keyDigestSize is the length of a digest standing for a long value or key: '#' and 32 hex
// digits.
const keyDigestSize = 33

// appendDigest appends '#' and a 128-bit hash of msg keyed with the table's secret (two
// SipHash-2-4 under keys derived from it), so that clients cannot search for collisions.
func appendDigest(dst []byte, secret [2]uint64, msg []byte) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '#')
	for _, h := range [2]uint64{
		sipHash24(secret[0]^0x6b65792d64696765, secret[1], msg), // "key-dige"
		sipHash24(secret[0], secret[1]^0x73742d6869676821, msg), // "st-high!"
	} {
		for shift := 60; shift >= 0; shift -= 4 {
			dst = append(dst, hexDigits[h>>uint(shift)&0xf])
		}
	}
	return dst
}

// appendClientGroup appends the part of a client address a client_ip key part keeps: the whole
// address ("2001:db8::1"), or, with a shorter prefix, the network it groups clients by
// ("2001:db8::/64"), so that a client owning a /64 has one bucket, not 2^64.
func (v *requestView) appendClientGroup(dst []byte, addr netaddr.Addr, p *config.KeyPart) []byte {
	bits, whole := p.IPv6Prefix, 128
	if bits == 0 {
		bits = v.clientIP.IPv6Prefix
	}
	if addr.Is4() {
		bits, whole = p.IPv4Prefix, 32
		if bits == 0 {
			bits = v.clientIP.IPv4Prefix
		}
	}
	if bits <= 0 || bits >= whole {
		return addr.AppendTo(dst)
	}
	return netaddr.PrefixFrom(addr, bits).Masked().AppendTo(dst)
}

// queryParam returns the first value of name in a query string, percent-decoded.
func queryParam(query, name string) (string, bool) {
	for query != "" {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		k, value, _ := strings.Cut(pair, "=")
		if unescape(k) == name {
			v := unescape(value)
			return v, v != ""
		}
	}
	return "", false
}

// unescape decodes %XX and '+' as a query string does; malformed escapes are kept as they are.
func unescape(s string) string {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '+':
			out = append(out, ' ')
		case s[i] == '%':
			c, ok := escapedByte(s, i)
			if !ok {
				out = append(out, '%')
				continue
			}
			out = append(out, c)
			i += 2
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}

// escapedByte is the byte a percent-escape at s[i] stands for: '%' and two hexadecimal digits.
func escapedByte(s string, i int) (byte, bool) {
	if s[i] != '%' || i+2 >= len(s) {
		return 0, false
	}
	hi, ok := netaddr.HexValue(s[i+1])
	lo, ok2 := netaddr.HexValue(s[i+2])
	return hi<<4 | lo, ok && ok2
}

func (v *requestView) headerMatches(m config.HeaderMatch) bool {
	value, found := v.req.Header(m.Name)
	switch m.Kind {
	case config.HeaderPresent:
		return found
	case config.HeaderAbsent:
		return !found
	default:
		return found && value == m.Value
	}
}

// matches reports whether a rule applies to the request.
func (v *requestView) matches(m *config.Match) bool {
	if m.Path != nil && !limitPathMatches(m.Path, v.pathReadings()) {
		return false
	}
	if len(m.Methods) > 0 {
		method, _ := v.req.Header(":method")
		if !containsFold(m.Methods, method) {
			return false
		}
	}
	if len(m.Hosts) > 0 {
		// Compared without the port and the trailing dot of a fully qualified name
		// ("API.example.com.:80" is api.example.com), which name the same host. Envoy strips
		// that dot too when asked (strip_trailing_host_dot, source/common/http/header_utility.cc).
		if host, _, _ := v.authority(); !containsFold(m.Hosts, host) {
			return false
		}
	}
	for _, h := range m.Headers {
		if !v.headerMatches(h) {
			return false
		}
	}
	return true
}

// exempt reports whether the request matches any exemption.
func (v *requestView) exempt(e *config.Exemptions) bool {
	if len(e.Paths) > 0 && exemptPath(e.Paths, v.pathReadings()) {
		return true
	}
	if len(e.ClientCIDRs) > 0 {
		if addr, ok := v.clientAddress(); ok {
			for _, prefix := range e.ClientCIDRs {
				if prefix.Contains(addr) {
					return true
				}
			}
		}
	}
	for _, h := range e.Headers {
		if v.headerMatches(h) {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, item := range list {
		if strings.EqualFold(item, s) {
			return true
		}
	}
	return false
}

// appendAuthority appends an authority key part, length-prefixed, in its canonical spelling, so
// that every spelling Envoy routes to one place is one bucket: the host lower-cased (ASCII) and
// without the trailing dot of a fully qualified name; the port without leading zeros, and
// dropped when it is empty or the default port of the request's scheme ("API.example.com.:080"
// → "api.example.com" for http). With stripPort the port is dropped whatever it is. prefix is
// the length of the length prefix. found is false when the request has no authority.
func (v *requestView) appendAuthority(dst []byte, stripPort bool) (out []byte, prefix int, found bool) {
	name, port, found := v.authority()
	if !found {
		return dst, 0, false
	}
	if stripPort || v.isDefaultPort(port) {
		port = ""
	}
	before := len(dst)
	n := len(name)
	if port != "" {
		n += 1 + len(port)
	}
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, ':')
	prefix = len(dst) - before
	dst = appendLowerASCII(dst, name)
	if port != "" {
		dst = append(dst, ':')
		dst = append(dst, port...)
	}
	return dst, prefix, true
}

// splitAuthority splits an authority into its host, without one trailing dot, and its port,
// without leading zeros ("" when there is none or it is empty; "0" for zeros alone). A port
// that is not all digits is kept as it is: Envoy refuses such an authority before any filter.
func splitAuthority(authority string) (host, port string) {
	host = authority
	if !strings.HasPrefix(authority, "[") {
		if i := strings.LastIndexByte(authority, ':'); i >= 0 && strings.IndexByte(authority, ':') == i {
			host, port = authority[:i], authority[i+1:]
		}
	} else if i := strings.IndexByte(authority, ']'); i > 0 && strings.HasPrefix(authority[i+1:], ":") {
		host, port = authority[:i+1], authority[i+2:]
	}
	if len(host) > 1 {
		host = strings.TrimSuffix(host, ".")
	}
	return host, trimLeadingZeros(port)
}

// trimLeadingZeros removes the leading zeros of a run of digits, keeping one of a zero port.
func trimLeadingZeros(port string) string {
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return port
		}
	}
	for len(port) > 1 && port[0] == '0' {
		port = port[1:]
	}
	return port
}

// isDefaultPort reports whether a canonical port is the default port of the request's scheme:
// 80 for http, 443 for https, either when the request names no scheme (Envoy sets :scheme on
// every request it hands to filters; another host may not). :scheme is read only for those two
// ports, so the common authority without a port costs no extra host call.
func (v *requestView) isDefaultPort(port string) bool {
	if port != "80" && port != "443" {
		return port == ""
	}
	scheme, found := v.req.Header(":scheme")
	if !found {
		return true
	}
	return strings.EqualFold(scheme, "http") && port == "80" || strings.EqualFold(scheme, "https") && port == "443"
}

// appendLowerASCII appends s with its ASCII letters lower-cased.
func appendLowerASCII(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}
