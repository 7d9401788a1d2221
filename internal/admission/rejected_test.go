package admission

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/duration"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// perKey is the fast shape with a plain token bucket: 2 per key, then 1 a second.
const perKey = `{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`

// ownMemory gives g a memory of rejected buckets of its own, as a Gate in a VM of its own has
// when its policy lets it remember (natively, RememberRejected gives none).
func ownMemory(g *Gate) *Gate {
	if g.remembersRejected {
		g.holdRejected(new(rejectedBuckets))
	}
	return g
}

// Two worker VMs (gates a and b) share one bucket. A rejected key is answered from the VM's
// memory until its refill reaches the cost, with the Retry-After a read would give; each VM
// remembers on its own; a reset is seen at once by the VM that made it and by the other at its
// tick (ForgetRejected).
func TestRejectedBucketsAreRemembered(t *testing.T) {
	p := mustGate(t, perKey).Policy
	gates := map[string]*Gate{"a": ownMemory(NewGate(p)), "b": ownMemory(NewGate(p))}
	store := newMemStore()
	base := 1000 * sec
	ms := int64(time.Millisecond)
	alice := header("x-api-key", "alice")
	steps := []struct {
		gate    string
		at      int64
		do      string // "admit" (the default), "reset" alice whole, "tick"
		verdict Verdict
		retry   time.Duration
		reads   int64 // of shared data
	}{
		{gate: "a", verdict: Allow, reads: 1},
		{gate: "a", verdict: Allow, reads: 1},
		{gate: "a", verdict: Limited, retry: time.Second, reads: 1},
		// From a's memory: no read, and the wait shrinks with the clock.
		{gate: "a", at: 400 * ms, verdict: Limited, retry: 600 * time.Millisecond},
		{gate: "a", at: 400 * ms, verdict: Limited, retry: 600 * time.Millisecond},
		// b reads, then remembers on its own.
		{gate: "b", at: 500 * ms, verdict: Limited, retry: 500 * time.Millisecond, reads: 1},
		{gate: "b", at: 600 * ms, verdict: Limited, retry: 400 * time.Millisecond},
		{gate: "a", at: 999 * ms, verdict: Limited, retry: time.Millisecond},
		// The refill reaches the cost: a reads, and takes the token.
		{gate: "a", at: 1000 * ms, verdict: Allow, reads: 1},
		// b's memory would admit: b reads, and finds the token taken.
		{gate: "b", at: 1000 * ms, verdict: Limited, retry: time.Second, reads: 1},
		{gate: "b", at: 1200 * ms, verdict: Limited, retry: 800 * time.Millisecond},
		{gate: "a", at: 1500 * ms, verdict: Limited, retry: 500 * time.Millisecond, reads: 1},
		// b resets alice whole (one read, one write): b sees it at once, a at its tick.
		{gate: "b", at: 1600 * ms, do: "reset", reads: 1},
		{gate: "a", at: 1700 * ms, verdict: Limited, retry: 300 * time.Millisecond},
		{gate: "b", at: 1700 * ms, verdict: Allow, reads: 1},
		{gate: "a", at: 1800 * ms, do: "tick"},
		{gate: "a", at: 1800 * ms, verdict: Allow, reads: 1},
		{gate: "a", at: 1800 * ms, verdict: Limited, retry: 900 * time.Millisecond, reads: 1},
	}
	for i, s := range steps {
		g := gates[s.gate]
		before := store.data.Stats().Gets
		switch s.do {
		case "reset":
			key, _ := g.KeyOf(0, []string{"alice"})
			if _, err := g.Reset(store, 0, key, true, 0, base+s.at); err != nil {
				t.Fatalf("step %d: reset: %v", i, err)
			}
		case "tick":
			g.ForgetRejected()
		default:
			out := g.Admit(alice, store, base+s.at)
			if out.Verdict != s.verdict || out.RetryAfter != s.retry {
				t.Fatalf("step %d (%s at %d ms): %v, retry %v; want %v, retry %v",
					i, s.gate, s.at/ms, out.Verdict, out.RetryAfter, s.verdict, s.retry)
			}
		}
		if reads := store.data.Stats().Gets - before; reads != s.reads {
			t.Fatalf("step %d (%s at %d ms): %d reads of shared data, want %d", i, s.gate, s.at/ms, reads, s.reads)
		}
	}
}

// Rules whose bucket can gain other than by its refill keep no memory: a count or refund rule
// gives charges back at the response, which another VM's memory would not see.
func TestRejectedBucketsOnlyForPlainBuckets(t *testing.T) {
	for _, c := range []struct {
		name     string
		doc      string
		remember bool
	}{
		{"plain bucket", perKey, true},
		{"count", `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}], "count": {"statuses": ["5xx"]},
		  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`, false},
		{"refund", `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}], "refund": {"statuses": ["5xx"]},
		  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`, false},
		{"delay", `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}], "on_limit": {"action": "delay", "max_delay": "1s"},
		  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`, false},
		{"window", `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}],
		  "limits": [{"algorithm": "fixed_window", "capacity": 1, "window": "1s"}]}]}`, false},
		{"two rules", `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]},
		  {"name": "s", "key": [{"header": "x-user"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`, false},
	} {
		g := mustGate(t, c.doc)
		if got := g.remembersRejected; got != c.remember {
			t.Errorf("%s: remembers rejections %v, want %v", c.name, got, c.remember)
		}
	}
}

// The memory holds rejectedWays buckets per set, replaced in turn, and an owner of 0
// (no owner) is never remembered.
func TestRejectedBucketsReplacedInTurn(t *testing.T) {
	m := new(rejectedBuckets)
	const top = uint64(5) << (64 - rejectedSetBits) // one set, whatever the low bits
	for i := range uint64(rejectedWays + 2) {
		m.remember(top|i+1, limiter.BucketState{Tokens: int64(i)}, limiter.Decision{}, 0)
		m.remember(top|i+1, limiter.BucketState{Tokens: int64(i), Last: 1}, limiter.Decision{}, 0) // again: in place
	}
	for i := range uint64(rejectedWays + 2) {
		e := m.find(top | i + 1)
		if kept := i >= 2; (e != nil) != kept || (kept && e.state != (limiter.BucketState{Tokens: int64(i), Last: 1})) {
			t.Errorf("owner %d: remembered %+v, want it kept %v", i+1, e, kept)
		}
	}
	m.remember(0, limiter.BucketState{}, limiter.Decision{}, 0)
	if m.find(0) != nil {
		t.Error("an owner of 0 is remembered")
	}
	m.forget()
	for i := range uint64(rejectedWays + 2) {
		if m.find(top|i+1) != nil {
			t.Fatalf("owner %d remembered after forget", i+1)
		}
	}
}

// A remembered bucket answers its rejected request again from its retry instant (rejectsAt):
// rejected until the instant, with the wait to it (from the state's Last when the clock reads
// behind it), forgotten from it on; and never when the rejection had no retry instant below
// math.MaxInt64, whose key is then read again.
func TestRejectsAtItsRetryInstant(t *testing.T) {
	const owner = uint64(7) << (64 - rejectedSetBits)
	never := limiter.Decision{RetryAfter: duration.Duration(math.MaxInt64)}
	steps := []struct {
		name      string
		last, now int64 // the state's Last, and the instant the request was rejected at
		d         limiter.Decision
		at        int64 // the instant asked
		wait      duration.Duration
		rejected  bool
	}{
		{"before the instant", 100, 100, limiter.Decision{RetryAfter: 50}, 120, 30, true},
		{"a clock behind Last", 100, 100, limiter.Decision{RetryAfter: 50}, 90, 50, true},
		{"at the instant", 100, 100, limiter.Decision{RetryAfter: 50}, 150, 0, false},
		{"never admitted", 100, 100, never, 120, 0, false},
		{"an instant beyond int64", math.MaxInt64 - 10, math.MaxInt64 - 10, limiter.Decision{RetryAfter: 20}, math.MaxInt64 - 5, 0, false},
	}
	for _, s := range steps {
		m := new(rejectedBuckets)
		m.remember(owner, limiter.BucketState{Last: s.last}, s.d, s.now)
		wait, rejected := m.find(owner).rejectsAt(s.at)
		if wait != s.wait || rejected != s.rejected {
			t.Errorf("%s: rejectsAt(%d) = %v, %v; want %v, %v", s.name, s.at, wait, rejected, s.wait, s.rejected)
		}
		if remembered := m.find(owner) != nil; remembered != s.rejected {
			t.Errorf("%s: remembered after the request %v, want %v", s.name, remembered, s.rejected)
		}
	}
}

// Remembered rejections decide exactly as reads of shared data would: three VMs with the memory
// and three without, each trio on its shared data, given the same requests at the same instants
// (random keys, costs, buckets, the clock moving by random steps or standing still, operator
// resets followed by every VM's tick) give the same Outcome, status headers included, and leave
// the same shared data; and the memory saves reads.
func TestRememberedRejectionsMatchReads(t *testing.T) {
	buckets := []string{
		`"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"`,
		`"capacity": 3, "refill_tokens": 1, "refill_interval": "700ms"`,
		`"capacity": 10, "refill_tokens": 3, "refill_interval": "1s"`,
		`"capacity": 5, "refill_tokens": 1, "refill_interval": "24h"`,
		`"capacity": 1000, "refill_tokens": 7, "refill_interval": "1ms"`,
	}
	r := rand.New(rand.NewPCG(5, 6))
	var reads [2]int64
	for round := range 200 {
		cost := 1 + r.IntN(3)
		doc := `{"rate_limit_headers": "` + []string{"off", "draft"}[r.IntN(2)] + `", "rules": [{"name": "r",
		  "key": [{"header": "x-api-key"}], "cost": ` + strconv.Itoa(cost) + `, "limits": [{` + buckets[r.IntN(len(buckets))] + `}]}]}`
		cfg, err := config.Parse([]byte(doc))
		if err != nil {
			continue // a cost above the capacity
		}
		var gates [2][3]*Gate
		stores := [2]*memStore{newMemStore(), newMemStore()}
		for i := range gates {
			p, err := Compile(cfg, "test")
			if err != nil {
				t.Fatal(err)
			}
			p.collectStatus = cfg.RateLimitHeaders != config.HeadersOff
			for j := range gates[i] {
				gates[i][j] = ownMemory(NewGate(p))
				if i == 1 {
					gates[i][j].holdRejected(nil)
				}
			}
		}
		if gates[0][0].remembered() == nil {
			t.Fatalf("%s: no memory", doc)
		}
		now := 1000 * sec
		for step := range 200 {
			switch r.IntN(4) {
			case 0:
				now += r.Int64N(int64(2 * time.Second))
			case 1:
				now += r.Int64N(int64(time.Millisecond))
			}
			key := "k" + strconv.Itoa(r.IntN(4))
			vm := r.IntN(3)
			if r.IntN(30) == 0 {
				level, whole := r.Int64N(3), r.IntN(2) == 0
				for i := range gates {
					g := gates[i][vm]
					pk, _ := g.KeyOf(0, []string{key})
					if _, err := g.Reset(stores[i], 0, pk, whole, level, now); err != nil {
						t.Fatal(err)
					}
					for _, other := range gates[i] {
						other.ForgetRejected() // every VM's tick
					}
				}
				continue
			}
			var outs [2]Outcome
			for i := range gates {
				before := stores[i].data.Stats().Gets
				outs[i] = *gates[i][vm].Admit(header("x-api-key", key), stores[i], now)
				reads[i] += stores[i].data.Stats().Gets - before
			}
			if !reflect.DeepEqual(outs[0], outs[1]) {
				t.Fatalf("%s\nround %d step %d, VM %d, key %s:\n remembered %+v\n read       %+v", doc, round, step, vm, key, outs[0], outs[1])
			}
		}
		if !reflect.DeepEqual(stores[0].entries(), stores[1].entries()) {
			t.Fatalf("%s\nround %d: shared data differs", doc, round)
		}
	}
	if reads[0] >= reads[1]*9/10 {
		t.Errorf("with the memory %d reads, without %d: the memory saved less than a tenth", reads[0], reads[1])
	}
}

// A VM has one memory of rejected buckets, held by the Gate that took it last: a Gate of the
// plugin's previous configuration, still deciding while its streams finish, reads shared data for every
// request (and decides as before), and the new Gate starts with nothing remembered.
func TestNewestGateHoldsTheVMsMemory(t *testing.T) {
	p := mustGate(t, perKey).Policy
	store := newMemStore()
	alice := header("x-api-key", "alice")
	admit := func(g *Gate) (Verdict, int64) {
		before := store.data.Stats().Gets
		out := g.Admit(alice, store, sec)
		return out.Verdict, store.data.Stats().Gets - before
	}
	vm := new(rejectedBuckets) // the VM's, as RememberRejected gives it in the module
	old := NewGate(p)
	old.holdRejected(vm)
	for _, want := range []struct {
		verdict Verdict
		reads   int64
	}{{Allow, 1}, {Allow, 1}, {Limited, 1}, {Limited, 0}} {
		if v, reads := admit(old); v != want.verdict || reads != want.reads {
			t.Fatalf("old Gate: %v with %d reads, want %v with %d", v, reads, want.verdict, want.reads)
		}
	}
	newer := NewGate(p)
	newer.holdRejected(vm)
	for i, want := range []struct {
		g     *Gate
		reads int64
	}{{old, 1}, {newer, 1}, {newer, 0}, {old, 1}} {
		if v, reads := admit(want.g); v != Limited || reads != want.reads {
			t.Fatalf("step %d after the new Gate: %v with %d reads, want Limited with %d", i, v, reads, want.reads)
		}
	}
	old.ForgetRejected() // forgets nothing of the new Gate's
	if _, reads := admit(newer); reads != 0 {
		t.Errorf("the new Gate read shared data after the old one forgot")
	}
	native := NewGate(p)
	native.RememberRejected()
	if native.rejected != nil {
		t.Errorf("natively, RememberRejected gave a Gate a memory")
	}
}

// With each VM's clock read a little before it decides (readings up to 2 ms old, in any order
// across VMs), a rejection from the memory differs from what a read would give only where the
// bucket as stored was written at a later reading than the request's: then it is a rejection,
// decided at the request's own reading. Each decision of three VMs with the memory is compared
// with a read of the same shared data at that moment (a Gate without the memory, on a copy).
func TestRememberedRejectionsWithStaleClocks(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"rules": [{"name": "r", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1ms"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	var vms [3]*Gate
	for i := range vms {
		vms[i] = ownMemory(NewGate(p))
	}
	reader := NewGate(p)
	reader.holdRejected(nil)
	store := newMemStore()
	r := rand.New(rand.NewPCG(7, 8))
	now := 1000 * sec
	differed, hits := 0, 0
	for step := range 100_000 {
		now += r.Int64N(int64(300 * time.Microsecond))
		at := now - r.Int64N(int64(2*time.Millisecond)) // the VM's clock, read a while ago
		key := "k" + strconv.Itoa(r.IntN(3))
		copied := newMemStore()
		for k, v := range store.entries() {
			copied.put(k, v)
		}
		read := *reader.Admit(header("x-api-key", key), copied, at)
		before := store.data.Stats().Gets
		got := *vms[r.IntN(len(vms))].Admit(header("x-api-key", key), store, at)
		if store.data.Stats().Gets != before {
			continue // decided on a read
		}
		hits++
		if got.Verdict != Limited {
			t.Fatalf("step %d: the memory answered %v", step, got.Verdict)
		}
		if reflect.DeepEqual(got, read) {
			continue
		}
		differed++
		st, ok := storedSlot(reader, store, &reader.rules[0].limits[0], strconv.Itoa(len(key))+":"+key)
		if last := bucketState(st.cells).Last; !ok || last <= at {
			t.Fatalf("step %d at %d: the memory gave %+v, a read %+v, and the bucket was last written at %d, not after the request's clock",
				step, at, got, read, last)
		}
	}
	t.Logf("%d decisions from the memory, %d of them unlike a read", hits, differed)
	if hits == 0 || differed == 0 {
		t.Fatalf("%d decisions from the memory, %d unlike a read: the test exercises neither", hits, differed)
	}
}
