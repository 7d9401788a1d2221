package duration

import "errors"

// errSyntax is Parse's error; callers word their own message from the text they passed.
var errSyntax = errors.New("not a duration")

// unitNanos is the length of a unit Parse knows, in nanoseconds.
func unitNanos(unit string) (uint64, bool) {
	switch unit {
	case "ns":
		return 1, true
	case "us", "µs", "μs": // U+00B5 (micro sign) and U+03BC (Greek mu)
		return 1e3, true
	case "ms":
		return 1e6, true
	case "s":
		return 1e9, true
	case "m":
		return 60e9, true
	case "h":
		return 3600e9, true
	}
	return 0, false
}

// Parse reads a duration as time.ParseDuration does: an optional sign and a sequence of
// decimal numbers, each with an optional fraction and a unit ("ns", "us" or "µs", "ms", "s",
// "m", "h"), such as "300ms", "-1.5h" or "2h45m"; "0" needs no unit. It accepts exactly what
// time.ParseDuration accepts and returns the same value, its fractions rounded the same way.
func Parse(s string) (Duration, error) {
	negative := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		negative = s[0] == '-'
		s = s[1:]
	}
	if s == "0" {
		return 0, nil
	}
	if s == "" {
		return 0, errSyntax
	}
	var total uint64
	for s != "" {
		if s[0] != '.' && (s[0] < '0' || s[0] > '9') {
			return 0, errSyntax
		}
		whole, rest, ok := wholePart(s)
		if !ok {
			return 0, errSyntax
		}
		hasWhole := len(rest) < len(s)
		s = rest
		var fraction uint64
		scale, hasFraction := 1.0, false
		if s != "" && s[0] == '.' {
			fraction, scale, rest = fractionPart(s[1:])
			hasFraction = len(rest) < len(s)-1
			s = rest
		}
		if !hasWhole && !hasFraction {
			return 0, errSyntax // a lone "."
		}
		end := 0
		for end < len(s) && s[end] != '.' && (s[end] < '0' || s[end] > '9') {
			end++
		}
		unit, known := unitNanos(s[:end])
		if !known {
			return 0, errSyntax // a missing or unknown unit
		}
		s = s[end:]
		if whole > 1<<63/unit {
			return 0, errSyntax
		}
		value := whole * unit
		if fraction > 0 {
			// float64 as time.ParseDuration computes it, so that both round alike.
			value += uint64(float64(fraction) * (float64(unit) / scale))
			if value > 1<<63 {
				return 0, errSyntax
			}
		}
		total += value
		if total > 1<<63 {
			return 0, errSyntax
		}
	}
	if negative {
		return -Duration(total), nil
	}
	if total > 1<<63-1 {
		return 0, errSyntax
	}
	return Duration(total), nil
}

// wholePart reads the leading decimal digits of s; ok is false when their value exceeds 1<<63.
func wholePart(s string) (value uint64, rest string, ok bool) {
	i := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if value > 1<<63/10 {
			return 0, "", false
		}
		value = value*10 + uint64(s[i]-'0')
		if value > 1<<63 {
			return 0, "", false
		}
	}
	return value, s[i:], true
}

// fractionPart reads the digits after a decimal point: their value and 10 to the power of how
// many of them it holds. Digits beyond what an int64 holds are read and ignored.
func fractionPart(s string) (value uint64, scale float64, rest string) {
	scale = 1
	full := false
	i := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if full {
			continue
		}
		if value > (1<<63-1)/10 {
			full = true
			continue
		}
		next := value*10 + uint64(s[i]-'0')
		if next > 1<<63 {
			full = true
			continue
		}
		value = next
		scale *= 10
	}
	return value, scale, s[i:]
}
