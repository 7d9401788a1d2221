package netaddr

// Addr is an IPv4 or IPv6 address, without zone. The zero Addr is no address. It is comparable:
// two Addrs are equal when they are the same address of the same family.
type Addr struct {
	// hi and lo are the address's 128 bits, big-endian; an IPv4 address a.b.c.d is held as
	// the IPv4-mapped ::ffff:a.b.c.d, as net/netip holds it.
	hi, lo uint64
	family uint8 // 0: no address, 4 or 6
}

// mapped is the high bits of an IPv4-mapped IPv6 address's low word (::ffff:0:0/96).
const mapped = 0xffff << 32

// AddrFrom4 is the IPv4 address of four bytes.
func AddrFrom4(b [4]byte) Addr {
	return Addr{lo: mapped | uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3]), family: 4}
}

// AddrFrom16 is the IPv6 address of sixteen bytes (an IPv4-mapped one stays IPv6; see Unmap).
func AddrFrom16(b [16]byte) Addr {
	var a Addr
	for i := range 8 {
		a.hi = a.hi<<8 | uint64(b[i])
		a.lo = a.lo<<8 | uint64(b[8+i])
	}
	a.family = 6
	return a
}

// As16 is the address as sixteen bytes (an IPv4 address IPv4-mapped).
func (a Addr) As16() (b [16]byte) {
	for i := range 8 {
		b[i] = byte(a.hi >> (56 - 8*i))
		b[8+i] = byte(a.lo >> (56 - 8*i))
	}
	return b
}

// IsValid reports whether a is an address (not the zero Addr).
func (a Addr) IsValid() bool { return a.family != 0 }

// Is4 reports whether a is an IPv4 address.
func (a Addr) Is4() bool { return a.family == 4 }

// Is4In6 reports whether a is an IPv4-mapped IPv6 address (::ffff:a.b.c.d).
func (a Addr) Is4In6() bool { return a.family == 6 && a.hi == 0 && a.lo>>32 == 0xffff }

// Unmap is the IPv4 address an IPv4-mapped IPv6 address stands for; any other address as is.
func (a Addr) Unmap() Addr {
	if a.Is4In6() {
		a.family = 4
	}
	return a
}

// BitLen is 32 for IPv4, 128 for IPv6, 0 for no address.
func (a Addr) BitLen() int {
	switch a.family {
	case 4:
		return 32
	case 6:
		return 128
	}
	return 0
}

// group is the i-th 16-bit group of an IPv6 address (0..7).
func (a Addr) group(i int) uint16 {
	if i < 4 {
		return uint16(a.hi >> (48 - 16*i))
	}
	return uint16(a.lo >> (48 - 16*(i-4)))
}

// String is a's text as AppendTo writes it.
func (a Addr) String() string { return string(a.AppendTo(nil)) }

// AppendTo appends a's text: dotted decimal for IPv4; for IPv6 the RFC 5952 form net/netip
// writes (lower-case groups without leading zeros, the first longest run of two or more zero
// groups as "::", and an IPv4-mapped address as ::ffff:a.b.c.d). No address appends nothing.
func (a Addr) AppendTo(dst []byte) []byte {
	switch {
	case a.family == 4:
		return appendIPv4(dst, uint32(a.lo))
	case a.family != 6:
		return dst
	case a.Is4In6():
		return appendIPv4(append(dst, "::ffff:"...), uint32(a.lo))
	}
	// The longest run of zero groups, at least two long; the first of equal ones.
	runStart, runEnd := 8, 8
	for i := 0; i < 8; {
		if a.group(i) != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && a.group(j) == 0 {
			j++
		}
		if j-i >= 2 && j-i > runEnd-runStart {
			runStart, runEnd = i, j
		}
		i = j
	}
	for i := 0; i < 8; i++ {
		if i == runStart {
			dst = append(dst, ':', ':')
			i = runEnd - 1
			continue
		}
		if i > 0 && i != runEnd {
			dst = append(dst, ':')
		}
		dst = appendHex(dst, a.group(i))
	}
	return dst
}

func appendIPv4(dst []byte, v uint32) []byte {
	for shift := 24; shift >= 0; shift -= 8 {
		b := byte(v >> shift)
		switch {
		case b >= 100:
			dst = append(dst, '0'+b/100, '0'+b/10%10, '0'+b%10)
		case b >= 10:
			dst = append(dst, '0'+b/10, '0'+b%10)
		default:
			dst = append(dst, '0'+b)
		}
		if shift > 0 {
			dst = append(dst, '.')
		}
	}
	return dst
}

func appendHex(dst []byte, v uint16) []byte {
	const digits = "0123456789abcdef"
	started := false
	for shift := 12; shift >= 0; shift -= 4 {
		d := v >> shift & 0xf
		if d != 0 || started || shift == 0 {
			dst = append(dst, digits[d])
			started = true
		}
	}
	return dst
}

// ParseAddr parses an IPv4 address in dotted decimal (four fields of 0 to 255, no leading
// zeros) or an IPv6 address (up to eight groups of up to four hex digits, one "::", an IPv4
// address in place of the last two groups), with an optional zone after '%' (IPv6 only, not
// empty), returned apart. It accepts exactly what net/netip.ParseAddr accepts.
func ParseAddr(s string) (a Addr, zone string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.':
			v, ok := parseIPv4(s)
			if !ok {
				return Addr{}, "", false
			}
			return Addr{lo: mapped | uint64(v), family: 4}, "", true
		case ':':
			return parseIPv6(s)
		case '%':
			return Addr{}, "", false // a zone without an address
		}
	}
	return Addr{}, "", false
}

// parseIPv4 parses exactly four dot-separated decimal fields of 0 to 255 without leading zeros.
func parseIPv4(s string) (uint32, bool) {
	var v uint32
	fields, digits, field := 0, 0, 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if digits == 0 || fields == 3 && i < len(s) {
				return 0, false // an empty field, or a fifth
			}
			v = v<<8 | uint32(field)
			fields++
			digits, field = 0, 0
			continue
		}
		c := s[i]
		if c < '0' || c > '9' || digits == 1 && field == 0 {
			return 0, false // not a digit, or a digit after a leading zero
		}
		field = field*10 + int(c-'0')
		digits++
		if field > 255 {
			return 0, false
		}
	}
	return v, fields == 4
}

// parseIPv6 parses an IPv6 address with an optional zone.
func parseIPv6(s string) (Addr, string, bool) {
	zone := ""
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			s, zone = s[:i], s[i+1:]
			if zone == "" {
				return Addr{}, "", false
			}
			break
		}
	}
	var groups [8]uint16
	n := 0         // groups parsed
	ellipsis := -1 // the group index where "::" stands
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis, s = 0, s[2:]
	}
	for s != "" {
		if n == 8 {
			return Addr{}, "", false // more than eight groups
		}
		var group uint32
		digits := 0
		for ; digits < len(s); digits++ {
			d, isHex := HexValue(s[digits])
			if !isHex {
				break
			}
			group = group<<4 | uint32(d)
		}
		if digits == 0 || digits > 4 {
			return Addr{}, "", false // a group is one to four hex digits
		}
		if digits < len(s) && s[digits] == '.' {
			// An IPv4 address as the last two groups: the rest of the text.
			v, ok := parseIPv4(s)
			if !ok || ellipsis < 0 && n != 6 || n > 6 {
				return Addr{}, "", false
			}
			groups[n], groups[n+1] = uint16(v>>16), uint16(v)
			n += 2
			break
		}
		groups[n] = uint16(group)
		n++
		s = s[digits:]
		if s == "" {
			break
		}
		// A colon, and more; or "::".
		if s[0] != ':' || len(s) == 1 {
			return Addr{}, "", false
		}
		s = s[1:]
		if s[0] == ':' {
			if ellipsis >= 0 {
				return Addr{}, "", false
			}
			ellipsis, s = n, s[1:]
		}
	}
	if (n < 8) != (ellipsis >= 0) {
		return Addr{}, "", false // too short without "::", or "::" standing for no group
	}
	if n < 8 {
		// Move the groups after "::" to the end, zeros in between.
		shift := 8 - n
		for i := n - 1; i >= ellipsis; i-- {
			groups[i+shift] = groups[i]
			groups[i] = 0
		}
	}
	var a Addr
	for i := range 4 {
		a.hi = a.hi<<16 | uint64(groups[i])
		a.lo = a.lo<<16 | uint64(groups[4+i])
	}
	a.family = 6
	return a, zone, true
}

// HexValue is the value of a hexadecimal digit, either case.
func HexValue(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
