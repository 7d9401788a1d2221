package config_test

import (
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

func TestCountAndRefund(t *testing.T) {
	withCount := func(statuses *config.Statuses) *config.Config {
		return baseRuleConfig(func(r *config.Rule) { r.Count = statuses })
	}
	const global = `"global": {"cluster": "ratelimit", "domain": "d"}`
	tests := []struct {
		name     string
		input    string
		want     *config.Config
		problems []problem
	}{
		// Valid.
		{name: "count exact codes", input: withRuleMembers(`"count": {"statuses": ["401", "403"]}`),
			want: withCount(&config.Statuses{Codes: []int{401, 403}})},
		{name: "refund a class", input: withRuleMembers(`"refund": {"statuses": ["5xx"]}`),
			want: baseRuleConfig(func(r *config.Rule) { r.Refund = &config.Statuses{Classes: []int{5}} })},
		{name: "codes and classes, either case, the bounds", input: withRuleMembers(`"count": {"statuses": ["4XX", "3xx", "599", "100", "200"]}`),
			want: withCount(&config.Statuses{Codes: []int{599, 100, 200}, Classes: []int{4, 3}})},
		{name: "count on a shadow rule", input: withRuleMembers(`"shadow": true, "count": {"statuses": ["401"]}`),
			want: baseRuleConfig(func(r *config.Rule) { r.Shadow, r.Count = true, &config.Statuses{Codes: []int{401}} })},

		// Invalid shapes.
		{name: "count a list", input: withRuleMembers(`"count": ["401"]`),
			problems: []problem{{"rules[0].count", `got an array, want an object: count is an object such as {"statuses": ["401", "403"]}`}}},
		{name: "refund a string", input: withRuleMembers(`"refund": "5xx"`),
			problems: []problem{{"rules[0].refund", `want an object: refund is an object such as {"statuses": ["5xx"]}`}}},
		{name: "statuses missing", input: withRuleMembers(`"count": {}`),
			problems: []problem{{"rules[0].count.statuses", `required field is missing: add "statuses": ["401", "403"]`}}},
		{name: "statuses misspelt", input: withRuleMembers(`"count": {"status": ["401"]}`),
			problems: []problem{
				{"rules[0].count", `unknown field "status": known fields are statuses (did you mean "statuses"?)`},
				{"rules[0].count.statuses", "required field is missing"},
			}},
		{name: "statuses empty", input: withRuleMembers(`"refund": {"statuses": []}`),
			problems: []problem{{"rules[0].refund.statuses", `an empty list is not allowed: list at least one status, e.g. ["401"] or ["5xx"]`}}},
		{name: "statuses not a list", input: withRuleMembers(`"refund": {"statuses": "5xx"}`),
			problems: []problem{{"rules[0].refund.statuses", `got the string "5xx", want an array`}}},
		{name: "too many statuses", input: withRuleMembers(`"count": {"statuses": [` + statusList(33) + `]}`),
			problems: []problem{{"rules[0].count.statuses", "33 statuses are too many: at most 32 are allowed"}}},

		// Invalid entries.
		{name: "a number", input: withRuleMembers(`"count": {"statuses": [401]}`),
			problems: []problem{{"rules[0].count.statuses[0]", `got the number 401, want a string: quote the status, e.g. "401"`}}},
		{name: "below 100", input: withRuleMembers(`"count": {"statuses": ["099"]}`),
			problems: []problem{{"rules[0].count.statuses[0]", `"099" is not a status: a status is an exact code from "100" to "599" such as "401", or a class such as "4xx"`}}},
		{name: "above 599", input: withRuleMembers(`"count": {"statuses": ["600"]}`),
			problems: []problem{{"rules[0].count.statuses[0]", `"600" is not a status`}}},
		{name: "class 6xx", input: withRuleMembers(`"refund": {"statuses": ["6xx"]}`),
			problems: []problem{{"rules[0].refund.statuses[0]", `"6xx" is not a status`}}},
		{name: "a wildcard", input: withRuleMembers(`"refund": {"statuses": ["5**"]}`),
			problems: []problem{{"rules[0].refund.statuses[0]", `"5**" is not a status`}}},
		{name: "a range", input: withRuleMembers(`"refund": {"statuses": ["500-599"]}`),
			problems: []problem{{"rules[0].refund.statuses[0]", `"500-599" is not a status`}}},
		{name: "empty", input: withRuleMembers(`"count": {"statuses": [""]}`),
			problems: []problem{{"rules[0].count.statuses[0]", `"" is not a status`}}},
		{name: "null", input: withRuleMembers(`"count": {"statuses": [null]}`),
			problems: []problem{{"rules[0].count.statuses[0]", `got null, want a string: a status is`}}},
		{name: "a code twice", input: withRuleMembers(`"count": {"statuses": ["401", "401"]}`),
			problems: []problem{{"rules[0].count.statuses[1]", `"401" is listed twice: keep one`}}},
		{name: "a class twice", input: withRuleMembers(`"count": {"statuses": ["4xx", "4XX"]}`),
			problems: []problem{{"rules[0].count.statuses[1]", `"4XX" is listed twice: keep one`}}},
		{name: "a code within a listed class", input: withRuleMembers(`"refund": {"statuses": ["503", "5xx"]}`),
			problems: []problem{{"rules[0].refund.statuses[0]", `"503" is already in "5xx", also listed: keep one`}}},

		// Invalid combinations.
		{name: "count and refund", input: withRuleMembers(`"count": {"statuses": ["401"]}, "refund": {"statuses": ["5xx"]}`),
			problems: []problem{{"rules[0].refund", "a rule has count or refund, not both: count lists the statuses that are charged"}}},
		{name: "count with a global limit", input: withRuleMembers(global + `, "count": {"statuses": ["401"]}`),
			problems: []problem{{"rules[0].count", "a rule with a global limit cannot have count: the rate limit service is charged when the request is admitted and cannot give a charge back"}}},
		{name: "refund with a global limit", input: withRuleMembers(global + `, "refund": {"statuses": ["5xx"]}`),
			problems: []problem{{"rules[0].refund", "a rule with a global limit cannot have refund"}}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) { checkParse(t, test.input, test.want, test.problems) })
	}
}

// statusList returns n distinct exact statuses, quoted and joined.
func statusList(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = `"` + string(rune('2')) + string(rune('0'+i/10)) + string(rune('0'+i%10)) + `"`
	}
	return strings.Join(items, ", ")
}

func TestStatusesMatch(t *testing.T) {
	s := config.Statuses{Codes: []int{401, 403}, Classes: []int{5}}
	for status, want := range map[int]bool{
		401: true, 403: true, 500: true, 503: true, 599: true,
		400: false, 402: false, 200: false, 429: false, 499: false,
		0: false, 99: false, 600: false, 1000: false, -500: false,
	} {
		if got := s.Match(status); got != want {
			t.Errorf("Match(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestStatusesString(t *testing.T) {
	s := config.Statuses{Codes: []int{401, 403}, Classes: []int{5, 1}}
	if got := s.String(); got != "401, 403, 5xx, 1xx" {
		t.Errorf("String() = %q", got)
	}
}
