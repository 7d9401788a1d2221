package plugin

import (
	"strconv"
	"testing"
)

// settleRule is a rule of the given tokens (one more an hour) with extra spliced in.
func settleRule(tokens int, extra string) string {
	return `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": ` + strconv.Itoa(tokens) + `, "refill_tokens": 1, "refill_interval": "1h"}]` + extra + `}]}`
}

// Count and refund rules settle a request's charge by its response's status; a forwarded request
// whose stream ends without a response keeps its charge, and one whose client goes away while
// held for the rate limit service gets it back.
func TestSettleAtResponse(t *testing.T) {
	refund := `, "refund": {"statuses": ["5xx"]}`
	// r with refund, and a rule of its own for the global limit, as refund cannot have one.
	withGlobal := `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]` + refund + `},
	  ` + globalRuleJSON("g", "allow", 10, "") + `]}`
	tests := []struct {
		name   string
		config string
		// Each request's end: a response status, "none" (the stream ends without one) or
		// "gone" (its client goes away while it is held); "-" for the last, left as it is.
		ends     []string
		outcomes []string // before the end
		refunded uint64
	}{
		{"refund 5xx", settleRule(2, refund), []string{"503", "200", "200", "-"},
			[]string{"continued", "continued", "continued", "429 ra=3600"}, 1},
		{"count 401 and 403", settleRule(1, `, "count": {"statuses": ["401", "403"]}`), []string{"200", "404", "403", "-"},
			[]string{"continued", "continued", "continued", "429 ra=3600"}, 2},
		{"no response keeps the charge", settleRule(1, refund), []string{"none", "-"},
			[]string{"continued", "429 ra=3600"}, 0},
		{"gone while held gives it back", withGlobal, []string{"gone", "-"},
			[]string{"held", "held"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := rig(t, tt.config)
			for i, end := range tt.ends {
				s, _ := host.Request(keyed("k", "/"))
				if got := outcome(s); got != tt.outcomes[i] {
					t.Fatalf("request %d: %s, want %s", i, got, tt.outcomes[i])
				}
				switch end {
				case "none", "gone":
					s.End()
				case "-":
				default:
					status, _ := strconv.Atoi(end)
					s.ResponseHeaders(status, nil)
					s.End()
				}
			}
			checkCounters(t, host, map[string]uint64{"tollgate.rule.r.refunded": tt.refunded})
		})
	}
}
