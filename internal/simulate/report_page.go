package simulate

import (
	"html/template"
	"maps"
	"slices"
	"time"
)

// statusRow is one response status with what it means and how many requests got it.
type statusRow struct {
	Code, Meaning, Count, Share string
}

// statusMeanings say what the module's answers mean; other statuses are a configured response.
var statusMeanings = map[string]string{
	"200": "let through (the upstream's own answer is not counted here)",
	"429": "limited",
	"401": "no key (missing_key)",
	"400": "a cost header that is not a whole number",
}

func statusRows(r *Result) []statusRow {
	codes := slices.Sorted(maps.Keys(r.Statuses))
	rows := make([]statusRow, len(codes))
	for i, code := range codes {
		meaning, ok := statusMeanings[code]
		if !ok {
			meaning = "rejected, with the status the configuration sets"
		}
		n := r.Statuses[code]
		rows[i] = statusRow{Code: code, Meaning: meaning, Count: Thousands(n), Share: percent(n, r.Requests)}
	}
	return rows
}

// changeRow is one rule's line of what --compare changes, with the keys that move most.
type changeRow struct {
	Rule, In string
	*RuleChanges
}

// changeRows lists the rules of both configurations, the first's in order, then the second's.
func changeRows(s *Summary) []changeRow {
	var rows []changeRow
	seen := map[string]bool{}
	in := map[string]string{"both": "", "from": "only in " + s.Changes.From, "to": "only in " + s.Changes.To}
	for _, r := range []*Result{s.Result, s.Compare} {
		for _, name := range r.RuleNames() {
			if rc := s.Changes.Rules[name]; rc != nil && !seen[name] {
				seen[name] = true
				rows = append(rows, changeRow{Rule: name, In: in[rc.In], RuleChanges: rc})
			}
		}
	}
	return rows
}

// suggestionRow is one rule's fitted limits and what they did, replayed.
type suggestionRow struct {
	Rule string
	*RuleSuggestion
	Replayed *RuleResult
}

func suggestionRows(s *Summary) []suggestionRow {
	var rows []suggestionRow
	for _, name := range s.Result.RuleNames() {
		rows = append(rows, suggestionRow{Rule: name, RuleSuggestion: s.Suggestion.Rules[name], Replayed: s.Suggestion.Result.Rules[name]})
	}
	return rows
}

// cannotTell lists what a replay of this log cannot know, most relevant first.
func cannotTell(s *Summary, results []*Result) []string {
	out := []string{
		"How clients react. The log is the traffic as it was: clients that a new limit rejects may retry, back off or leave, which changes the traffic after the first rejection.",
	}
	if s.Log.Format == Combined.String() {
		out = append(out, "Request headers and exact times. A combined log records no header but referer and user-agent, and whole seconds: every request of a second is replayed at its start, which overstates bursts (read this report as the worst case).")
	} else {
		out = append(out, "Headers the log does not record. A key part or match on a header without a req.<name> field in the log sees it as absent.")
	}
	if windowed(results) {
		where := "Where windows start. A fixed or sliding window starts at an instant of Envoy's monotonic clock, which differs on every start: "
		if phasesReplayed(results) {
			where += "each rule gives the range of its figures over the phases replayed; the figures and charts are those of one phase."
		} else {
			where += "this replay shows one such phase, and another moves the limited requests of a window rule a little (--phases replays several)."
		}
		out = append(out, where)
	} else {
		out = append(out, "Nothing about window phases: token buckets and calendar windows do not depend on when Envoy started, so one replay is exact.")
	}
	out = append(out,
		"The upstream's answers. An admitted request is answered with the status the log recorded (a logged 429 is replayed as 200): a request another limiter rejected counts as a success here.",
		"Several replicas. This is one Envoy process; each replica of a fleet sees its share of the traffic and has its own buckets.",
		"Global limits. No rate limit service is called: a global check fails at once, and its failure_mode decides.")
	return out
}

// phasesReplayed reports whether any configuration was replayed at several window phases.
func phasesReplayed(results []*Result) bool {
	for _, r := range results {
		for _, rr := range r.Rules {
			if rr.WindowPhases != nil {
				return true
			}
		}
	}
	return false
}

// windowed reports whether any rule has a fixed or sliding window (not a calendar one).
func windowed(results []*Result) bool {
	for _, r := range results {
		for _, rr := range r.Rules {
			for _, l := range rr.Limits {
				if l.phased {
					return true
				}
			}
		}
	}
	return false
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"num":   Thousands,
	"int64": func(n int) int64 { return int64(n) },
	"pct":   percent,
	"time": func(t time.Time) string {
		return t.Format("2006-01-02 15:04:05.000 MST")
	},
	"delta": func(a, b int64) int64 { return a - b },
	"add":   func(a, b int64) int64 { return a + b },
	"signed": func(n int64) string {
		if n > 0 {
			return "+" + Thousands(n)
		}
		return Thousands(n)
	},
}).Parse(reportHTML))
