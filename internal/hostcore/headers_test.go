package hostcore

import (
	"fmt"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

func TestHeaderMapOperations(t *testing.T) {
	base := [][2]string{{":path", "/"}, {"x-a", "1"}, {"x-b", "2"}, {"x-a", "3"}}
	tests := []struct {
		name string
		op   func([][2]string) [][2]string
		want string
	}{
		{"add appends, lower-cased", func(h [][2]string) [][2]string { return AddHeader(h, "X-A", "4") },
			`[[:path /] [x-a 1] [x-b 2] [x-a 3] [x-a 4]]`},
		{"replace drops every value and appends", func(h [][2]string) [][2]string { return ReplaceHeader(h, "X-A", "5") },
			`[[:path /] [x-b 2] [x-a 5]]`},
		{"replace of an absent name adds it", func(h [][2]string) [][2]string { return ReplaceHeader(h, "x-c", "6") },
			`[[:path /] [x-a 1] [x-b 2] [x-a 3] [x-c 6]]`},
		{"remove drops every value", func(h [][2]string) [][2]string { return RemoveHeader(h, "x-a") },
			`[[:path /] [x-b 2]]`},
		{"remove of an absent name", func(h [][2]string) [][2]string { return RemoveHeader(h, "x-z") },
			`[[:path /] [x-a 1] [x-b 2] [x-a 3]]`},
		{"set keeps the first place", func(h [][2]string) [][2]string { return SetHeader(h, "x-a", "7") },
			`[[:path /] [x-a 7] [x-b 2]]`},
		{"lower keys", func(h [][2]string) [][2]string { return LowerKeys([][2]string{{"X-Up", "V"}}) },
			`[[x-up V]]`},
	}
	for _, tt := range tests {
		h := append([][2]string(nil), base...)
		if got := fmt.Sprint(tt.op(h)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
		if fmt.Sprint(h) != fmt.Sprint(base) {
			t.Errorf("%s changed its argument: %v", tt.name, h)
		}
	}
	for _, tt := range []struct {
		name, want string
		found      bool
		first      bool
	}{
		{"x-a", "1", true, true}, {"x-a", "1,3", true, false}, {"x-z", "", false, true}, {"X-A", "", false, true},
	} {
		get := HeaderValue
		if !tt.first {
			get = JoinedHeaderValues
		}
		if got, found := get(base, tt.name); got != tt.want || found != tt.found {
			t.Errorf("%s (first %v) = %q, %v; want %q, %v", tt.name, tt.first, got, found, tt.want, tt.found)
		}
	}
}

// Pairs past cpp-host's limits are no map at all.
func TestDecodePairsLimits(t *testing.T) {
	many := make([][2]string, maxPairsCount+1)
	for i := range many {
		many[i] = [2]string{"k", "v"}
	}
	for _, tt := range []struct {
		name  string
		raw   []byte
		count int
		ok    bool
	}{
		{"one pair", wire.EncodePairs([][2]string{{"a", "b"}}), 1, true},
		{"at the count limit", wire.EncodePairs(many[:maxPairsCount]), maxPairsCount, true},
		{"past the count limit", wire.EncodePairs(many), 0, false},
		{"past the size limit", wire.EncodePairs([][2]string{{"a", string(make([]byte, maxPairsBytes))}}), 0, false},
		{"malformed", []byte{1, 2, 3}, 0, false},
	} {
		pairs, ok := DecodePairs(tt.raw)
		if len(pairs) != tt.count || ok != tt.ok {
			t.Errorf("%s: %d pairs, %v; want %d, %v", tt.name, len(pairs), ok, tt.count, tt.ok)
		}
	}
}
