package usage

// What the keys of the JSON document mean: the objects whose keys are looked at (roles), the
// usage figures a usage object holds, and how an event's figures are committed.

// role is what an object at depth 1 to 3 is; deeper objects, and objects under other keys, are
// roleNone and their keys are not even kept.
type role uint8

const (
	roleNone     role = iota
	roleTop           // the document's top-level object
	roleUsage         // the top-level object's usage
	roleMessage       // the top-level object's message (Anthropic) or response (OpenAI Responses API)
	roleMsgUsage      // that object's usage
)

// pending is what the value after the key just read means.
type pending uint8

const (
	valNone pending = iota
	valUsage
	valMessage
	valMsgUsage
	valType
	valFigure
)

// Figure slots. OpenAI's third figure is total_tokens, Anthropic's are its cache figures.
const (
	slotIn          = 0 // prompt_tokens (input_tokens in the Responses API); input_tokens
	slotOut         = 1 // completion_tokens (output_tokens); output_tokens
	slotTotal       = 2 // total_tokens (OpenAI)
	slotCacheCreate = 2 // cache_creation_input_tokens (Anthropic)
	slotCacheRead   = 3 // cache_read_input_tokens (Anthropic)
	noSlot          = 0xff
)

// figures are the figures of one usage object: set marks those that held a number, seen those
// whose key appeared (a second appearance makes the usage unreadable).
type figures struct {
	val       [4]int64
	set, seen uint8
}

func (f *figures) get(slot uint8) (int64, bool) {
	return f.val[slot], f.set&(1<<slot) != 0
}

// input is the input figure: Anthropic's is input_tokens plus the cache figures present (the
// Messages API counts tokens read from or written to the cache apart from input_tokens).
func (f *figures) input(src Source) (int64, bool) {
	in, ok := f.get(slotIn)
	if src == Anthropic {
		create, _ := f.get(slotCacheCreate)
		read, _ := f.get(slotCacheRead)
		in += create + read
	}
	return in, ok
}

// update copies into f the figures of from that are set and in mask.
func (f *figures) update(from *figures, mask uint8) {
	for slot := range f.val {
		if bit := uint8(1) << slot; from.set&mask&bit != 0 {
			f.val[slot] = from.val[slot]
			f.set |= bit
		}
	}
}

// eventType is the top-level "type" of an Anthropic event.
type eventType uint8

const (
	typeOther eventType = iota
	typeMessageStart
	typeMessageDelta
)

// Keys of the top-level object whose repetition is refused.
const (
	topUsage = 1 << iota
	topType
	topMessage
)

// event is what one JSON document (the body, or one event's data) reported.
type event struct {
	top, msg     figures // the top-level usage, and the message's (response's) usage
	topIsObject  bool    // the top-level usage was an object (not null)
	msgIsObject  bool
	topKeys      uint8 // topUsage, topType, topMessage seen
	msgUsageSeen bool
	kind         eventType
	done         bool // the data was [DONE]
	err          reason
}

// commit merges what the document ev reported into got and has, the figures reported so far.
// OpenAI: the last usage object counts (the top-level one, else the response's). Anthropic's JSON
// body: its usage. Anthropic's events: message_start's message.usage gives the input figures,
// each message_delta's usage replaces the figures it holds (they are cumulative).
func (src Source) commit(stream bool, ev *event, got figures, has bool) (figures, bool) {
	switch {
	case ev.topIsObject && (src == OpenAI || !stream):
		return ev.top, true
	case src == OpenAI:
		if ev.msgIsObject {
			return ev.msg, true
		}
	case ev.kind == typeMessageStart && ev.msgIsObject:
		got.update(&ev.msg, 1<<slotIn|1<<slotCacheCreate|1<<slotCacheRead)
		return got, true
	case ev.kind == typeMessageDelta && ev.topIsObject:
		got.update(&ev.top, 0xff)
		return got, true
	}
	return got, has
}

// figureSlot is the slot of a usage object's key, or noSlot.
func (src Source) figureSlot(key []byte) uint8 {
	switch string(key) {
	case "input_tokens":
		return slotIn
	case "output_tokens":
		return slotOut
	}
	if src == OpenAI {
		switch string(key) {
		case "prompt_tokens":
			return slotIn
		case "completion_tokens":
			return slotOut
		case "total_tokens":
			return slotTotal
		}
		return noSlot
	}
	switch string(key) {
	case "cache_creation_input_tokens":
		return slotCacheCreate
	case "cache_read_input_tokens":
		return slotCacheRead
	}
	return noSlot
}

// role is the role of the object the scanner is in.
func (s *Scanner) role() role {
	if s.lx.depth < len(s.lx.roles) {
		return s.lx.roles[s.lx.depth]
	}
	return roleNone
}

// keyRead classifies the key just read in an object with a role: what its value will mean.
func (s *Scanner) keyRead(key []byte) {
	s.lx.pending = valNone
	switch s.role() {
	case roleTop:
		s.topKey(key)
	case roleMessage:
		if string(key) == "usage" {
			if s.ev.msgUsageSeen {
				s.fail(reasonRepeated)
				return
			}
			s.ev.msgUsageSeen = true
			s.lx.pending = valMsgUsage
		}
	case roleUsage, roleMsgUsage:
		slot := s.src.figureSlot(key)
		if slot == noSlot {
			return
		}
		f := s.usageFigures()
		if f.seen&(1<<slot) != 0 {
			s.fail(reasonRepeated)
			return
		}
		f.seen |= 1 << slot
		s.lx.pending, s.lx.slot = valFigure, slot
	}
}

func (s *Scanner) topKey(key []byte) {
	var bit uint8
	var next pending
	switch string(key) {
	case "usage":
		bit, next = topUsage, valUsage
	case "type":
		bit, next = topType, valType
	case "message", "response":
		// The object holding the usage in Anthropic's message_start and in the Responses API's
		// stream events.
		if (string(key) == "message") != (s.src == Anthropic) {
			return
		}
		bit, next = topMessage, valMessage
	default:
		return
	}
	if !s.stream && next != valUsage || s.src == OpenAI && next == valType {
		return
	}
	if s.ev.topKeys&bit != 0 {
		s.fail(reasonRepeated)
		return
	}
	s.ev.topKeys |= bit
	s.lx.pending = next
}

// usageFigures are the figures of the usage object the scanner is in.
func (s *Scanner) usageFigures() *figures {
	if s.role() == roleMsgUsage {
		return &s.ev.msg
	}
	return &s.ev.top
}

// objectRole is the role of an object that is the value of a key meaning p.
func (s *Scanner) objectRole(p pending) role {
	switch p {
	case valUsage:
		s.ev.topIsObject = true
		return roleUsage
	case valMessage:
		return roleMessage
	case valMsgUsage:
		s.ev.msgIsObject = true
		return roleMsgUsage
	}
	return roleNone
}

// typeRead records the top-level type string just read.
func (s *Scanner) typeRead(value []byte) {
	switch string(value) {
	case "message_start":
		s.ev.kind = typeMessageStart
	case "message_delta":
		s.ev.kind = typeMessageDelta
	}
}

// fail makes the document unreadable for reason r and stops reading it.
func (s *Scanner) fail(r reason) {
	if s.ev.err == 0 {
		s.ev.err = r
	}
	s.lx.state = lxError
}

// reason is why a body's usage is unreadable.
type reason uint8

const (
	reasonNone reason = iota
	reasonNotReset
	reasonEmpty
	reasonMalformed
	reasonNotObject
	reasonTruncated
	reasonEventTruncated
	reasonUsageNotObject
	reasonFigureNotNumber
	reasonNegative
	reasonFraction
	reasonTooLarge
	reasonRepeated
	reasonNoUsage
	reasonNoInput
	reasonNoOutput
)

func (r reason) String() string {
	switch r {
	case reasonNone:
		return ""
	case reasonNotReset:
		return "the scanner was not Reset with a known Source and Count"
	case reasonEmpty:
		return "the body is empty"
	case reasonMalformed:
		return "the body is not valid JSON"
	case reasonNotObject:
		return "the JSON is not an object"
	case reasonTruncated:
		return "the body ended inside its JSON object"
	case reasonEventTruncated:
		return "an event's data ended inside its JSON object"
	case reasonUsageNotObject:
		return "usage is neither an object nor null"
	case reasonFigureNotNumber:
		return "a usage figure is not a number"
	case reasonNegative:
		return "a usage figure is negative"
	case reasonFraction:
		return "a usage figure is not a whole number (fraction or exponent)"
	case reasonTooLarge:
		return "the usage is above 2^53"
	case reasonRepeated:
		return "a usage key is repeated in its object"
	case reasonNoUsage:
		return "no usage in the body"
	case reasonNoInput:
		return "the usage has no input figure"
	}
	return "the usage has no output figure"
}
