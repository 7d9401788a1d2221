package config

import (
	"strconv"
	"strings"
)

// wholeNumberVerdict is the outcome of reading a JSON number literal as a
// whole number within bounds.
type wholeNumberVerdict uint8

const (
	wholeNumberOK wholeNumberVerdict = iota
	wholeNumberFraction
	wholeNumberTooSmall
	wholeNumberTooLarge
)

// parseWholeNumber reads a JSON number literal exactly, in decimal, and
// checks that it is a whole number from lowest to highest (highest below 10^18).
//
// Exact decimal reading matters because Istio passes pluginConfig through
// protobuf Struct, which turns 3 into 3.0 or 3e0; those must be accepted,
// while 3.0000000000000001 is a fraction even though it rounds to 3 as a
// float64. It also means huge literals such as 1e400 are simply too large
// rather than an infinity or a parse error.
func parseWholeNumber(literal string, lowest, highest int64) (int64, wholeNumberVerdict) {
	negative := strings.HasPrefix(literal, "-")
	literal = strings.TrimPrefix(literal, "-")

	mantissa, exponentText := literal, ""
	if i := strings.IndexAny(literal, "eE"); i >= 0 {
		mantissa, exponentText = literal[:i], literal[i+1:]
	}
	integerDigits, fractionDigits := mantissa, ""
	if i := strings.IndexByte(mantissa, '.'); i >= 0 {
		integerDigits, fractionDigits = mantissa[:i], mantissa[i+1:]
	}

	// The value is digits × 10^exponent.
	digits := withoutLeadingZeros(integerDigits + fractionDigits)
	if digits == "" {
		return 0, rangeVerdict(0, lowest, highest)
	}
	exponent := parseExponent(exponentText) - int64(len(fractionDigits))
	trimmed := withoutTrailingZeros(digits)
	exponent += int64(len(digits) - len(trimmed))
	digits = trimmed

	// digits now ends in a non-zero digit, so a negative exponent leaves a
	// fractional part.
	if exponent < 0 {
		return 0, wholeNumberFraction
	}
	if negative {
		return 0, wholeNumberTooSmall
	}
	if int64(len(digits))+exponent > 18 {
		return 0, wholeNumberTooLarge
	}
	value, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, wholeNumberTooLarge
	}
	for ; exponent > 0; exponent-- {
		value *= 10
	}
	return value, rangeVerdict(value, lowest, highest)
}

// parseExponent reads the exponent of a number literal. Exponents too large
// for int32 are clamped: any non-zero mantissa is then far outside every
// range this package accepts, in the right direction.
func parseExponent(text string) int64 {
	if text == "" {
		return 0
	}
	exponent, err := strconv.ParseInt(text, 10, 32)
	if err != nil {
		if strings.HasPrefix(text, "-") {
			return -1 << 31
		}
		return 1 << 31
	}
	return exponent
}

func rangeVerdict(value, lowest, highest int64) wholeNumberVerdict {
	if value < lowest {
		return wholeNumberTooSmall
	}
	if value > highest {
		return wholeNumberTooLarge
	}
	return wholeNumberOK
}

// withoutLeadingZeros and withoutTrailingZeros are strings.TrimLeft and strings.TrimRight with
// the cutset "0", written out: those would link their Unicode cutsets' code into the module.
func withoutLeadingZeros(s string) string {
	for s != "" && s[0] == '0' {
		s = s[1:]
	}
	return s
}

func withoutTrailingZeros(s string) string {
	for s != "" && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	return s
}
