package netaddr

import (
	"net/netip"
	"testing"
)

// checkAddr holds a parsed address to what net/netip makes of the same text.
func checkAddr(t *testing.T, s string) {
	t.Helper()
	a, zone, ok := ParseAddr(s)
	want, err := netip.ParseAddr(s)
	if ok != (err == nil) {
		t.Fatalf("ParseAddr(%q): ok %v, net/netip says %v", s, ok, err)
	}
	if !ok {
		if a != (Addr{}) || zone != "" {
			t.Fatalf("ParseAddr(%q) failed but returned %v %q", s, a, zone)
		}
		return
	}
	plain := want.WithZone("")
	if zone != want.Zone() || a.Is4() != want.Is4() || a.Is4In6() != want.Is4In6() || a.BitLen() != want.BitLen() ||
		a.As16() != want.As16() || !a.IsValid() {
		t.Fatalf("ParseAddr(%q) = %v zone %q, net/netip %v", s, a, zone, want)
	}
	if got := a.String(); got != plain.String() {
		t.Fatalf("ParseAddr(%q).String() = %q, net/netip %q", s, got, plain.String())
	}
	if got, want := a.Unmap().String(), plain.Unmap().String(); got != want {
		t.Fatalf("ParseAddr(%q).Unmap() = %q, net/netip %q", s, got, want)
	}
	if got, want := string(a.AppendTo([]byte("x"))), "x"+plain.String(); got != want {
		t.Fatalf("ParseAddr(%q).AppendTo = %q, want %q", s, got, want)
	}
	for _, bits := range []int{0, len(s) % 33, len(s) % 129, a.BitLen() - 1, a.BitLen()} {
		got := PrefixFrom(a, bits).Masked()
		want, err := plain.Prefix(bits)
		if err != nil || got.String() != want.String() || got.Bits() != want.Bits() || got.Addr().As16() != want.Addr().As16() {
			t.Fatalf("%q masked to %d bits = %v, net/netip %v (%v)", s, bits, got, want, err)
		}
	}
}

// FuzzParseAddr: ParseAddr accepts exactly what net/netip.ParseAddr accepts, to the same address
// and zone, and an address is written, unmapped and masked as net/netip does it.
func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"", "1.2.3.4", "0.0.0.0", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5",
		"1..2.3", "1.2.3.", ".1.2.3", "::", "::1", "1::", "2001:db8::1", "2001:DB8:0:0:0:0:0:1", "1:2:3:4:5:6:7:8",
		"1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::", "::1:2:3:4:5:6:7", "1::2::3", ":::", "12345::", "::ffff:1.2.3.4",
		"::1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "fe80::1%eth0", "fe80::1%", "1.2.3.4%eth0",
		"%eth0", "::ffff:10.0.0.1%x", "0:0:1:0:0:1:0:0", "1:0:0:2:0:0:0:3", "::ffff:0:0", "0000:0000::", "1:2:3:4:5::6:7:8"} {
		f.Add(s)
	}
	f.Fuzz(checkAddr)
}

// FuzzPrefix: ParsePrefix accepts exactly what net/netip.ParsePrefix accepts, to the same prefix,
// masked and written as net/netip does it, and Contains agrees with net/netip's for any address.
func FuzzPrefix(f *testing.F) {
	for _, seed := range [][2]string{{"10.0.0.0/8", "10.1.2.3"}, {"10.0.0.0/8", "11.0.0.0"}, {"2001:db8::/32", "2001:db8::1"},
		{"127.0.0.2/8", "127.0.0.1"}, {"::ffff:10.0.0.0/104", "10.0.0.1"}, {"::ffff:10.0.0.0/104", "::ffff:10.0.0.1"},
		{"0.0.0.0/0", "::"}, {"::/0", "1.2.3.4"}, {"1.2.3.4/32", "1.2.3.4"}, {"1.2.3.4/33", ""}, {"1.2.3.4/08", ""},
		{"1.2.3.4/+8", ""}, {"1.2.3.4/", ""}, {"fe80::1%eth0/64", "fe80::1"}, {"a/b/c", ""}, {"::/128", "::"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		p, ok := ParsePrefix(s)
		want, err := netip.ParsePrefix(s)
		if ok != (err == nil) {
			t.Fatalf("ParsePrefix(%q): ok %v, net/netip says %v", s, ok, err)
		}
		if !ok {
			return
		}
		if p.String() != want.String() || p.Bits() != want.Bits() || p.Masked().String() != want.Masked().String() ||
			(p == p.Masked()) != (want == want.Masked()) || p.Addr().As16() != want.Addr().As16() {
			t.Fatalf("ParsePrefix(%q) = %v (masked %v), net/netip %v (masked %v)", s, p, p.Masked(), want, want.Masked())
		}
		if got, wantText := string(p.AppendTo([]byte("x"))), "x"+want.String(); got != wantText {
			t.Fatalf("ParsePrefix(%q).AppendTo = %q, want %q", s, got, wantText)
		}
		if a, _, ok := ParseAddr(other); ok {
			b := netip.MustParseAddr(other).WithZone("")
			for _, pair := range [][2]bool{{p.Contains(a), want.Contains(b)}, {p.Contains(a.Unmap()), want.Contains(b.Unmap())}} {
				if pair[0] != pair[1] {
					t.Fatalf("%v contains %q: %v, net/netip %v", p, other, pair[0], pair[1])
				}
			}
		}
	})
}

// The zero values and the out-of-range prefixes behave as net/netip's.
func TestInvalid(t *testing.T) {
	if (Addr{}).IsValid() || (Addr{}).String() != "" || (Prefix{}).IsValid() || (Prefix{}).String() != (netip.Prefix{}).String() {
		t.Fatal("zero values")
	}
	a := AddrFrom4([4]byte{10, 0, 0, 1})
	for _, bits := range []int{-1, 33} {
		p, want := PrefixFrom(a, bits), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, 1}), bits)
		if p.IsValid() || p.Bits() != want.Bits() || p.String() != want.String() || p.Masked() != (Prefix{}) || p.Contains(a) {
			t.Fatalf("PrefixFrom(%v, %d) = %v, net/netip %v", a, bits, p, want)
		}
	}
	if AddrFrom16(a.As16()).String() != "::ffff:10.0.0.1" || AddrFrom16(a.As16()).Unmap() != a {
		t.Fatal("AddrFrom16 of a mapped address")
	}
}
