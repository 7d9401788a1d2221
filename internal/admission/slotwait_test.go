package admission

import (
	"testing"
	"time"
)

// AdmitBy bounds a delaying limit's reservation by an instant, without changing the decision of
// a request whose tokens are due by then; the next Admit reserves up to max_delay again. Capacity
// 1, one token per second, max_delay 2s.
func TestAdmitBySteps(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "paced", "key": [{"header": "k"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}],
	  "on_limit": {"action": "delay", "max_delay": "2s"}}]}`)
	store := newMemStore()
	base := 1000 * sec
	steps := []struct {
		at, by  int64 // by: AdmitBy's instant, 0 for Admit
		verdict Verdict
		delay   time.Duration
		retry   time.Duration
	}{
		{at: 0, verdict: Allow},
		// Due at 1s, by 500ms: refused with the wait, nothing reserved.
		{at: 0, by: 500 * ms, verdict: Limited, retry: time.Second},
		// Due at 1s, by 1s: reserved.
		{at: 0, by: 1000 * ms, verdict: Allow, delay: time.Second},
		// Due at 2s, by an instant already past: only tokens there now.
		{at: 100 * ms, by: 50 * ms, verdict: Limited, retry: 1900 * time.Millisecond},
		// Admit again reserves up to max_delay from now.
		{at: 100 * ms, verdict: Allow, delay: 1900 * time.Millisecond},
	}
	for i, s := range steps {
		var out *Outcome
		if s.by != 0 {
			out = g.AdmitBy(header("k", "a"), store, base+s.at, base+s.by)
		} else {
			out = g.Admit(header("k", "a"), store, base+s.at)
		}
		if out.Verdict != s.verdict || out.Delay != s.delay || (s.verdict == Limited && out.RetryAfter != s.retry) {
			t.Fatalf("step %d at %dms: got verdict %d delay %v retry %v, want %d, %v, %v",
				i, s.at/ms, out.Verdict, out.Delay, out.RetryAfter, s.verdict, s.delay, s.retry)
		}
	}
}
