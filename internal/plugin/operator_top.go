package plugin

import (
	"encoding/binary"
	"strconv"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/heavy"
)

// Top offenders: per rule, the keys it limited most over the last minute or two, in fixed
// memory. A rejection counts its key in this VM's Space-Saving table of the rule (no host call:
// the key and its hash are in the Gate's buffers already); the plugin's tick merges each table
// into the rule's summary in shared data with compare-and-swap, as the key table writes, and
// empties it. The summaries of all workers are one; the endpoint reads it. Package heavy states
// the guarantee: for every key, limited_at_least ≤ its rejections ≤ limited_at_most, the two
// apart by at most rejections/top_keys.
//
// A summary counts one period of topPeriod on Envoy's monotonic clock; the value keeps the
// current period's and the previous one's, and the view adds both.

// topPeriod is the length of one summary's period, in nanoseconds.
const topPeriod = int64(60e9)

// topMagic starts the shared-data value: "TGt1", the period's number, then the current and
// the previous period's summaries (heavy.Summary.AppendTo).
const topMagic = "TGt1"

type topOffenders struct {
	k       int
	rawKeys bool
	keys    []string // the shared-data key of each rule's summary
	names   []string
	tables  []*heavy.Table // this VM's, by rule
	buf     []byte
	// lastWarning is the last failure logged: a failing store fails every tick the same way,
	// and one line is enough.
	lastWarning string
}

func newTopOffenders(cfg *config.Config, namespace string, k int, rawKeys bool) *topOffenders {
	t := &topOffenders{k: k, rawKeys: rawKeys}
	for _, r := range cfg.Rules {
		t.keys = append(t.keys, "tollgate/v2/"+namespace+"/top/"+r.Name)
		t.names = append(t.names, r.Name)
		t.tables = append(t.tables, heavy.NewTable(k))
	}
	return t
}

// limited counts a rejection by rule of the request the Gate last decided.
func (t *topOffenders) limited(g *admission.Gate, rule int) {
	key := g.LimitedKey(rule)
	var raw []byte
	if t.rawKeys {
		raw = key
	}
	t.tables[rule].Add(g.KeyHash(rule, key), raw)
}

// periods are one rule's summaries as stored.
type periods struct {
	number        int64
	current, prev heavy.Summary
}

// decodePeriods reads a stored value; a value it cannot read is an empty start.
func (t *topOffenders) decodePeriods(value []byte) periods {
	if len(value) < 12 || string(value[:4]) != topMagic {
		return periods{}
	}
	s := periods{number: int64(binary.LittleEndian.Uint64(value[4:]))}
	var rest []byte
	var ok bool
	if s.current, rest, ok = heavy.Decode(value[12:], t.k); !ok {
		return periods{}
	}
	if s.prev, _, ok = heavy.Decode(rest, t.k); !ok {
		return periods{}
	}
	return s
}

// at moves the summaries to the period of number.
func (s *periods) at(number int64) {
	switch {
	case s.number >= number:
		return
	case s.number == number-1:
		s.prev = s.current
	default:
		s.prev = heavy.Summary{}
	}
	s.current, s.number = heavy.Summary{}, number
}

// flush merges every table with rejections into its rule's summary in shared data, and empties
// it. A table that cannot be merged (shared data failing or contended) keeps counting, and is
// merged at a later tick: a longer stream, with the same guarantee.
func (t *topOffenders) flush(now int64) {
	for i, table := range t.tables {
		if table.Events() == 0 {
			continue
		}
		for attempt := 0; attempt < admission.MaxAttempts; attempt++ {
			value, cas, err := sharedData.Get(t.keys[i])
			switch {
			case err == admission.ErrNotFound:
				cas = admission.CasCreate
			case err != nil:
				t.warn("tollgate: cannot read the top offenders of rule " + t.names[i] + ": " + err.Error())
				return
			}
			s := t.decodePeriods(value)
			s.at(now / topPeriod)
			s.current.AddTable(table, t.k)
			t.buf = binary.LittleEndian.AppendUint64(append(t.buf[:0], topMagic...), uint64(s.number))
			t.buf = s.prev.AppendTo(s.current.AppendTo(t.buf))
			err = sharedData.Set(t.keys[i], t.buf, cas)
			if err == nil {
				table.Reset()
				break
			}
			if err != admission.ErrCasMismatch {
				t.warn("tollgate: cannot write the top offenders of rule " + t.names[i] + ": " + err.Error())
				return
			}
		}
	}
}

// warn logs a failure to merge, unless it is the one logged last.
func (t *topOffenders) warn(msg string) {
	if msg != t.lastWarning {
		t.lastWarning = msg
		abi.Log(abi.LogLevelWarn, msg+" (its counts are kept for the next tick)")
	}
}

// view is the endpoint's top offenders reply: for every rule, its summary of the current and
// the previous period.
func (t *topOffenders) view(now int64) []byte {
	number := now / topPeriod
	var j jsonOut
	j.open('{')
	// The view reaches back to the previous period's start.
	j.field("covers_ms", (now-(number-1)*topPeriod)/1e6)
	j.key("rules")
	j.open('[')
	for i := range t.keys {
		value, _, err := sharedData.Get(t.keys[i])
		var s periods
		if err == nil {
			s = t.decodePeriods(value)
		}
		s.at(number)
		whole := s.prev
		whole.AddSummary(&s.current, t.k)
		j.open('{')
		j.key("rule")
		j.str(t.names[i])
		j.field("rejections", int64(whole.Events))
		j.field("error_bound", int64(whole.Delta))
		t.writeEntries(&j, &whole)
		j.close('}')
	}
	j.close(']')
	j.close('}')
	return append(j.b, '\n')
}

func (t *topOffenders) writeEntries(j *jsonOut, s *heavy.Summary) {
	j.key("keys")
	j.open('[')
	for _, e := range s.Entries() {
		j.open('{')
		j.key("key_hash")
		j.str(strconv.FormatUint(e.ID, 16))
		if t.rawKeys {
			j.key("key")
			j.str(admission.DescribeKey([]byte(e.Key)))
		}
		j.field("limited_at_least", int64(e.Count))
		j.field("limited_at_most", int64(e.Count+s.Delta))
		j.close('}')
	}
	j.close(']')
}
