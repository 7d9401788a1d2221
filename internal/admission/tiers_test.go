package admission

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// tierStep is one request of a tier test: at ms after the start, the user and the tier header
// (none when ""), what it gets, and for an admitted one the fewest units left of its limits.
type tierStep struct {
	at        int64 // ms
	user      string
	plan      string
	verdict   Verdict
	remaining int64
	retry     time.Duration
}

func runTierSteps(t *testing.T, g *Gate, steps []tierStep) {
	t.Helper()
	store := newMemStore()
	base := 36000 * sec // a multiple of an hour: windows start there
	for i, s := range steps {
		headers := map[string]string{"x-user": s.user}
		if s.plan != "" {
			headers["x-plan"] = s.plan
		}
		out := g.Admit(fakeRequest{headers: headers, source: "192.0.2.1:5000"}, store, base+s.at*int64(time.Millisecond))
		remaining := int64(-1)
		for _, l := range out.Limits {
			if remaining < 0 || l.Remaining < remaining {
				remaining = l.Remaining
			}
		}
		if out.Verdict != s.verdict || (s.verdict == Allow && remaining != s.remaining) || out.RetryAfter != s.retry {
			t.Fatalf("step %d (%s %q at %dms): got verdict %d remaining %d retry %v, want verdict %d remaining %d retry %v",
				i, s.user, s.plan, s.at, out.Verdict, remaining, out.RetryAfter, s.verdict, s.remaining, s.retry)
		}
	}
}

const plansDoc = `{"rules": [{"name": "plans", "key": [{"header": "x-user"}],
  "limits_by": {"part": {"header": "x-plan"}, "default": "free", "tiers": {
    "free": [{"capacity": 3, "refill_tokens": 3, "refill_interval": "3s"}],
    "pro":  [{"capacity": 5, "refill_tokens": 5, "refill_interval": "1s"},
             {"algorithm": "fixed_window", "capacity": 8, "window": "1h"}]}}}]}`

// Free is 3 tokens at 1 per second, pro 5 at 1 per 200 ms and 8 per hour. A missing or unknown
// tier is free; a key that changes tier carries its tokens over and gains none.
func TestTierSteps(t *testing.T) {
	g := mustGate(t, plansDoc)
	const hour = time.Hour
	runTierSteps(t, g, []tierStep{
		{0, "alice", "", Allow, 2, 0},
		{0, "alice", "", Allow, 1, 0},
		{0, "alice", "", Allow, 0, 0},
		{0, "alice", "", Limited, 0, time.Second},
		{0, "alice", "gold", Limited, 0, time.Second}, // unknown: free
		// Pro now: the bucket is the same, still empty; pro refills it faster.
		{0, "alice", "pro", Limited, 0, 200 * time.Millisecond},
		{200, "alice", "pro", Allow, 0, 0},
		// Back to free: what pro left (nothing), refilled at free's rate.
		{200, "alice", "", Limited, 0, time.Second},
		{1200, "alice", "", Allow, 0, 0},
		{1200, "alice", "pro", Limited, 0, 200 * time.Millisecond},

		{0, "bob", "pro", Allow, 4, 0},
		{0, "bob", "pro", Allow, 3, 0},
		{0, "bob", "pro", Allow, 2, 0},
		{0, "bob", "pro", Allow, 1, 0},
		{0, "bob", "pro", Allow, 0, 0},
		{0, "bob", "pro", Limited, 0, 200 * time.Millisecond},
		{1000, "bob", "pro", Allow, 2, 0}, // 4 tokens, 2 of the hour's 8 left
		{1000, "bob", "pro", Allow, 1, 0},
		{1000, "bob", "pro", Allow, 0, 0},
		{1000, "bob", "pro", Limited, 0, hour - time.Second}, // the hour's 8 are spent
		// Free has no hourly limit: bob's 2 tokens carry over.
		{1000, "bob", "free", Allow, 1, 0},
		{1000, "bob", "pro", Limited, 0, hour - time.Second},
	})
}

// Windows of one length carry their counts: a key that spent pro's 5 has nothing in free, and
// nothing more in pro when it comes back; a window's units are spent once across tiers.
func TestTierWindowsCarryCounts(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "w", "key": [{"header": "x-user"}],
	  "limits_by": {"part": {"header": "x-plan"}, "default": "free", "tiers": {
	    "free": [{"algorithm": "fixed_window", "capacity": 2, "window": "1m"}],
	    "pro":  [{"algorithm": "fixed_window", "capacity": 5, "window": "1m"}]}}}]}`)
	minute := time.Minute
	steps := []tierStep{}
	for i := range 5 {
		steps = append(steps, tierStep{0, "k", "pro", Allow, int64(4 - i), 0})
	}
	steps = append(steps,
		tierStep{0, "k", "pro", Limited, 0, minute},
		tierStep{0, "k", "", Limited, 0, minute},
		tierStep{0, "k", "pro", Limited, 0, minute},
		tierStep{60000, "k", "pro", Allow, 4, 0},
		tierStep{60000, "k", "", Allow, 0, 0}, // 2 of free's 2 counted
		tierStep{60000, "k", "", Limited, 0, minute},
		tierStep{60000, "k", "pro", Allow, 2, 0},
		tierStep{60000, "k", "pro", Allow, 1, 0},
		tierStep{60000, "k", "pro", Allow, 0, 0}, // 5 in the window, across both tiers
		tierStep{60000, "k", "pro", Limited, 0, minute},
	)
	runTierSteps(t, g, steps)
}

// A sliding window's previous count beyond the new capacity is not forgotten: free would admit
// at 90 s if pro's 10 were clamped to free's 2 and left fading.
func TestTierSlidingWindowKeepsTheExcess(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "s", "key": [{"header": "x-user"}],
	  "limits_by": {"part": {"header": "x-plan"}, "default": "free", "tiers": {
	    "free": [{"algorithm": "sliding_window", "capacity": 2, "window": "1m"}],
	    "pro":  [{"algorithm": "sliding_window", "capacity": 10, "window": "1m"}]}}}]}`)
	steps := []tierStep{}
	for i := range 10 {
		steps = append(steps, tierStep{0, "k", "pro", Allow, int64(9 - i), 0})
	}
	steps = append(steps,
		tierStep{90000, "k", "", Limited, 0, time.Minute}, // previous 2 and count 2 (the excess): after the next window
		tierStep{90000, "k", "pro", Allow, 4, 0},          // pro's own: 10 × ½ + 1 counted
	)
	runTierSteps(t, g, steps)
}

// A position whose algorithm differs between tiers carries what the old state has left, at most
// the new capacity: a key never gets more than either algorithm would give it.
func TestTierAlgorithmChange(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "a", "key": [{"header": "x-user"}],
	  "limits_by": {"part": {"header": "x-plan"}, "default": "free", "tiers": {
	    "free": [{"capacity": 3, "refill_tokens": 3, "refill_interval": "3s"}],
	    "pro":  [{"algorithm": "fixed_window", "capacity": 10, "window": "1m"}]}}}]}`)
	runTierSteps(t, g, []tierStep{
		{0, "k", "", Allow, 2, 0},
		{0, "k", "", Allow, 1, 0},
		{0, "k", "", Allow, 0, 0},
		{0, "k", "pro", Limited, 0, time.Minute}, // nothing left: the window of now is spent
		{1000, "k", "pro", Allow, 0, 0},          // the bucket refilled one token by now
		{1000, "k", "pro", Limited, 0, 59 * time.Second},
		{1000, "k", "", Limited, 0, time.Second}, // the window has nothing left either
		{60000, "k", "", Allow, 2, 0},            // a new window: 10 left, 3 fit in the bucket
	})
}

// The tier comes from any key part: here an attribute (metadata an auth filter wrote) and the
// client's network, read as a key part reads them.
func TestTierFromAttributeAndClientIP(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "meta", "key": [{"header": "x-user"}], "limits_by": {"part": {"attribute": ["metadata", "plan"]}, "default": "free",
	    "tiers": {"free": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}], "pro": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]}}},
	  {"name": "net", "key": [{"header": "x-user"}], "limits_by": {"part": {"client_ip": {"ipv4_prefix": 24}}, "default": "outside",
	    "tiers": {"outside": [{"capacity": 5, "refill_tokens": 1, "refill_interval": "1s"}], "10.1.2.0/24": [{"capacity": 9, "refill_tokens": 1, "refill_interval": "1s"}]}}}]}`)
	store := newMemStore()
	for _, c := range []struct {
		user, plan, source string
		quotas             [2]int64
	}{
		{"a", "pro", "10.1.2.3:5000", [2]int64{3, 9}},
		{"b", "", "10.1.3.3:5000", [2]int64{1, 5}},
		{"c", "silver", "[2001:db8::1]:5000", [2]int64{1, 5}},
	} {
		req := fakeRequest{headers: map[string]string{"x-user": c.user}, source: c.source, properties: map[string]string{}}
		if c.plan != "" {
			req.properties["metadata.plan"] = c.plan
		}
		out := g.Admit(req, store, sec)
		if out.Verdict != Allow || len(out.Limits) != 2 || out.Limits[0].Quota != c.quotas[0] || out.Limits[1].Quota != c.quotas[1] {
			t.Errorf("%s: got %+v, want quotas %v", c.user, out, c.quotas)
		}
	}
}

// tierSpec is a token bucket tier of the property test.
type tierSpec struct {
	capacity, tokens int64
	interval         time.Duration
}

func (s tierSpec) json() string {
	return fmt.Sprintf(`[{"capacity": %d, "refill_tokens": %d, "refill_interval": "%s"}]`, s.capacity, s.tokens, s.interval)
}

// rate is the tier's refill in tokens per nanosecond.
func (s tierSpec) rate() *big.Rat { return big.NewRat(s.tokens, int64(s.interval)) }

// tierModel is the reference a tiered token bucket is held to. A key has one level, in tokens,
// exact; the request's tier decides it: the level the last admitted request left (under any
// tier), rounded down to whole tokens and clamped to this tier's capacity when another tier
// left it, then refilled at this tier's rate since then, up to its capacity. Only an admitted
// request changes the state.
type tierModel struct {
	tiers  []tierSpec
	level  *big.Rat
	last   int64
	writer int // the tier of the last admitted request; -1 before the first
}

func (m *tierModel) admit(tier int, now, cost int64) bool {
	spec := m.tiers[tier]
	capacity := new(big.Rat).SetInt64(spec.capacity)
	level, last := new(big.Rat).Set(capacity), now // a new bucket is full
	if m.writer >= 0 {
		level.Set(m.level)
		last = max(m.last, now)
		if m.writer != tier {
			whole := new(big.Int).Quo(level.Num(), level.Denom()) // level ≥ 0: Quo is the floor
			level.SetInt(whole)
			if level.Cmp(capacity) > 0 {
				level.Set(capacity)
			}
		}
		if now > m.last {
			level.Add(level, new(big.Rat).Mul(spec.rate(), new(big.Rat).SetInt64(now-m.last)))
			if level.Cmp(capacity) > 0 {
				level.Set(capacity)
			}
		}
	}
	want := new(big.Rat).SetInt64(cost)
	if level.Cmp(want) < 0 {
		return false
	}
	m.level, m.last, m.writer = level.Sub(level, want), last, tier
	return true
}

// separateBuckets is what tiers with a bucket each would do: the naive design whose switching
// gains, used to show that the bound below can fail.
type separateBuckets struct {
	models []tierModel
}

func (s *separateBuckets) admit(tier int, now, cost int64) bool {
	return s.models[tier].admit(0, now, cost)
}

// admission is one admitted request for the bound.
type admission struct {
	at, cost int64
}

// boundHolds checks that in every interval between two admitted requests the units admitted
// are at most the largest capacity plus the fastest refill over the interval:
//
//	Σ cost of requests admitted in [s, e] ≤ max capacity + max rate × (e - s).
func boundHolds(admitted []admission, capacity int64, rate *big.Rat) bool {
	// With S_k the units admitted up to request k: S_k - S_(i-1) - rate×(t_k - t_i) ≤ capacity
	// for all i ≤ k, kept as a running maximum of rate×t_i - S_(i-1).
	var best *big.Rat
	sum := new(big.Rat)
	for _, a := range admitted {
		candidate := new(big.Rat).Sub(new(big.Rat).Mul(rate, new(big.Rat).SetInt64(a.at)), sum)
		if best == nil || candidate.Cmp(best) > 0 {
			best = candidate
		}
		sum.Add(sum, new(big.Rat).SetInt64(a.cost))
		excess := new(big.Rat).Add(best, sum)
		excess.Sub(excess, new(big.Rat).Mul(rate, new(big.Rat).SetInt64(a.at)))
		if excess.Cmp(new(big.Rat).SetInt64(capacity)) > 0 {
			return false
		}
	}
	return true
}

// TestTierSwitchingNeverGains: a key that changes tier at random instants, with tiers missing
// and unknown, is decided exactly as the reference model decides, and so never admits more in
// any interval [s, e] than the largest capacity of its tiers plus their fastest refill over
// e - s: what one bucket of the most generous tier would admit when one tier has both. Separate
// buckets per tier break that bound on the same requests, so the check can fail.
func TestTierSwitchingNeverGains(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 64))
	intervals := []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, 250 * time.Millisecond, time.Minute}
	naiveBroke := 0
	for trial := range 150 {
		n := 2 + r.IntN(3)
		specs := make([]tierSpec, n)
		var tiers []string
		maxCapacity, maxRate := int64(0), new(big.Rat)
		for i := range specs {
			specs[i] = tierSpec{capacity: 1 + r.Int64N(12), tokens: 1 + r.Int64N(9), interval: intervals[r.IntN(len(intervals))]}
			tiers = append(tiers, fmt.Sprintf(`"t%d": %s`, i, specs[i].json()))
			maxCapacity = max(maxCapacity, specs[i].capacity)
			if specs[i].rate().Cmp(maxRate) > 0 {
				maxRate = specs[i].rate()
			}
		}
		g := mustGate(t, `{"rules": [{"name": "p", "key": [{"header": "x-user"}], "limits_by": {"part": {"header": "x-plan"},
		  "default": "t0", "tiers": {`+strings.Join(tiers, ", ")+`}}}]}`)
		setCollectStatus(g.Policy, r.IntN(2) == 0)
		store := newMemStore()
		model := &tierModel{tiers: specs, writer: -1}
		naive := &separateBuckets{models: make([]tierModel, n)}
		for i := range naive.models {
			naive.models[i] = tierModel{tiers: specs[i : i+1], writer: -1}
		}
		var admitted, naiveAdmitted []admission
		now := 1000 * sec
		for step := range 300 {
			now += r.Int64N(int64(2 * time.Second))
			if r.IntN(4) == 0 {
				now += r.Int64N(int64(30 * time.Second))
			}
			tier := r.IntN(n)
			headers := map[string]string{"x-user": "k"}
			switch c := r.IntN(10); {
			case c == 0: // missing: the default
				tier = 0
			case c == 1: // unknown: the default
				tier, headers["x-plan"] = 0, "t99"
			default:
				headers["x-plan"] = fmt.Sprintf("t%d", tier)
			}
			cost := 1 + r.Int64N(3)
			if cost > specs[tier].capacity || r.IntN(2) == 0 {
				cost = 1
			}
			g.Policy.rules[0].cost.Units = cost
			out := g.Admit(fakeRequest{headers: headers}, store, now)
			want := model.admit(tier, now, cost)
			if got := out.Verdict == Allow; got != want || (out.Verdict != Allow && out.Verdict != Limited) {
				t.Fatalf("trial %d step %d: tier %d at %d cost %d: verdict %d, the model says admitted=%v (tiers %+v)",
					trial, step, tier, now, cost, out.Verdict, want, specs)
			}
			if want {
				admitted = append(admitted, admission{now, cost})
			}
			if naive.admit(tier, now, cost) {
				naiveAdmitted = append(naiveAdmitted, admission{now, cost})
			}
		}
		if !boundHolds(admitted, maxCapacity, maxRate) {
			t.Fatalf("trial %d: the bound fails (tiers %+v)", trial, specs)
		}
		if !boundHolds(naiveAdmitted, maxCapacity, maxRate) {
			naiveBroke++
		}
	}
	if naiveBroke == 0 {
		t.Fatal("separate buckets per tier never broke the bound: the check cannot fail")
	}
	t.Logf("separate buckets per tier broke the bound in %d of 150 trials", naiveBroke)
}

// Choosing the tier allocates nothing, whichever part names it.
func TestTierLookupDoesNotAllocate(t *testing.T) {
	for _, part := range []string{`{"header": "x-plan"}`, `{"client_ip": {"ipv4_prefix": 24}}`, `{"authority": {}}`} {
		g := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits_by": {"part": `+part+`, "default": "free", "tiers": {
		  "free": [{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "1s"}],
		  "pro": [{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "1s"}, {"algorithm": "sliding_window", "capacity": 1000000000, "window": "1m"}],
		  "192.0.2.0/24": [{"capacity": 1000000000, "refill_tokens": 2, "refill_interval": "1s"}],
		  "api.example.com": [{"capacity": 1000000000, "refill_tokens": 3, "refill_interval": "1s"}]}}}]}`)
		setCollectStatus(g.Policy, false)
		store := &steadyStore{values: map[string][]byte{}, cas: map[string]uint32{}}
		for _, plan := range []string{"pro", "free", "gold"} {
			var r Request = req("192.0.2.1:1", "k", "alice", "x-plan", plan)
			g.Admit(r, store, sec)
			allocs := testing.AllocsPerRun(100, func() {
				if out := g.Admit(r, store, sec); out.Verdict != Allow {
					t.Fatalf("%s %s: %+v", part, plan, out)
				}
			})
			if allocs != 0 {
				t.Errorf("%s, plan %s: %.1f allocations per decision, want 0", part, plan, allocs)
			}
		}
	}
}

// BenchmarkTierLookup decides a request of a known key by a rule with limits and by the same
// limits chosen among 64 tiers (the request's tier last, the worst case of the lookup), both on
// the general path (the key is the client address).
func BenchmarkTierLookup(b *testing.B) {
	const bucket = `[{"capacity": 1000000000, "refill_tokens": 1, "refill_interval": "1s"}]`
	var tiers []string
	for i := range 63 {
		tiers = append(tiers, fmt.Sprintf(`"tier-%d": %s`, i, bucket))
	}
	tiers = append(tiers, `"pro": `+bucket)
	for _, c := range []struct{ name, limits string }{
		{"limits", `"limits": ` + bucket},
		{"limits_by-64", `"limits_by": {"part": {"header": "x-plan"}, "default": "tier-0", "tiers": {` + strings.Join(tiers, ", ") + `}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := mustGate(b, `{"rules": [{"name": "r", "key": [{"client_ip": {}}], `+c.limits+`}]}`)
			setCollectStatus(g.Policy, false)
			store := &steadyStore{values: map[string][]byte{}, cas: map[string]uint32{}}
			var r Request = req("192.0.2.1:1", "x-plan", "pro")
			g.Admit(r, store, sec)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if out := g.Admit(r, store, sec); out.Verdict != Allow {
					b.Fatal(out.Verdict)
				}
			}
		})
	}
}

// Calendar windows carry their count to a calendar window of the same unit; between a calendar
// window (wall clock) and a token bucket (monotonic clock) each state is read on its own clock.
func TestTierCalendarWindows(t *testing.T) {
	g := mustGate(t, `{"rules": [
	  {"name": "daily", "match": {"headers": [{"name": "x-rule", "exact": "daily"}]}, "key": [{"header": "x-user"}], "limits_by": {"part": {"header": "x-plan"}, "default": "free", "tiers": {
	    "free": [{"algorithm": "fixed_window", "capacity": 2, "calendar": "day"}],
	    "pro":  [{"algorithm": "fixed_window", "capacity": 5, "calendar": "day"}]}}},
	  {"name": "mixed", "match": {"headers": [{"name": "x-rule", "exact": "mixed"}]}, "key": [{"header": "x-user"}], "limits_by": {"part": {"header": "x-plan"}, "default": "free", "tiers": {
	    "free": [{"capacity": 3, "refill_tokens": 3, "refill_interval": "1h"}],
	    "pro":  [{"algorithm": "fixed_window", "capacity": 10, "calendar": "day"}]}}}]}`)
	clock := &wallClock{at: utcNanos(2025, 3, 10, 12)}
	g.SetWallClock(clock.read)
	store := newMemStore()
	steps := []struct {
		user, plan string
		mono       int64
		wall       int64
		verdict    Verdict
		rule       int
	}{
		// daily: pro counts 4 of its 5, free finds them (at or above its 2) and rejects.
		{"a", "pro", sec, utcNanos(2025, 3, 10, 12), Allow, -1},
		{"a", "pro", sec, utcNanos(2025, 3, 10, 12), Allow, -1},
		{"a", "pro", sec, utcNanos(2025, 3, 10, 12), Allow, -1},
		{"a", "pro", sec, utcNanos(2025, 3, 10, 12), Allow, -1},
		{"a", "", sec, utcNanos(2025, 3, 10, 13), Limited, 0},
		{"a", "pro", sec, utcNanos(2025, 3, 10, 13), Allow, -1},
		{"a", "pro", sec, utcNanos(2025, 3, 10, 13), Limited, 0},
		// The next day, free has its 2.
		{"a", "", sec, utcNanos(2025, 3, 11, 0), Allow, -1},
		{"a", "", sec, utcNanos(2025, 3, 11, 0), Allow, -1},
		{"a", "", sec, utcNanos(2025, 3, 11, 0), Limited, 0},
		{"a", "pro", sec, utcNanos(2025, 3, 11, 0), Allow, -1}, // 2 of pro's 5 used
	}
	// mixed: b spends 2 of free's 3 tokens; pro's day then has 1 left; back in free, pro's spent
	// day leaves nothing, however far the monotonic clock goes, until the wall clock's next day
	// (10 left there, 3 of which fit in free's bucket).
	for _, s := range []struct {
		plan    string
		mono    int64
		day     int
		verdict Verdict
	}{{"", sec, 10, Allow}, {"", sec, 10, Allow}, {"pro", 2 * sec, 10, Allow}, {"pro", 2 * sec, 10, Limited},
		{"", 2 * sec, 10, Limited}, {"", 7200 * sec, 10, Limited},
		{"", 7200 * sec, 11, Allow}, {"", 7200 * sec, 11, Allow}, {"", 7200 * sec, 11, Allow}, {"", 7200 * sec, 11, Limited}} {
		steps = append(steps, struct {
			user, plan string
			mono       int64
			wall       int64
			verdict    Verdict
			rule       int
		}{"b", s.plan, s.mono, utcNanos(2025, 3, s.day, 14), s.verdict, map[bool]int{true: -1, false: 1}[s.verdict == Allow]})
	}
	for i, s := range steps {
		clock.at = s.wall
		headers := map[string]string{"x-user": s.user, "x-rule": map[string]string{"a": "daily", "b": "mixed"}[s.user]}
		if s.plan != "" {
			headers["x-plan"] = s.plan
		}
		out := g.Admit(fakeRequest{headers: headers}, store, s.mono)
		if out.Verdict != s.verdict || out.Rule != s.rule {
			t.Fatalf("step %d (%s %q): verdict %d rule %d, want %d rule %d", i, s.user, s.plan, out.Verdict, out.Rule, s.verdict, s.rule)
		}
	}
}
