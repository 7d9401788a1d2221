package usage

// Source is the API whose response is read.
type Source uint8

const (
	OpenAI    Source = iota + 1 // OpenAI chat/completions and responses-compatible JSON
	Anthropic                   // Anthropic Messages API
)

// Count is which of the response's tokens are charged.
type Count uint8

const (
	Total  Count = iota // input + output
	Input               // prompt / input tokens only
	Output              // completion / output tokens only
)

// MaxTokens is the largest usage figure accepted, and the largest usage reported: a sum above it
// is unreadable, like a figure above it.
const MaxTokens = 1 << 53

// Scanner reads one response body. Its zero value is unusable until Reset; it holds no pointers
// into the chunks it is given.
type Scanner struct {
	src    Source
	count  Count
	stream bool
	bad    bool // Reset with an unknown Source or Count

	lx  lexer
	ev  event    // the JSON document being read: the body, or the current event's data
	sse sseState // where in the event stream's lines the scanner is

	// What the events dispatched so far reported (event streams only): the figures, and whether
	// any usage object was seen (OpenAI); err is the first problem of a dispatched event.
	got figures
	has bool
	err reason
	// A Scanner is never compared: comparable, it would cost the module an equality function.
	_ [0]func()
}

// Reset prepares s for a new response: stream is true for a text/event-stream body (server-sent
// events), false for a JSON body.
func (s *Scanner) Reset(src Source, count Count, stream bool) {
	*s = Scanner{src: src, count: count, stream: stream}
	s.bad = (src != OpenAI && src != Anthropic) || count > Output
	s.lx.reset()
}

// Write scans the next chunk of the body. Chunks may split the body anywhere (inside a key, a
// number, an escape, a "data:" line, between \r and \n).
func (s *Scanner) Write(chunk []byte) {
	switch {
	case s.bad || s.src == 0:
	case s.stream:
		s.writeEvents(chunk)
	case s.ev.err == 0:
		s.feed(chunk)
	}
}

// Tokens reports the usage of the whole body seen so far, once the body ended: ok is false when
// it cannot be read (no usage, malformed, truncated JSON, a bad number...). Reason says why.
func (s *Scanner) Tokens() (n int64, ok bool) {
	n, r := s.result()
	return n, r == 0
}

// Reason explains, for a debug log, why Tokens reports ok false; it is empty when ok is true.
func (s *Scanner) Reason() string {
	_, r := s.result()
	return r.String()
}

func (s *Scanner) result() (int64, reason) {
	if s.bad || s.src == 0 {
		return 0, reasonNotReset
	}
	if s.stream {
		if s.err != 0 {
			return 0, s.err
		}
		return s.figure(s.got, s.has)
	}
	if r := s.documentEnd(); r != 0 {
		return 0, r
	}
	got, has := s.src.commit(s.stream, &s.ev, figures{}, false)
	return s.figure(got, has)
}

// documentEnd is what is wrong with the JSON document read so far, if it ended here.
func (s *Scanner) documentEnd() reason {
	switch {
	case s.ev.err != 0:
		return s.ev.err
	case s.lx.state == lxDone:
		return 0
	case s.lx.state == lxValue && s.lx.depth == 0:
		return reasonEmpty
	}
	return reasonTruncated
}

// figure is the count's figure from what the usage objects reported.
func (s *Scanner) figure(f figures, has bool) (int64, reason) {
	if !has {
		return 0, reasonNoUsage
	}
	in, inOK := f.input(s.src)
	out, outOK := f.get(slotOut)
	switch s.count {
	case Input:
		if !inOK {
			return 0, reasonNoInput
		}
		out = 0
	case Output:
		if !outOK {
			return 0, reasonNoOutput
		}
		in = 0
	default:
		if total, ok := f.get(slotTotal); ok && s.src == OpenAI {
			return total, 0
		}
		if !inOK {
			return 0, reasonNoInput
		}
		if !outOK {
			return 0, reasonNoOutput
		}
	}
	if in+out > MaxTokens {
		return 0, reasonTooLarge
	}
	return in + out, 0
}

// WholeNumber parses a usage header or trailer value: ASCII digits only (surrounding spaces/tabs
// allowed), at most 2^53; ok false otherwise.
func WholeNumber(s string) (n int64, ok bool) {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if i == j {
		return 0, false
	}
	for ; i < j; i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		if n = n*10 + int64(d); n > MaxTokens {
			return 0, false
		}
	}
	return n, true
}
