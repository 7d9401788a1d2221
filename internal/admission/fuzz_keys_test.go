package admission

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

// Fuzz targets for key extraction: the client address from source.address and
// x-forwarded-for, the list walk under it, query parameters, and the partition key. Seed corpora
// are in testdata/fuzz/<target>; make test replays them, make fuzz explores from them.

// canonicalIP is the address s denotes as the module writes it (unmapped, without a zone), or
// "" if s is not one.
func canonicalIP(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return ""
	}
	return a.Unmap().WithZone("").String()
}

// refClientAddress is the client address docs/configuration.md promises, written independently of
// requestView: with N trusted hops, the Nth x-forwarded-for entry from the right (an entry Envoy
// appended is one of the N); otherwise, or if that entry is not an address, source.address
// without its port.
func refClientAddress(xff string, hasXFF bool, source string, hops int) string {
	fromSource := ""
	if source != "" {
		fromSource = canonicalIP(hostOf(source))
	}
	if hops < 1 || !hasXFF {
		return fromSource
	}
	entries := strings.Split(xff, ",")
	for i := range entries {
		entries[i] = strings.TrimSpace(entries[i])
	}
	pos := hops
	if pos <= len(entries) {
		if ip := canonicalIP(entries[len(entries)-pos]); ip != "" {
			return ip
		}
	}
	return fromSource
}

func FuzzClientAddress(f *testing.F) {
	f.Add("6.6.6.6, 203.0.113.9", true, "192.0.2.10:40000", uint8(1))
	f.Fuzz(func(t *testing.T, xff string, hasXFF bool, source string, hops uint8) {
		n := int(hops % 6)
		req := fakeRequest{headers: map[string]string{}, source: source}
		if hasXFF {
			req.headers["x-forwarded-for"] = xff
		}
		v := requestView{req: req, clientIP: config.ClientIP{XFFNumTrustedHops: n}}
		text := func() string {
			if addr, ok := v.clientAddress(); ok {
				return addr.String()
			}
			return ""
		}
		got := text()
		if again := text(); again != got {
			t.Fatalf("second call %q, first %q", again, got)
		}
		if got == "" {
			if want := refClientAddress(xff, hasXFF, source, n); want != "" {
				t.Fatalf("no address, want %q (xff %q, source %q, hops %d)", want, xff, source, n)
			}
			return
		}
		// A valid address, in its canonical form, IPv4 never written as IPv4-mapped IPv6.
		addr, err := netip.ParseAddr(got)
		if err != nil || addr.String() != got || addr.Is4In6() {
			t.Fatalf("%q is not a canonical address (xff %q, source %q, hops %d)", got, xff, source, n)
		}
		// It comes from the request: source.address, or an x-forwarded-for entry.
		fromSource := source != "" && canonicalIP(hostOf(source)) == got
		var entries []string
		if hasXFF {
			entries = strings.Split(xff, ",")
		}
		fromXFF := -1 // position from the right, 1-based, of the entry it came from
		for i := len(entries) - 1; i >= 0; i-- {
			if canonicalIP(strings.TrimSpace(entries[i])) == got {
				fromXFF = len(entries) - i
				if fromXFF >= n {
					break
				}
			}
		}
		switch {
		case !fromSource && fromXFF < 0:
			t.Fatalf("%q appears neither in source %q nor in x-forwarded-for %q", got, source, xff)
		case n == 0 && !fromSource:
			t.Fatalf("%q was taken from x-forwarded-for without trusted hops", got)
		case !fromSource && fromXFF != n:
			// Entries left of the Nth were written by the client.
			t.Fatalf("%q is entry %d from the right of %q; with %d trusted hops only entry %d may be used",
				got, fromXFF, xff, n, n)
		}
		if want := refClientAddress(xff, hasXFF, source, n); got != want {
			t.Fatalf("client %q, the documented rule gives %q (xff %q, source %q, hops %d)", got, want, xff, source, n)
		}
	})
}

func FuzzNthFromRight(f *testing.F) {
	f.Add("a, b, c", 2)
	f.Fuzz(func(t *testing.T, list string, n int) {
		entry, ok := nthFromRight(list, n)
		parts := strings.Split(list, ",")
		if n < 1 || n > len(parts) {
			if ok {
				t.Fatalf("nthFromRight(%q, %d) = %q: there is no such entry", list, n, entry)
			}
			return
		}
		want := strings.TrimSpace(parts[len(parts)-n])
		if ok != (want != "") || (ok && entry != want) {
			t.Fatalf("nthFromRight(%q, %d) = %q, %v; want %q", list, n, entry, ok, want)
		}
	})
}

func FuzzQueryParam(f *testing.F) {
	f.Add("tenant=acme&page=2", "tenant")
	f.Fuzz(func(t *testing.T, query, name string) {
		v, ok := queryParam(query, name)
		if ok != (v != "") {
			t.Fatalf("queryParam(%q, %q) = %q, %v: found means non-empty", query, name, v, ok)
		}
		if !strings.ContainsAny(query, "%+") && ok && !strings.Contains(query, v) {
			t.Fatalf("queryParam(%q, %q) = %q: without escapes the value is a substring", query, name, v)
		}
		// Where net/url parses the query without complaint, both agree on the first value.
		if name == "" || strings.Contains(query, ";") {
			return
		}
		values, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		want := ""
		if vs := values[name]; len(vs) > 0 {
			want = vs[0]
		}
		if v != want {
			t.Fatalf("queryParam(%q, %q) = %q, net/url gives %q", query, name, v, want)
		}
	})
}

// decodeParts reads a list of up to 8 values: a length byte (mod 32), then that many bytes.
func decodeParts(data []byte) []string {
	var parts []string
	for len(data) > 0 && len(parts) < 8 {
		n := min(int(data[0])%32, len(data)-1)
		parts = append(parts, string(data[1:1+n]))
		data = data[1+n:]
	}
	return parts
}

// partitionKeyOf builds the key a rule with one header part per value would build, with
// max_key_bytes at its smallest, 16, so that long values and long keys are digested.
func partitionKeyOf(values []string) (string, *config.KeyPart, []config.KeyPart) {
	spec := make([]config.KeyPart, len(values))
	headers := map[string]string{}
	for i, value := range values {
		name := "h" + string(rune('0'+i))
		spec[i] = config.KeyPart{Kind: config.KeyHeader, Header: name}
		headers[name] = value
	}
	v := requestView{req: fakeRequest{headers: headers}, maxKeyBytes: 16, secret: [2]uint64{1, 2}}
	keyBytes, missing := v.appendPartitionKey(nil, spec)
	key := string(keyBytes)
	return key, missing, spec
}

func FuzzPartitionKey(f *testing.F) {
	f.Add([]byte("\x01a\x03b|c"), []byte("\x03a|b\x01c"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		listA, listB := decodeParts(a), decodeParts(b)
		keyA, missingA, specA := partitionKeyOf(listA)
		keyB, missingB, _ := partitionKeyOf(listB)
		// An empty value is a missing part: the first one is reported.
		for i, value := range listA {
			if value == "" {
				if missingA != &specA[i] {
					t.Fatalf("%q: the first empty part is %d, reported %v", listA, i, missingA)
				}
				return
			}
		}
		if missingA != nil || missingB != nil {
			return
		}
		if strings.HasPrefix(keyA, "fallback:") {
			t.Fatalf("%q: key %q looks like a fallback key", listA, keyA)
		}
		same := len(listA) == len(listB)
		for i := 0; same && i < len(listA); i++ {
			same = listA[i] == listB[i]
		}
		if (keyA == keyB) != same {
			t.Fatalf("parts %q and %q give keys %q and %q", listA, listB, keyA, keyB)
		}
	})
}

// splitAuthority's spelling is canonical: splitting what it returns changes nothing, a port of
// digits has no leading zero (but a zero port keeps one), and only the port and one trailing dot
// are ever taken off the host.
func FuzzSplitAuthority(f *testing.F) {
	for _, s := range []string{"api.example.com", "api.example.com.:0080", "[2001:db8::1]:0443", "a:", ":", "[", "[::1]x", "a.:00", "..:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, authority string) {
		host, port := splitAuthority(authority)
		again := host
		if port != "" {
			again += ":" + port
		}
		if h, p := splitAuthority(again); (h != host || p != port) && !strings.HasSuffix(host, ".") {
			t.Fatalf("%q → %q %q, whose spelling %q splits into %q %q", authority, host, port, again, h, p)
		}
		if digits := strings.Trim(port, "0123456789") == ""; digits && len(port) > 1 && port[0] == '0' {
			t.Fatalf("%q: port %q keeps a leading zero", authority, port)
		}
		if !strings.HasPrefix(authority, host) {
			t.Fatalf("%q: host %q is not where it starts", authority, host)
		}
	})
}
