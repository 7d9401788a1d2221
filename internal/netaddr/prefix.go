package netaddr

// Prefix is an IP network: an address and the number of leading bits that matter. The zero
// Prefix is no prefix. It is comparable; its address is kept as given (see Masked).
type Prefix struct {
	addr Addr
	bits int16 // 0..addr.BitLen(); -1 when the prefix is not valid
}

// PrefixFrom is the prefix of addr's first bits; not valid (IsValid) when bits is out of range
// for the address's family.
func PrefixFrom(addr Addr, bits int) Prefix {
	if !addr.IsValid() || bits < 0 || bits > addr.BitLen() {
		return Prefix{addr: addr, bits: -1}
	}
	return Prefix{addr: addr, bits: int16(bits)}
}

// Addr is the prefix's address, as given.
func (p Prefix) Addr() Addr { return p.addr }

// Bits is the prefix length, or -1 when the prefix is not valid.
func (p Prefix) Bits() int {
	if !p.IsValid() {
		return -1
	}
	return int(p.bits)
}

// IsValid reports whether p is a prefix: an address and a length in range.
func (p Prefix) IsValid() bool { return p.addr.IsValid() && p.bits >= 0 }

// Masked is p with every address bit after the prefix length cleared; the zero Prefix when p is
// not valid.
func (p Prefix) Masked() Prefix {
	if !p.IsValid() {
		return Prefix{}
	}
	p.addr = p.addr.masked(int(p.bits))
	return p
}

// masked keeps the first bits of the address's own bits (32 for IPv4, 128 for IPv6).
func (a Addr) masked(bits int) Addr {
	if a.family == 4 {
		bits += 96
	}
	switch {
	case bits <= 0:
		a.hi, a.lo = 0, 0
	case bits < 64:
		a.hi &^= ^uint64(0) >> bits
		a.lo = 0
	case bits < 128:
		a.lo &^= ^uint64(0) >> (bits - 64)
	}
	if a.family == 4 {
		a.lo |= mapped // the IPv4 address's own bits only
	}
	return a
}

// Contains reports whether addr is in the network p: of the same family, and equal in the
// prefix's first bits. An IPv4-mapped IPv6 address is IPv6 here; unmap it first.
func (p Prefix) Contains(addr Addr) bool {
	if !p.IsValid() || addr.family != p.addr.family {
		return false
	}
	return addr.masked(int(p.bits)) == p.addr.masked(int(p.bits))
}

// String is p's text as AppendTo writes it.
func (p Prefix) String() string {
	if !p.IsValid() {
		return "invalid Prefix"
	}
	return string(p.AppendTo(nil))
}

// AppendTo appends the address as Addr.AppendTo does, '/' and the length in decimal; nothing for
// a prefix that is not valid.
func (p Prefix) AppendTo(dst []byte) []byte {
	if !p.IsValid() {
		return dst
	}
	dst = append(p.addr.AppendTo(dst), '/')
	if p.bits >= 100 {
		dst = append(dst, byte('0'+p.bits/100))
	}
	if p.bits >= 10 {
		dst = append(dst, byte('0'+p.bits/10%10))
	}
	return append(dst, byte('0'+p.bits%10))
}

// ParsePrefix parses "address/length" as net/netip.ParsePrefix does: the text before the last
// '/' is an address without zone, the length a decimal number without sign or leading zeros,
// at most the address's bit length. The address is kept as written (see Masked).
func ParsePrefix(s string) (Prefix, bool) {
	slash := -1
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			slash = i
			break
		}
	}
	if slash < 0 {
		return Prefix{}, false
	}
	addr, zone, ok := ParseAddr(s[:slash])
	if !ok || zone != "" {
		return Prefix{}, false
	}
	bits, ok := ParseBits(s[slash+1:], addr.BitLen())
	if !ok {
		return Prefix{}, false
	}
	return Prefix{addr: addr, bits: int16(bits)}, true
}

// ParseBits parses a prefix length: a decimal number from 0 to max, without sign or leading zeros.
func ParseBits(s string, max int) (int, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' || len(s) > 3 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n <= max
}
