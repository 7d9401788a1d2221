package wire

import (
	"reflect"
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
