package simulate

import (
	"strconv"

	"github.com/tollgate-proxy/tollgate/config"
)

// The replay's upstream reports the usage the log recorded (Entry.Usage) in the form each rule
// with usage reads it: a JSON body whose usage figures make the rule's count read it, a header,
// or a body of that many bytes. The log records one amount, what the first rule with usage the
// request matched was charged, so every rule with usage is charged it: exact when they read the
// same figure, as rules of one budget do (an OpenAI and an Anthropic rule in one configuration
// are answered in the first one's shape). A line without it is answered without usage, which the
// rules charge unknown, as the module did when it could not read one.

// answerUsage adds the usage n to s.answer.
func (s *Simulator) answerUsage(n int64) {
	text := strconv.FormatInt(n, 10)
	input, output, source := "0", "0", config.UsageSource(0)
	for i := range s.cfg.Rules {
		u := s.cfg.Rules[i].Usage
		switch {
		case u == nil:
		case u.Source == config.UsageHeader:
			s.answer.Headers = append(s.answer.Headers, [2]string{u.Header, text})
		case u.Source == config.UsageResponseBytes:
			if int64(len(s.usageBody)) < n {
				s.usageBody = make([]byte, n)
			}
			s.answer.Body = s.usageBody[:n]
			return
		default:
			if source == 0 {
				source = u.Source
			}
			if u.Count == config.UsageInput {
				input = text
			} else {
				output = text // the total is input + output
			}
		}
	}
	switch source {
	case config.UsageOpenAI:
		s.answer.Body = []byte(`{"usage":{"prompt_tokens":` + input + `,"completion_tokens":` + output + `,"total_tokens":` + text + `}}`)
	case config.UsageAnthropic:
		s.answer.Body = []byte(`{"usage":{"input_tokens":` + input + `,"output_tokens":` + output + `}}`)
	default:
		return
	}
	s.answer.Headers = append(s.answer.Headers, [2]string{"content-type", "application/json"})
}
