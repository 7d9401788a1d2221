package admission

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

// settleStep is one event of a request at a fixed instant: its admission, its response headers
// with a status, or the end of its stream without response headers.
type settleStep struct {
	at  int64  // ms
	op  string // "admit", "respond" or "end"
	id  string // the request (stream) the event belongs to
	key string // admit: the partition key's value
	// status is the response status (respond).
	status int
	// want is the verdict (admit); given the rules that gave their charge back (respond, end).
	want  Verdict
	given []int
	// retry is the exact Retry-After of a rejection, when not 0.
	retry time.Duration
}

func admit(at int64, id, key string, want Verdict) settleStep {
	return settleStep{at: at, op: "admit", id: id, key: key, want: want}
}
func respond(at int64, id string, status int, given ...int) settleStep {
	return settleStep{at: at, op: "respond", id: id, status: status, given: given}
}
func end(at int64, id string, given ...int) settleStep {
	return settleStep{at: at, op: "end", id: id, given: given}
}

// runSettleSteps runs steps on a fresh store, keying requests by header k or, with byAddress,
// by the client address (which does not take the fast path).
func runSettleSteps(t *testing.T, doc string, byAddress bool, steps []settleStep) {
	t.Helper()
	g := mustGate(t, doc)
	store := newMemStore()
	pending := map[string]*Pending{}
	base := 1000 * sec
	for i, s := range steps {
		now := base + s.at*ms
		switch s.op {
		case "admit":
			r := header("k", s.key)
			if byAddress {
				r = fakeRequest{source: "192.0.2." + strconv.Itoa(int(s.key[0])) + ":5000"}
			}
			out := g.Admit(r, store, now)
			if out.Verdict != s.want {
				t.Fatalf("step %d (%s %s at %dms): verdict %d, want %d (%+v)", i, s.op, s.id, s.at, out.Verdict, s.want, out)
			}
			if s.retry != 0 && out.RetryAfter != s.retry {
				t.Fatalf("step %d: retry after %v, want %v", i, out.RetryAfter, s.retry)
			}
			p := &Pending{}
			out.Hold(p)
			if out.Verdict != Allow && !p.Empty() {
				t.Fatalf("step %d: a request that was not admitted holds a charge", i)
			}
			pending[s.id] = p
		case "respond", "end":
			p, ok := pending[s.id]
			if !ok {
				t.Fatalf("step %d: no request %s", i, s.id)
			}
			given := g.Settle(store, p, s.status, now)
			if !slices.Equal(given, s.given) && len(given)+len(s.given) > 0 {
				t.Fatalf("step %d (%s %s %d at %dms): rules %v gave their charge back, want %v", i, s.op, s.id, s.status, s.at, given, s.given)
			}
			if !p.Empty() {
				t.Fatalf("step %d: the charge is still held after it was settled", i)
			}
			delete(pending, s.id)
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
	}
}

// The login rule of the kind: 2 failures per hour per client; only 401 and 403 count.
const countRule = `{"rules": [{"name": "failed-logins", "key": [KEY],
  "limits": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"}],
  "count": {"statuses": ["401", "403"]}}]}`

func withKey(doc string, byAddress bool) string {
	key := `{"header": "k"}`
	if byAddress {
		key = `{"client_ip": {}}`
	}
	return replaceOnce(doc, "KEY", key)
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

// Successes are never charged; two failures empty the bucket, and then every request is
// rejected before the upstream, whatever its response would have been. Decided the same on the
// fast path (a header key) and the general one (the client address).
func TestCountChargesOnlyListedStatuses(t *testing.T) {
	steps := []settleStep{
		admit(0, "ok1", "a", Allow), respond(10, "ok1", 200, 0),
		admit(20, "ok2", "a", Allow), respond(30, "ok2", 200, 0),
		admit(40, "ok3", "a", Allow), respond(50, "ok3", 404, 0),
		admit(60, "bad1", "a", Allow), respond(70, "bad1", 401),
		admit(80, "ok4", "a", Allow), respond(90, "ok4", 204, 0),
		admit(100, "bad2", "a", Allow), respond(110, "bad2", 403),
		// Empty: rejected before the upstream, with the exact wait for one token (30 minutes
		// after the first failure's charge at 60ms).
		{at: 120, op: "admit", id: "late", key: "a", want: Limited, retry: 30*time.Minute - 60*time.Millisecond},
		admit(130, "late2", "a", Limited),
		// Another client is not affected.
		admit(140, "other", "b", Allow), respond(150, "other", 200, 0),
	}
	for _, byAddress := range []bool{false, true} {
		t.Run("by address "+strconv.FormatBool(byAddress), func(t *testing.T) {
			runSettleSteps(t, withKey(countRule, byAddress), byAddress, steps)
		})
	}
}

// Requests in flight hold their tokens until their responses: with 2 tokens, a third request
// while two are in flight is rejected, whatever their responses will be (no over-admission), and
// a success gives its token back to the next one.
func TestCountInFlightHoldTheirTokens(t *testing.T) {
	runSettleSteps(t, withKey(countRule, false), false, []settleStep{
		admit(0, "a", "x", Allow),
		admit(1, "b", "x", Allow),
		admit(2, "c", "x", Limited),
		respond(3, "a", 200, 0),
		admit(4, "d", "x", Allow),
		admit(5, "e", "x", Limited),
		respond(6, "b", 401),
		respond(7, "d", 401),
		admit(8, "f", "x", Limited),
	})
}

// A stream that ends without response headers (the client went away, the stream was reset):
// nothing a count rule counts happened, so its charge is given back; a refund rule keeps it.
func TestStreamEndedWithoutResponse(t *testing.T) {
	runSettleSteps(t, withKey(countRule, false), false, []settleStep{
		admit(0, "a", "x", Allow), end(1, "a", 0),
		admit(2, "b", "x", Allow), end(3, "b", 0),
		admit(4, "c", "x", Allow), admit(5, "d", "x", Allow), admit(6, "e", "x", Limited),
	})
	runSettleSteps(t, withKey(refundRule, false), false, []settleStep{
		admit(0, "a", "x", Allow), end(1, "a"),
		admit(2, "b", "x", Allow), admit(3, "c", "x", Allow), admit(4, "d", "x", Limited),
	})
}

// 3 per hour; 5xx responses cost nothing.
const refundRule = `{"rules": [{"name": "api", "key": [KEY],
  "limits": [{"capacity": 3, "refill_tokens": 3, "refill_interval": "1h"}],
  "refund": {"statuses": ["5xx"]}}]}`

// Four upstream failures, then the whole quota is still there; other statuses are charged.
func TestRefundGivesBackListedStatuses(t *testing.T) {
	steps := []settleStep{
		admit(0, "f1", "a", Allow), respond(10, "f1", 500, 0),
		admit(20, "f2", "a", Allow), respond(30, "f2", 502, 0),
		admit(40, "f3", "a", Allow), respond(50, "f3", 503, 0),
		admit(60, "f4", "a", Allow), respond(70, "f4", 599, 0),
		admit(80, "ok1", "a", Allow), respond(90, "ok1", 200),
		admit(100, "ok2", "a", Allow), respond(110, "ok2", 429),
		admit(120, "ok3", "a", Allow), respond(130, "ok3", 404),
		admit(140, "over", "a", Limited),
	}
	for _, byAddress := range []bool{false, true} {
		t.Run("by address "+strconv.FormatBool(byAddress), func(t *testing.T) {
			runSettleSteps(t, withKey(refundRule, byAddress), byAddress, steps)
		})
	}
}

// A token bucket's refund restores what the request took, never more: 3 tokens, one a second;
// charged at 0 (2 left), given back at 500ms when the bucket holds 2.5: it is full (3), not 3.5,
// so three requests pass at 500ms and the fourth waits exactly a second.
func TestRefundNeverAboveCapacity(t *testing.T) {
	runSettleSteps(t, `{"rules": [{"name": "api", "key": [{"header": "k"}],
	  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}],
	  "refund": {"statuses": ["5xx"]}}]}`, false, []settleStep{
		admit(0, "f", "a", Allow),
		respond(500, "f", 503, 0),
		admit(500, "a1", "a", Allow), admit(500, "a2", "a", Allow), admit(500, "a3", "a", Allow),
		{at: 500, op: "admit", id: "a4", key: "a", want: Limited, retry: time.Second},
	})
}

// A refund never hands back a refill the full bucket would have lost: 3 tokens, one a second; f
// charged at 0 leaves 2, g at 0 leaves 1, and f's refund at 500ms is the room between capacity
// and the level f left plus the refill since (3 - 2.5 = 0.5 token), not a whole token: the
// bucket holds 2 then, two requests pass, and the third waits a whole second. (Had f never been
// charged it would hold 2.5: the refund errs towards admitting less, as documented.)
func TestRefundOwesNoMoreThanTheRoomLeft(t *testing.T) {
	runSettleSteps(t, `{"rules": [{"name": "api", "key": [{"header": "k"}],
	  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}],
	  "refund": {"statuses": ["5xx"]}}]}`, false, []settleStep{
		admit(0, "f", "a", Allow), admit(0, "g", "a", Allow),
		respond(500, "f", 503, 0),
		admit(500, "a1", "a", Allow), admit(500, "a2", "a", Allow),
		{at: 500, op: "admit", id: "a3", key: "a", want: Limited, retry: time.Second},
		// g's refund at 2s, long after the level it left (1) plus the refill could have filled
		// the bucket: nothing is owed, and the bucket holds what the refill gave it (1.5).
		respond(2000, "g", 503, 0),
		admit(2000, "b1", "a", Allow),
		{at: 2000, op: "admit", id: "b2", key: "a", want: Limited, retry: 500 * time.Millisecond},
	})
}

// A window takes a refund only within the window that was charged: a failure counted at 900ms
// whose response comes at 1100ms, in the next window, is not taken off what that window counted.
func TestRefundOnlyWithinTheChargedWindow(t *testing.T) {
	for _, algorithm := range []string{"fixed_window", "sliding_window"} {
		t.Run(algorithm, func(t *testing.T) {
			doc := `{"rules": [{"name": "w", "key": [{"header": "k"}],
			  "limits": [{"algorithm": "` + algorithm + `", "capacity": 2, "window": "1s"}],
			  "refund": {"statuses": ["5xx"]}}]}`
			steps := []settleStep{
				admit(900, "old", "a", Allow),
				// A refund within the window is taken off it.
				admit(950, "in", "a", Allow), respond(960, "in", 500, 0),
				admit(1100, "b", "a", Allow),
				// Given back (the rule's charge is returned), but the window it was counted in
				// is over: nothing is taken off the new one.
				respond(1100, "old", 503, 0),
			}
			if algorithm == "fixed_window" {
				steps = append(steps, admit(1150, "c", "a", Allow), admit(1200, "d", "a", Limited))
			} else {
				// The sliding window still weighs the previous window's 1 (at 1200ms, by 0.8):
				// 0.8 + 1 + 1 > 2.
				steps = append(steps, admit(1200, "d", "a", Limited))
			}
			runSettleSteps(t, doc, false, steps)
		})
	}
}

// A refund gives back every limit of the rule, and only the rules that settle at the response:
// a plain rule on the same request keeps its charge, and a count rule and a refund rule on one
// request each decide by the one status.
func TestSettleByRule(t *testing.T) {
	doc := `{"rules": [
	  {"name": "plain", "key": [{"header": "k"}], "limits": [{"capacity": 5, "refill_tokens": 5, "refill_interval": "1h"}]},
	  {"name": "two-limits", "key": [{"header": "k"}], "limits": [
	    {"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"},
	    {"algorithm": "fixed_window", "capacity": 2, "window": "1h"}],
	    "refund": {"statuses": ["5xx"]}},
	  {"name": "count", "key": [{"header": "k"}], "limits": [{"capacity": 9, "refill_tokens": 9, "refill_interval": "1h"}],
	    "count": {"statuses": ["500"]}}]}`
	runSettleSteps(t, doc, false, []settleStep{
		// 503: refunded by two-limits (both limits), not counted by count; plain keeps it.
		admit(0, "a", "x", Allow), respond(1, "a", 503, 1, 2),
		admit(2, "b", "x", Allow), respond(3, "b", 503, 1, 2),
		// 500: refunded by two-limits, counted by count.
		admit(4, "c", "x", Allow), respond(5, "c", 500, 1),
		// 200: kept by two-limits, given back by count.
		admit(6, "d", "x", Allow), respond(7, "d", 200, 2),
		admit(8, "e", "x", Allow), respond(9, "e", 200, 2),
		// plain has 5 charges now, two-limits 2: both are full.
		admit(10, "f", "x", Limited),
	})
	// And the two limits of two-limits were given back together: two more requests pass it once
	// plain has room (a new key, the same steps with successes last).
	runSettleSteps(t, doc, false, []settleStep{
		admit(0, "a", "y", Allow), respond(1, "a", 502, 1, 2),
		admit(2, "b", "y", Allow), respond(3, "b", 502, 1, 2),
		admit(4, "c", "y", Allow), admit(5, "d", "y", Allow),
		admit(6, "e", "y", Limited), // two-limits: both its limits are spent
	})
}

// A shadow rule with count keeps its own accounting the same way, and never rejects.
func TestShadowRuleSettles(t *testing.T) {
	doc := `{"rules": [{"name": "trial", "shadow": true, "key": [{"header": "k"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}],
	  "count": {"statuses": ["401"]}}]}`
	g := mustGate(t, doc)
	store := newMemStore()
	var p Pending
	for i, status := range []int{200, 200, 401} {
		out := g.Admit(header("k", "a"), store, int64(i)*sec)
		if out.Verdict != Allow || len(out.ShadowLimited) != 0 {
			t.Fatalf("request %d: %+v, want admitted and not shadow-limited", i, out)
		}
		out.Hold(&p)
		if p.Empty() {
			t.Fatalf("request %d: the shadow rule's charge is not held", i)
		}
		g.Settle(store, &p, status, int64(i)*sec)
	}
	out := g.Admit(header("k", "a"), store, 3*sec)
	if out.Verdict != Allow || !slices.Equal(out.ShadowLimited, []int{0}) {
		t.Fatalf("%+v: after one counted 401 the shadow rule should say it would limit", out)
	}
	out.Hold(&p)
	if !p.Empty() {
		t.Fatal("a shadow rule that would have limited was not charged, but its charge is held")
	}
}

// A request that costs nothing, or a rule without count or refund, holds nothing.
func TestHoldOnlyWhatSettles(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "plain", "key": [{"header": "k"}], "limits": [{"capacity": 4, "refill_tokens": 4, "refill_interval": "1h"}]},
	  {"name": "free", "key": [{"header": "k"}], "limits": [{"capacity": 4, "refill_tokens": 4, "refill_interval": "1h"}],
	    "cost": 0, "count": {"statuses": ["401"]}}]}`)
	if !g.SettlesAtResponse() {
		t.Fatal("SettlesAtResponse is false with a count rule")
	}
	var p Pending
	g.Admit(header("k", "a"), newMemStore(), 0).Hold(&p)
	if !p.Empty() {
		t.Fatalf("held %+v", p.entries)
	}
	if mustGate(t, withKey(countRule, false)).SettlesAtResponse() == false {
		t.Fatal("SettlesAtResponse is false with a count rule")
	}
	if mustGate(t, `{"rules": [{"name": "plain", "key": [{"header": "k"}], "limits": [{"capacity": 4, "refill_tokens": 4, "refill_interval": "1h"}]}]}`).SettlesAtResponse() {
		t.Fatal("SettlesAtResponse is true without count or refund")
	}
}

// Holding and settling allocate nothing once the buffers have grown.
func TestSettleDoesNotAllocate(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [
	  {"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "1s"},
	  {"algorithm": "fixed_window", "capacity": 1000000000, "window": "1h"}],
	  "refund": {"statuses": ["5xx"]}}]}`)
	setCollectStatus(g.Policy, false)
	store := &steadyStore{values: map[string][]byte{}, cas: map[string]uint32{}}
	var r Request = req("192.0.2.1:1", "k", "alice")
	var p Pending
	g.Admit(r, store, sec).Hold(&p)
	g.Settle(store, &p, 503, sec)
	allocs := testing.AllocsPerRun(100, func() {
		g.Admit(r, store, sec).Hold(&p)
		if given := g.Settle(store, &p, 503, sec); len(given) != 1 {
			t.Fatalf("given back by %v", given)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per request, want 0", allocs)
	}
}

// A calendar window takes a refund only within the day that was charged, by the wall clock: a
// failure charged at 23:59 whose response comes after midnight, once the new day has counted a
// request, frees nothing in the new day.
func TestRefundOnlyWithinTheChargedCalendarDay(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "daily", "key": [{"header": "k"}],
	  "limits": [{"algorithm": "fixed_window", "capacity": 2, "calendar": "day"}],
	  "refund": {"statuses": ["5xx"]}}]}`)
	clock := &wallClock{}
	g.SetWallClock(clock.read)
	store := newMemStore()
	midnight := utcNanos(2026, 3, 2, 0)
	var slow, fast, next Pending
	step := func(mono, wall int64, want Verdict) *Outcome {
		t.Helper()
		clock.at = wall
		out := g.Admit(header("k", "a"), store, mono)
		if out.Verdict != want {
			t.Fatalf("at %s: verdict %d, want %d", time.Unix(0, wall).UTC(), out.Verdict, want)
		}
		return out
	}
	step(sec, midnight-sec, Allow).Hold(&slow)
	// Within the day, a refund is taken off it.
	step(2*sec, midnight-sec/2, Allow).Hold(&fast)
	clock.at = midnight - sec/4
	if given := g.Settle(store, &fast, 503, 2*sec); len(given) != 1 {
		t.Fatalf("given back by %v", given)
	}
	step(3*sec, midnight+sec, Allow).Hold(&next)
	clock.at = midnight + 2*sec
	if given := g.Settle(store, &slow, 502, 4*sec); len(given) != 1 {
		t.Fatalf("given back by %v", given)
	}
	step(5*sec, midnight+3*sec, Allow)
	step(6*sec, midnight+4*sec, Limited)
}

// A rule with tiers settles its tier's limits: a pro key counts two failures, a free one one.
func TestCountWithTiers(t *testing.T) {
	doc := `{"rules": [{"name": "logins", "key": [{"header": "k"}],
	  "limits_by": {"part": {"header": "x-plan"}, "default": "free", "tiers": {
	    "free": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}],
	    "pro": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"}]}},
	  "count": {"statuses": ["401"]}}]}`
	g := mustGate(t, doc)
	store := newMemStore()
	for _, plan := range []struct {
		name     string
		failures int
	}{{"free", 1}, {"pro", 2}} {
		r := fakeRequest{headers: map[string]string{"k": "user-" + plan.name, "x-plan": plan.name}}
		var p Pending
		for i := 0; i < 3; i++ { // successes are given back
			g.Admit(r, store, sec).Hold(&p)
			if given := g.Settle(store, &p, 200, sec); len(given) != 1 {
				t.Fatalf("%s: success %d given back by %v", plan.name, i, given)
			}
		}
		for i := 0; i < plan.failures; i++ {
			out := g.Admit(r, store, sec)
			if out.Verdict != Allow {
				t.Fatalf("%s: failure %d: %+v", plan.name, i, out)
			}
			out.Hold(&p)
			g.Settle(store, &p, 401, sec)
		}
		if out := g.Admit(r, store, sec); out.Verdict != Limited {
			t.Fatalf("%s: after %d failures: %+v, want limited", plan.name, plan.failures, out)
		}
	}
}

// DropEnforced keeps only the shadow rules' part: the enforced part is what Charge returns, given
// back whole by GiveBack, and must not be settled again.
func TestDropEnforcedKeepsTheShadowPart(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "api", "key": [{"header": "k"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}],
	    "count": {"statuses": ["2xx"]}},
	  {"name": "trial", "shadow": true, "key": [{"header": "k"}],
	    "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}], "count": {"statuses": ["2xx"]}}]}`)
	store := newMemStore()
	var p Pending
	out := g.Admit(header("k", "a"), store, 0)
	if out.Verdict != Allow {
		t.Fatalf("%+v, want admitted", out)
	}
	charge := out.Charge()
	out.Hold(&p)
	g.GiveBack(store, charge, sec)
	p.DropEnforced()
	if given := g.Settle(store, &p, 0, sec); !slices.Equal(given, []int{1}) {
		t.Fatalf("settled %v, want the shadow rule only", given)
	}
	// Both buckets have their token back, once: the next request is admitted by both, the one
	// after it by neither.
	for i, want := range []bool{true, false} {
		out := g.Admit(header("k", "a"), store, 2*sec)
		if got := out.Verdict == Allow && len(out.ShadowLimited) == 0; got != want {
			t.Fatalf("request %d after the give-back: %+v, want admitted by both %v", i, out, want)
		}
	}
}
