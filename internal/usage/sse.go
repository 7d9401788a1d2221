package usage

// The event stream's lines (the HTML Living Standard's text/event-stream): each data line's value
// goes to the JSON lexer as it arrives; a blank line dispatches the event.

type sseStep uint8

const (
	sseBOM0      sseStep = iota // the stream's first byte: maybe a byte order mark
	sseBOM1                     // after its first byte
	sseBOM2                     // after its second byte
	sseLineStart                // at the start of a line
	sseName                     // in the field name, which so far is a prefix of "data"
	sseColon                    // just after "data:", where one space is skipped
	sseData                     // in a data line's value
	sseIgnore                   // in a comment or another field's line
)

type sseState struct {
	step    sseStep
	namePos uint8 // bytes of "data" matched
	skipLF  bool  // the last line ended with \r: a \n next is part of that line end
	hasData bool  // the event has a data line
}

// writeEvents scans chunk, the next piece of the event stream.
func (s *Scanner) writeEvents(chunk []byte) {
	for i := 0; i < len(chunk); {
		if s.sse.skipLF {
			s.sse.skipLF = false
			if chunk[i] == '\n' {
				i++
				continue
			}
		}
		switch s.sse.step {
		case sseData, sseIgnore:
			end := i
			for end < len(chunk) && chunk[end] != '\n' && chunk[end] != '\r' {
				end++
			}
			if s.sse.step == sseData && s.err == 0 && s.ev.err == 0 {
				s.feed(chunk[i:end])
			}
			if i = end; i < len(chunk) {
				s.lineEnd(chunk[i])
				i++
			}
		default:
			if s.lineByte(chunk[i]) {
				i++
			}
		}
	}
}

// lineByte reads a byte at the start of a line, in its field name or just after "data:", and
// reports whether it used it (false: read it again in the step it set).
func (s *Scanner) lineByte(b byte) bool {
	sse := &s.sse
	switch sse.step {
	case sseBOM0:
		if b == 0xEF {
			sse.step = sseBOM1
			return true
		}
		sse.step = sseLineStart
		return false
	case sseBOM1, sseBOM2:
		// A line starting with part of a mark names a field that is not data.
		if sse.step == sseBOM1 && b == 0xBB {
			sse.step = sseBOM2
			return true
		}
		if sse.step == sseBOM2 && b == 0xBF {
			sse.step = sseLineStart
			return true
		}
		sse.step = sseIgnore
		return false
	case sseColon:
		sse.step = sseData
		return b == ' '
	}
	if b == '\n' || b == '\r' {
		s.lineEnd(b)
		return true
	}
	switch {
	case sse.step == sseLineStart && b == 'd':
		sse.step, sse.namePos = sseName, 1
	case sse.step == sseName && sse.namePos < 4 && b == "data"[sse.namePos]:
		sse.namePos++
	case sse.step == sseName && sse.namePos == 4 && b == ':':
		s.dataLine()
		sse.step = sseColon
	default:
		sse.step = sseIgnore // a comment, another field, or a field with another name
	}
	return true
}

// lineEnd ends a line on b, \n or \r.
func (s *Scanner) lineEnd(b byte) {
	sse := &s.sse
	sse.skipLF = b == '\r'
	switch {
	case sse.step == sseLineStart:
		s.dispatch()
	case sse.step == sseName && sse.namePos == 4:
		s.dataLine() // "data" alone: a data line with an empty value
	}
	sse.step = sseLineStart
}

// dataLine starts a data line: the data of one event is its data lines joined by \n.
func (s *Scanner) dataLine() {
	if s.sse.hasData && s.err == 0 && s.ev.err == 0 {
		s.feed(lineFeed[:])
	}
	s.sse.hasData = true
}

var lineFeed = [1]byte{'\n'}

// dispatch ends an event: what its data reported is committed, or its problem makes the
// response unreadable; data that is only whitespace or [DONE] reports nothing.
func (s *Scanner) dispatch() {
	if !s.sse.hasData {
		return
	}
	if s.err == 0 {
		switch r := s.documentEnd(); {
		case r == reasonTruncated:
			s.err = reasonEventTruncated
		case r == reasonEmpty || r == 0 && s.ev.done:
		case r != 0:
			s.err = r
		default:
			s.got, s.has = s.src.commit(true, &s.ev, s.got, s.has)
		}
	}
	s.sse.hasData = false
	s.ev = event{}
	s.lx.reset()
}
