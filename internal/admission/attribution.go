package admission

import (
	"strconv"
	"strings"
)

// PartitionKey tells which bucket rule (an index in the configuration's rules) would charge req
// under, with the code Admit uses: matched is false when the rule's match leaves the request
// out, key is nil when the request lacks the key and the rule has no fallback that applies. Use
// it on a Gate of its own, beside the module that decides: it is how a report attributes the
// module's decisions to keys (exemptions are not looked at). key is valid until the next call.
func (g *Gate) PartitionKey(req Request, rule int) (key []byte, matched bool) {
	r := &g.rules[rule]
	view := requestView{req: req, clientIP: g.clientIP}
	if !view.matches(&r.match) {
		return nil, false
	}
	// ruleKey records a missing key in g.out, which this Gate does not otherwise use.
	key, _ = g.ruleKey(&view, r, false)
	return key, true
}

// DescribeKey writes a partition key for people: its parts separated by " | ", and "fallback: "
// before a fallback key. A key it cannot split is returned as it is.
func DescribeKey(key []byte) string {
	s := string(key)
	prefix := ""
	if rest, ok := strings.CutPrefix(s, "fallback:"); ok {
		prefix, s = "fallback: ", rest
	}
	var parts []string
	for s != "" {
		n, rest, ok := strings.Cut(s, ":")
		length, err := strconv.Atoi(n)
		if !ok || err != nil || length < 0 || length > len(rest) {
			return string(key)
		}
		parts = append(parts, rest[:length])
		s = rest[length:]
	}
	return prefix + strings.Join(parts, " | ")
}
