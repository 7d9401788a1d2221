package abi

import "testing"

func TestParseStatus(t *testing.T) {
	for value, want := range map[string]int{"200": 200, "401": 401, "599": 599, "100": 100, "000": 0} {
		if got, err := parseStatus([]byte(value)); err != nil || got != want {
			t.Errorf("parseStatus(%q) = %d, %v; want %d", value, got, err, want)
		}
	}
	for _, value := range []string{"", "20", "2000", "20x", " 200", "-20", "２00"} {
		if got, err := parseStatus([]byte(value)); err == nil {
			t.Errorf("parseStatus(%q) = %d, want an error", value, got)
		}
	}
}
