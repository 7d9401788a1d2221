package usage

// The JSON lexer: a byte-at-a-time state machine over one document, fed in pieces of any size.
// It validates the document (RFC 8259) and tells the fields layer (fields.go) about the keys and
// values of the objects that have a role.

// maxDepth is how many levels of nesting the lexer keeps the kind of (object or array); a
// container deeper than that is skimmed: strings and brackets are followed, nothing else is
// checked, and only the depth below maxDepth is counted.
const maxDepth = 64

// keyCap is the longest key (or type value) kept; longer ones match nothing.
const keyCap = len("cache_creation_input_tokens")

type lexState uint8

const (
	lxValue        lexState = iota // a value is expected
	lxValueOrClose                 // after '[': a value or ']'
	lxKeyOrClose                   // after '{': a key or '}'
	lxKey                          // after ',' in an object
	lxColon                        // after a key
	lxAfter                        // after a value in a container: ',' or its closing bracket
	lxString                       // in a string (a key or a value)
	lxEscape                       // after a backslash in a string
	lxHex                          // in the four hex digits of \u
	lxMinus                        // number: after '-'
	lxZero                         // number: integer part 0
	lxInt                          // number: in the integer part
	lxDot                          // number: after '.'
	lxFrac                         // number: in the fraction
	lxExpMark                      // number: after 'e'
	lxExpSign                      // number: after the exponent's sign
	lxExp                          // number: in the exponent
	lxLiteral                      // in true, false, null or [DONE]
	lxSkim                         // in a container deeper than maxDepth
	lxDone                         // the top-level value ended: only whitespace may follow
	lxError                        // unreadable: the rest of the document is ignored
)

// literals are the words lexed letter by letter; [DONE] is an event stream's last data.
var literals = [...]string{"true", "false", "null", "[DONE]"}

const litDone = 3

type lexer struct {
	_       [0]func() // never compared: no equality function in the module
	state   lexState
	depth   int    // containers open, at most maxDepth
	objects uint64 // bit d-1 is set when the container at depth d is an object
	roles   [4]role
	skim    int64 // containers open below maxDepth
	skimStr bool  // skimming inside a string
	skimEsc bool  // skimming after a backslash in a string

	pending pending // what the value after the last key means
	slot    uint8   // the figure slot of a valFigure value

	// The string being read: a key or a value, whether its bytes are kept (a key of an object
	// with a role, a type value), the bytes (n is keyCap+1 when longer), whether it had an escape.
	strIsKey bool
	keep     bool
	escaped  bool
	n        int
	buf      [keyCap]byte
	hexLeft  uint8

	lit, litPos uint8 // the literal being read and how much of it was
	figure      bool  // the number being read is a usage figure
	num         int64 // its value so far
}

func (lx *lexer) reset() {
	*lx = lexer{}
}

// isObject reports whether the innermost open container is an object.
func (lx *lexer) isObject() bool {
	return lx.objects&(1<<(lx.depth-1)) != 0
}

// stringSpecial marks the bytes that end a run of plain string content.
var stringSpecial = func() (t [256]bool) {
	for b := range 0x20 {
		t[b] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// feed lexes seg, the next piece of the document.
func (s *Scanner) feed(seg []byte) {
	for i := 0; i < len(seg); {
		switch s.lx.state {
		case lxString:
			i = s.stringRun(seg, i)
		case lxSkim:
			i = s.skimRun(seg, i)
		case lxError:
			return
		default:
			s.step(seg[i])
			i++
		}
	}
}

// stringRun reads string content from seg[i:] up to its end or an escape, and returns where it
// stopped.
func (s *Scanner) stringRun(seg []byte, i int) int {
	lx := &s.lx
	for ; i < len(seg); i++ {
		b := seg[i]
		if !stringSpecial[b] {
			if lx.keep {
				lx.keepByte(b)
			}
			continue
		}
		switch b {
		case '"':
			s.stringEnd()
		case '\\':
			lx.state = lxEscape
		default:
			s.fail(reasonMalformed) // a control character
		}
		return i + 1
	}
	return i
}

func (lx *lexer) keepByte(b byte) {
	if lx.n < keyCap {
		lx.buf[lx.n] = b
	}
	if lx.n <= keyCap {
		lx.n++
	}
}

// kept is the string read, nil when it cannot match anything (too long, or escaped).
func (lx *lexer) kept() []byte {
	if lx.escaped || lx.n > keyCap {
		return nil
	}
	return lx.buf[:lx.n]
}

func (s *Scanner) stringStart(isKey, keep bool) {
	lx := &s.lx
	lx.state, lx.strIsKey, lx.keep, lx.escaped, lx.n = lxString, isKey, keep, false, 0
}

func (s *Scanner) stringEnd() {
	lx := &s.lx
	if lx.strIsKey {
		lx.state = lxColon
		if lx.keep {
			s.keyRead(lx.kept())
		} else {
			lx.pending = valNone
		}
		return
	}
	if lx.keep {
		s.typeRead(lx.kept())
	}
	s.valueEnd()
}

// skimRun follows seg[i:] inside a container deeper than maxDepth until it closes.
func (s *Scanner) skimRun(seg []byte, i int) int {
	lx := &s.lx
	for ; i < len(seg); i++ {
		b := seg[i]
		switch {
		case lx.skimStr:
			if lx.skimEsc {
				lx.skimEsc = false
			} else if b == '\\' {
				lx.skimEsc = true
			} else if b == '"' {
				lx.skimStr = false
			}
		case b == '"':
			lx.skimStr = true
		case b == '[' || b == '{':
			lx.skim++
		case b == ']' || b == '}':
			if lx.skim--; lx.skim == 0 {
				lx.state = lxAfter
				return i + 1
			}
		}
	}
	return i
}

// step lexes one byte outside string content.
func (s *Scanner) step(b byte) {
	switch st := s.lx.state; {
	case st >= lxMinus && st <= lxExp:
		s.numberByte(b)
	case st == lxLiteral:
		s.literalByte(b)
	case st == lxEscape || st == lxHex:
		s.escapeByte(b)
	default:
		s.structural(b)
	}
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r'
}

// structural lexes a byte between tokens.
func (s *Scanner) structural(b byte) {
	if isSpace(b) {
		return
	}
	lx := &s.lx
	switch st := lx.state; st {
	case lxValue, lxValueOrClose:
		if b == ']' && st == lxValueOrClose {
			s.close()
			return
		}
		s.valueStart(b)
	case lxKeyOrClose, lxKey:
		if b == '}' && st == lxKeyOrClose {
			s.close()
			return
		}
		if b != '"' {
			s.fail(reasonMalformed)
			return
		}
		s.stringStart(true, s.role() != roleNone)
	case lxColon:
		if b != ':' {
			s.fail(reasonMalformed)
			return
		}
		lx.state = lxValue
	case lxAfter:
		object := lx.isObject()
		switch {
		case b == ',' && object:
			lx.state = lxKey
		case b == ',':
			lx.state, lx.pending = lxValue, valNone
		case b == '}' && object, b == ']' && !object:
			s.close()
		default:
			s.fail(reasonMalformed)
		}
	default: // lxDone
		s.fail(reasonMalformed)
	}
}

// valueStart lexes the first byte of a value, whose meaning the key before it gave.
func (s *Scanner) valueStart(b byte) {
	lx := &s.lx
	p := lx.pending
	if lx.depth == 0 {
		switch {
		case b == '{':
			s.open(true, roleTop)
		case b == '[' && s.stream:
			lx.state, lx.lit, lx.litPos = lxLiteral, litDone, 1
		default:
			s.fail(reasonNotObject)
		}
		return
	}
	if p == valUsage || p == valMsgUsage {
		if b != '{' && b != 'n' {
			s.fail(reasonUsageNotObject)
			return
		}
	} else if p == valFigure && b != 'n' && b != '-' && (b < '0' || b > '9') {
		s.fail(reasonFigureNotNumber)
		return
	}
	switch {
	case b == '{' || b == '[':
		s.open(b == '{', s.objectRole(p))
	case b == '"':
		s.stringStart(false, p == valType)
	case b == 't' || b == 'f' || b == 'n':
		lx.state, lx.litPos = lxLiteral, 1
		lx.lit = literalOf(b)
	case b == '-':
		if p == valFigure {
			s.fail(reasonNegative)
			return
		}
		lx.state, lx.figure = lxMinus, false
	case b >= '0' && b <= '9':
		lx.state, lx.figure, lx.num = lxInt, p == valFigure, int64(b-'0')
		if b == '0' {
			lx.state = lxZero
		}
	default:
		s.fail(reasonMalformed)
	}
}

// literalOf is the literal starting with b: true, false or null.
func literalOf(b byte) uint8 {
	switch b {
	case 't':
		return 0
	case 'f':
		return 1
	}
	return 2
}

// open enters a container; one deeper than maxDepth is skimmed.
func (s *Scanner) open(object bool, r role) {
	lx := &s.lx
	if lx.depth == maxDepth {
		lx.state, lx.skim, lx.skimStr, lx.skimEsc = lxSkim, 1, false, false
		return
	}
	lx.depth++
	bit := uint64(1) << (lx.depth - 1)
	lx.objects &^= bit
	if object {
		lx.objects |= bit
		lx.state = lxKeyOrClose
	} else {
		lx.state = lxValueOrClose
	}
	if lx.depth < len(lx.roles) {
		lx.roles[lx.depth] = r
	}
	lx.pending = valNone
}

func (s *Scanner) close() {
	s.lx.depth--
	s.valueEnd()
}

// valueEnd follows the end of a value.
func (s *Scanner) valueEnd() {
	if s.lx.depth == 0 {
		s.lx.state = lxDone
	} else {
		s.lx.state = lxAfter
	}
}

func (s *Scanner) literalByte(b byte) {
	lx := &s.lx
	word := literals[lx.lit]
	if b != word[lx.litPos] {
		s.fail(reasonMalformed)
		return
	}
	if lx.litPos++; int(lx.litPos) == len(word) {
		s.ev.done = lx.lit == litDone
		s.valueEnd()
	}
}

func (s *Scanner) escapeByte(b byte) {
	lx := &s.lx
	lx.escaped = true
	if lx.state == lxHex {
		if !isHex(b) {
			s.fail(reasonMalformed)
			return
		}
		if lx.hexLeft--; lx.hexLeft == 0 {
			lx.state = lxString
		}
		return
	}
	switch b {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		lx.state = lxString
	case 'u':
		lx.state, lx.hexLeft = lxHex, 4
	default:
		s.fail(reasonMalformed)
	}
}

func isHex(b byte) bool {
	return b-'0' <= 9 || (b|0x20)-'a' <= 5
}

func isDigit(b byte) bool {
	return b-'0' <= 9
}

// numberByte lexes a byte in or just after a number.
func (s *Scanner) numberByte(b byte) {
	lx := &s.lx
	digit := isDigit(b)
	switch st := lx.state; {
	case digit && (st == lxMinus || st == lxInt):
		lx.state = lxInt
		if b == '0' && st == lxMinus {
			lx.state = lxZero
		}
		if lx.figure {
			if lx.num = lx.num*10 + int64(b-'0'); lx.num > MaxTokens {
				s.fail(reasonTooLarge)
			}
		}
	case digit && (st == lxDot || st == lxFrac):
		lx.state = lxFrac
	case digit && st >= lxExpMark:
		lx.state = lxExp
	case b == '.' && (st == lxZero || st == lxInt):
		lx.state = lxDot
		s.notWhole()
	case (b == 'e' || b == 'E') && (st == lxZero || st == lxInt || st == lxFrac):
		lx.state = lxExpMark
		s.notWhole()
	case (b == '+' || b == '-') && st == lxExpMark:
		lx.state = lxExpSign
	case st == lxZero || st == lxInt || st == lxFrac || st == lxExp:
		s.numberEnd()
		s.structural(b)
	default:
		s.fail(reasonMalformed)
	}
}

// notWhole refuses a usage figure with a fraction or an exponent.
func (s *Scanner) notWhole() {
	if s.lx.figure {
		s.fail(reasonFraction)
	}
}

func (s *Scanner) numberEnd() {
	lx := &s.lx
	if lx.figure {
		f := s.usageFigures()
		f.val[lx.slot] = lx.num
		f.set |= 1 << lx.slot
	}
	s.valueEnd()
}
