package duration

// Format writes d as time.Duration's String does: "0s"; below a second in the largest of ns,
// µs and ms that is not above it ("1.5µs", "20ms"); otherwise hours, minutes and seconds with
// their fraction, leading zero units left out ("1.5s", "2m0s", "1h0m0.25s").
func Format(d Duration) string {
	if d == 0 {
		return "0s"
	}
	var buf [32]byte
	i := len(buf)
	magnitude := uint64(d)
	if d < 0 {
		magnitude = -magnitude // also right for the most negative value
	}
	if magnitude < uint64(Second) {
		var digits int
		i--
		buf[i] = 's'
		switch {
		case magnitude < uint64(Microsecond):
			i--
			buf[i] = 'n'
		case magnitude < uint64(Millisecond):
			digits = 3
			i -= 2
			copy(buf[i:], "µ") // U+00B5, two bytes
		default:
			digits = 6
			i--
			buf[i] = 'm'
		}
		i = putFraction(buf[:i], magnitude, digits, &magnitude)
		i = putInteger(buf[:i], magnitude)
	} else {
		i--
		buf[i] = 's'
		i = putFraction(buf[:i], magnitude, 9, &magnitude)
		i = putInteger(buf[:i], magnitude%60) // seconds
		if minutes := magnitude / 60; minutes > 0 {
			i--
			buf[i] = 'm'
			i = putInteger(buf[:i], minutes%60)
			if hours := minutes / 60; hours > 0 {
				i--
				buf[i] = 'h'
				i = putInteger(buf[:i], hours)
			}
		}
	}
	if d < 0 {
		i--
		buf[i] = '-'
	}
	return string(buf[i:])
}

// putFraction writes the last digits decimal digits of v, trailing zeros and then a lone point
// dropped, at the end of buf; it returns where they begin and leaves v's integer part in whole.
func putFraction(buf []byte, v uint64, digits int, whole *uint64) int {
	i := len(buf)
	significant := false
	for range digits {
		digit := byte(v % 10)
		significant = significant || digit != 0
		if significant {
			i--
			buf[i] = '0' + digit
		}
		v /= 10
	}
	if significant {
		i--
		buf[i] = '.'
	}
	*whole = v
	return i
}

// putInteger writes v in decimal at the end of buf and returns where it begins.
func putInteger(buf []byte, v uint64) int {
	i := len(buf)
	for {
		i--
		buf[i] = '0' + byte(v%10)
		v /= 10
		if v == 0 {
			return i
		}
	}
}
