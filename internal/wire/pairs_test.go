package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestPairsRoundTrip(t *testing.T) {
	for _, pairs := range [][][2]string{
		{},
		{{":path", "/"}},
		{{"a", ""}, {"", "b"}, {"x-api-key", "alice"}, {"k", "v\x00with nul"}},
	} {
		got, ok := DecodePairs(EncodePairs(pairs))
		if !ok || (len(pairs) > 0 && !reflect.DeepEqual(got, pairs)) || len(got) != len(pairs) {
			t.Errorf("round trip of %q gave %q, %v", pairs, got, ok)
		}
	}
}

func TestEncodePairsLayout(t *testing.T) {
	want := "\x01\x00\x00\x00" + "\x01\x00\x00\x00\x02\x00\x00\x00" + "a\x00bc\x00"
	if got := string(EncodePairs([][2]string{{"a", "bc"}})); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestDecodePairsIsStrict(t *testing.T) {
	valid := EncodePairs([][2]string{{"a", "bc"}})
	for name, buf := range map[string][]byte{
		"short count":     {1, 0},
		"count too large": {9, 0, 0, 0},
		"truncated data":  valid[:len(valid)-1],
		"missing key NUL": append(append([]byte{}, valid[:12]...), 'a', 'x', 'b', 'c', 0),
		"trailing bytes":  append(append([]byte{}, valid...), 0),
		"huge length":     {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
	} {
		if _, ok := DecodePairs(buf); ok {
			t.Errorf("%s: accepted %q", name, buf)
		}
	}
}

func TestPropertyPath(t *testing.T) {
	if got := string(PropertyPath([]string{"source", "address"})); got != "source\x00address" {
		t.Fatalf("got %q", got)
	}
}

// FuzzDecodePairs: arbitrary bytes never panic, and what decodes re-encodes to the same bytes.
func FuzzDecodePairs(f *testing.F) {
	f.Add(EncodePairs([][2]string{{"a", "bc"}}))
	f.Fuzz(func(t *testing.T, buf []byte) {
		pairs, ok := DecodePairs(buf)
		if !ok || len(buf) == 0 {
			return
		}
		if again := EncodePairs(pairs); string(again) != string(buf) {
			t.Fatalf("decode/encode changed %q into %q", buf, again)
		}
	})
}

func TestPairsValue(t *testing.T) {
	headers := EncodePairs([][2]string{
		{":method", "GET"}, {"x-api-key", "alice"}, {"empty", ""}, {"x-api-key", "bob"}, {"x-api-ke", "short"},
	})
	unterminated := bytes.Clone(headers)
	at := 4 + 8*5 + len(":method")
	unterminated[at], unterminated[at+len("GET")+1] = 'x', 'x'
	overlong := EncodePairs([][2]string{{"aa", "1"}, {"b", "2"}})
	overlong[8] = 9 // "aa"'s value is 9 bytes long: its entry ends past buf, and so does "b"'s
	emptyName := EncodePairs([][2]string{{"a", "1"}, {"", "2"}})
	for _, tc := range []struct {
		buf         []byte
		key, want   string
		wantPresent bool
	}{
		{headers, ":method", "GET", true},
		{headers, "x-api-key", "alice", true}, // the first value, as Envoy's get_header_map_value
		{headers, "empty", "", true},
		{headers, "x-api-ke", "short", true},
		{headers, "x-api-keys", "", false},
		{headers, "", "", false},
		{nil, "x", "", false},
		{EncodePairs(nil), "x", "", false},
		{headers[:len(headers)-1], "x-api-key", "alice", true}, // the damage is past the match
		{headers[:len(headers)-1], "x-api-ke", "", false},      // the last entry ends past buf
		{unterminated, ":method", "", false},                   // the first entry lost its NULs
		{unterminated, "x-api-key", "alice", true},             // which the walk passes by its sizes
		{overlong, "b", "", false},                             // an entry after one that ends past buf
		{emptyName, "", "2", true},                             // an empty key is an empty name
		{[]byte{0xff, 0xff, 0xff, 0xff}, "x", "", false},       // a count larger than the buffer
	} {
		got, found := PairsValue(tc.buf, tc.key)
		if string(got) != tc.want || found != tc.wantPresent {
			t.Errorf("PairsValue(%q) = %q, %v; want %q, %v", tc.key, got, found, tc.want, tc.wantPresent)
		}
	}
}

// pairsValueReference is PairsValue as its documentation says, with indexes into buf: the
// entries walked in order by their sizes, the search ending at an entry that ends past buf, the
// first entry named key answering if its NULs are in place.
func pairsValueReference(buf []byte, key string) ([]byte, bool) {
	if len(buf) < 4 {
		return nil, false
	}
	count := int(binary.LittleEndian.Uint32(buf))
	if count > (len(buf)-4)/8 || count >= 1<<30 {
		return nil, false
	}
	at := 4 + 8*count
	for i := 0; i < count; i++ {
		keyLen := int(binary.LittleEndian.Uint32(buf[4+8*i:]))
		valueLen := int(binary.LittleEndian.Uint32(buf[8+8*i:]))
		if keyLen+valueLen+2 > len(buf)-at {
			return nil, false
		}
		if string(buf[at:at+keyLen]) == key {
			if buf[at+keyLen] != 0 || buf[at+keyLen+1+valueLen] != 0 {
				return nil, false
			}
			return buf[at+keyLen+1 : at+keyLen+1+valueLen], true
		}
		at += keyLen + valueLen + 2
	}
	return nil, false
}

// Names are compared whole, whatever their length: a name that differs from the key in any one
// byte is not the key (PairsValue compares eight bytes at a time, the last eight overlapping).
func TestPairsValueComparesWholeNames(t *testing.T) {
	for n := 0; n <= 40; n++ {
		key := strings.Repeat("k", n)
		for i := 0; i < n; i++ {
			other := []byte(key)
			other[i] = 'x'
			buf := EncodePairs([][2]string{{string(other), "wrong"}, {key, "right"}})
			if got, found := PairsValue(buf, key); !found || string(got) != "right" {
				t.Fatalf("key of %d bytes, a name differing at byte %d first: PairsValue = %q, %v", n, i, got, found)
			}
		}
	}
}

// FuzzPairsValue: arbitrary bytes never panic and get the reference's answer, and on a map
// DecodePairs accepts, every key gets the first value DecodePairs gives it.
func FuzzPairsValue(f *testing.F) {
	f.Add(EncodePairs([][2]string{{"a", "bc"}, {"a", "d"}}), "a")
	f.Add(EncodePairs([][2]string{{":path", "/"}, {"x-api-key", ""}}), "x-api-key")
	f.Add(EncodePairs([][2]string{{"content-typf", "a"}, {"content-type", "application/grpc"}}), "content-type")
	f.Add(EncodePairs([][2]string{{"x-tollgate-shadow-limites", ""}, {"x-tollgate-shadow-limited", "r"}}), "x-tollgate-shadow-limited")
	f.Fuzz(func(t *testing.T, buf []byte, key string) {
		got, found := PairsValue(buf, key)
		want, wantFound := pairsValueReference(buf, key)
		if found != wantFound || string(got) != string(want) {
			t.Fatalf("PairsValue(%q) = %q, %v; the reference gives %q, %v", key, got, found, want, wantFound)
		}
		pairs, ok := DecodePairs(buf)
		if !ok {
			return
		}
		for _, p := range pairs {
			if p[0] == key {
				if !found || string(got) != p[1] {
					t.Fatalf("PairsValue(%q) = %q, %v; DecodePairs has %q", key, got, found, p[1])
				}
				return
			}
		}
		if found {
			t.Fatalf("PairsValue(%q) found %q in a map without the key", key, got)
		}
	})
}

// A template's encoding is AppendPairs' of its pairs with the value filled in, then the more
// pairs, whatever the names, values and what dst already holds.
func TestPairsTemplateIsAppendPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	text := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	list := func(min int) [][2]string {
		pairs := make([][2]string, min+rng.IntN(4))
		for i := range pairs {
			pairs[i] = [2]string{text(), text()}
		}
		return pairs
	}
	var dst []byte
	for range 2000 {
		pairs, more, value := list(1), list(0), text()
		template := NewPairsTemplate(pairs)
		prefix := []byte(text())
		filled := append([][2]string{{pairs[0][0], value}}, pairs[1:]...)
		want := AppendPairs(append([]byte(nil), prefix...), append(filled, more...))
		dst = template.Append(append(dst[:0], prefix...), value, more)
		if string(dst) != string(want) {
			t.Fatalf("template of %q with %q and %q:\n got %q\nwant %q", pairs, value, more, dst, want)
		}
	}
}

func ExamplePairsTemplate() {
	rejection := NewPairsTemplate([][2]string{{"retry-after", ""}, {"content-type", "text/plain"}})
	buf := rejection.Append(nil, "10", nil)
	pairs, _ := DecodePairs(buf)
	fmt.Println(pairs)
	// Output: [[retry-after 10] [content-type text/plain]]
}
