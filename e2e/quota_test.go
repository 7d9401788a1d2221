package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// quotaConfig has one rule per long quota, each keyed by its own header so that a request
// exercises one of them: a calendar month, a 7-day and a 30-day fixed window, and a token bucket
// of 100,000 tokens refilled one a day (beyond the 2^62-credit arithmetic of a single level).
const quotaConfig = `{"rate_limit_headers": "draft", "rules": [
  {"name": "monthly", "key": [{"header": "x-month"}], "missing_key": {"action": "allow"},
   "limits": [{"algorithm": "fixed_window", "capacity": 3, "calendar": "month"}]},
  {"name": "weekly", "key": [{"header": "x-week"}], "missing_key": {"action": "allow"},
   "limits": [{"algorithm": "fixed_window", "capacity": 2, "window": "7d"}]},
  {"name": "thirty", "key": [{"header": "x-thirty"}], "missing_key": {"action": "allow"},
   "limits": [{"algorithm": "sliding_window", "capacity": 2, "window": "30d"}]},
  {"name": "daily", "key": [{"header": "x-day"}], "missing_key": {"action": "allow"},
   "cost": {"header": "x-cost", "max": 100000},
   "limits": [{"capacity": 100000, "refill_tokens": 1, "refill_interval": "1d"}]}
]}`

type quotaStep struct {
	name       string
	vm         int
	headers    []string
	status     int
	retryAfter string // on a 429
	policy     string // RateLimit-Policy on a 200, when given
}

func (g *rig) quotaSteps(t *testing.T, steps []quotaStep) {
	t.Helper()
	for _, s := range steps {
		resp := g.send(g.vms[s.vm], httpReq("GET", "/", peer, s.headers...), nil)
		if resp.Status != s.status {
			t.Fatalf("%s: status %d, want %d\nlogs:\n%s", s.name, resp.Status, s.status, g.logText())
		}
		if s.status == 429 && resp.Header("retry-after") != s.retryAfter {
			t.Errorf("%s: Retry-After %q, want %q", s.name, resp.Header("retry-after"), s.retryAfter)
		}
		if s.policy != "" && resp.Header("ratelimit-policy") != s.policy {
			t.Errorf("%s: RateLimit-Policy %q, want %q", s.name, resp.Header("ratelimit-policy"), s.policy)
		}
	}
}

func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// A calendar month through the real module, on two worker VMs: the windows follow the host's
// wall clock (the rig's starts on 2026-01-01 00:00 UTC), not its monotonic clock; a wall clock
// stepped forward starts the next month early, one stepped back keeps counting into the month
// stored, so it never hands out a month's quota twice.
func TestCalendarMonthThroughTheModule(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	for _, profile := range profiles {
		t.Run(profile.String(), func(t *testing.T) {
			t.Parallel()
			g := newRig(t, profile, quotaConfig, 2)
			month := []string{"x-month", "alice"}
			g.clock.StepWall(30*day + 22*time.Hour) // Jan 31 22:00; the monotonic clock stays
			g.quotaSteps(t, []quotaStep{
				{"1", 0, month, 200, "", `"monthly";q=3;w=2678400`},
				{"2", 1, month, 200, "", ""},
				{"3", 0, month, 200, "", ""},
				{"over until February", 1, month, 429, seconds(2 * time.Hour), ""},
			})
			g.at(2 * time.Hour) // both clocks: Feb 1 00:00
			g.quotaSteps(t, []quotaStep{{"February, 28 days", 0, month, 200, "", `"monthly";q=3;w=2419200`}})
			g.clock.StepWall(-time.Hour) // stepped back into January
			g.quotaSteps(t, []quotaStep{
				{"stepped back: February's second", 1, month, 200, "", ""},
				{"stepped back: February's third", 0, month, 200, "", ""},
				// Decided as of February's start: the wait is counted from it.
				{"stepped back: February is used up", 1, month, 429, seconds(28 * day), ""},
			})
			g.clock.StepWall(28*day + time.Hour) // stepped forward to March 1
			g.quotaSteps(t, []quotaStep{
				{"March", 1, month, 200, "", `"monthly";q=3;w=2678400`},
				{"another key has its own month", 0, []string{"x-month", "bob"}, 200, "", ""},
			})
		})
	}
}

// 7-day and 30-day windows and a daily token bucket of 100,000 tokens, through the real module:
// each admits its quota and then rejects with a Retry-After of days, not seconds, and admits
// again when the window has passed or a token has been refilled.
func TestLongWindowsThroughTheModule(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	g := newRig(t, host.Envoy139, quotaConfig, 2)
	// Windows of a fixed length are aligned on the monotonic clock, which starts an hour in.
	start := time.Duration(monotonicStart)
	week, thirty := []string{"x-week", "w"}, []string{"x-thirty", "m"}
	g.quotaSteps(t, []quotaStep{
		{"week 1", 0, week, 200, "", `"weekly";q=2;w=604800`},
		{"week 2", 1, week, 200, "", ""},
		{"week over", 0, week, 429, seconds(7*day - start), ""},
		{"thirty 1", 1, thirty, 200, "", `"thirty";q=2;w=2592000`},
		{"thirty 2", 0, thirty, 200, "", ""},
		// Sliding: in the next window the two units weigh as they slide out; half of them
		// leave room for one, halfway through it.
		{"thirty over", 1, thirty, 429, seconds(30*day - start + 15*day), ""},
		{"a day's 100000 tokens", 0, []string{"x-day", "d", "x-cost", "100000"}, 200, "", `"daily";q=100000;w=8640000000`},
		{"the 100001st", 1, []string{"x-day", "d"}, 429, seconds(day), ""},
	})
	g.at(7*day - start) // the next 7-day window, 6 days and 23 hours after the bucket emptied
	g.quotaSteps(t, []quotaStep{
		{"next week", 0, week, 200, "", ""},
		{"six tokens refilled", 1, []string{"x-day", "d", "x-cost", "6"}, 200, "", ""},
		{"the seventh in an hour", 0, []string{"x-day", "d"}, 429, seconds(time.Hour), ""},
	})
}
