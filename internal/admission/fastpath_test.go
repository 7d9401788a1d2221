package admission

import (
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// interesting are values around the edges of the bucket's arithmetic, mixed into random ones.
var interesting = []int64{0, 1, 2, 3, 7, 10, 999, 1000, 1001, 1e9, 1e12, 1 << 31, 1<<32 + 1, 1 << 40,
	1<<62 - 1, 1 << 62, 1<<62 + 1, math.MaxInt64 - 1, math.MaxInt64, -1, -2, -1e9, math.MinInt64}

func pick(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return interesting[r.IntN(len(interesting))]
	case 1:
		return r.Int64N(100) - 10
	case 2:
		return r.Int64N(1e12)
	}
	return int64(r.Uint64())
}

// The token bucket's written-out take, valid and idleAt decide exactly as limiter.Bucket (and the
// formulas it replaced) on every state, time and cost: the same admission, wait and next state,
// and, when it describes, the same Remaining and Reset. Random limits and states, weighted towards
// the edges of the arithmetic and towards long quotas whose level needs more than 64 bits of
// credits (up to 10^9 tokens refilled over 366 days), over many seeds.
func TestTokenBucketMatchesLimiter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const day = int64(24 * time.Hour)
	checked := 0
	for checked < 300_000 {
		l := config.Limit{Capacity: pick(r), RefillTokens: pick(r), RefillInterval: time.Duration(pick(r))}
		switch r.IntN(4) { // realistic shapes most of the time
		case 0:
			l = config.Limit{Capacity: 1 + r.Int64N(1000), RefillTokens: 1 + r.Int64N(100), RefillInterval: time.Duration(1 + r.Int64N(int64(time.Hour)))}
		case 1:
			l = config.Limit{Capacity: 1 + r.Int64N(1e9), RefillTokens: 1 + r.Int64N(100), RefillInterval: time.Duration(1 + r.Int64N(366*day))}
		case 2:
			l = config.Limit{Capacity: []int64{53_376, 100_000, 1e9}[r.IntN(3)], RefillTokens: 1 + r.Int64N(3),
				RefillInterval: time.Duration([]int64{day, 7 * day, 30 * day, 366 * day}[r.IntN(4)])}
		}
		describe := r.IntN(2) == 0
		algo, err := newAlgorithm(l, describe)
		if err != nil {
			continue
		}
		tb := algo.(*tokenBucket)
		ref, err := limiter.NewBucket(limiter.BucketLimit{Capacity: l.Capacity, RefillTokens: l.RefillTokens, RefillInterval: l.RefillInterval})
		if err != nil {
			t.Fatalf("%+v: the limiter refuses a limit the adapter accepts: %v", l, err)
		}
		perToken := ref.CreditsPerToken()
		for range 20 {
			c := cells{pick(r), pick(r), pick(r)}
			switch r.IntN(4) {
			case 0, 1: // a state in range
				c[0], c[2] = r.Int64N(l.Capacity)+r.Int64N(2), r.Int64N(perToken)
				if c[0] >= l.Capacity {
					c[0], c[2] = l.Capacity, 0
				}
			case 2:
				c[2] = r.Int64N(perToken)
			}
			now, n := pick(r), pick(r)
			switch r.IntN(3) {
			case 0:
				now, n = c[1]+r.Int64N(int64(10*time.Second)), r.Int64N(min(l.Capacity, 1e6)+2)
			case 1:
				now, n = c[1]+r.Int64N(400*day), 1+r.Int64N(min(l.Capacity, 1e6)+1)
			}
			gotCells, got := tb.take(c, now, n)
			wantState, want := ref.Take(bucketState(c), now, n)
			wantCells := bucketCells(wantState)
			if !describe {
				want.Remaining, want.Reset = 0, 0
				if got.Remaining != 0 || got.Reset != 0 { // left to the limiter, which always describes
					got.Remaining, got.Reset = 0, 0
				}
			}
			if gotCells != wantCells || got != want {
				t.Fatalf("%+v describe %v: take(%v, now %d, n %d) = %v %+v, the limiter %v %+v", l, describe, c, now, n, gotCells, got, wantCells, want)
			}
			if got, want := tb.valid(c), ref.Valid(bucketState(c)); got != want {
				t.Fatalf("%+v: valid(%v) = %v, want %v", l, c, got, want)
			}
			if got, want := tb.idleAt(c), referenceIdleAt(ref, c); got != want {
				t.Fatalf("%+v: idleAt(%v) = %d, want %d", l, c, got, want)
			}
			checked++
		}
	}
}

// referenceIdleAt is idleAt in big integers: the clamped state's last update plus the credits it
// lacks divided by the credits per nanosecond, rounded up; math.MaxInt64 beyond it.
func referenceIdleAt(b limiter.Bucket, c cells) int64 {
	capacity, perToken := b.Limit().Capacity, b.CreditsPerToken()
	tokens, credits := min(max(c[0], 0), capacity), min(max(c[2], 0), perToken-1)
	if tokens == capacity {
		return c[1]
	}
	missing := new(big.Int).Mul(big.NewInt(capacity-tokens), big.NewInt(perToken))
	missing.Sub(missing, big.NewInt(credits))
	wait, rem := new(big.Int).QuoRem(missing, big.NewInt(b.CreditsPerNano()), new(big.Int))
	if rem.Sign() != 0 {
		wait.Add(wait, big.NewInt(1))
	}
	idle := wait.Add(wait, big.NewInt(c[1]))
	if !idle.IsInt64() {
		return math.MaxInt64
	}
	return idle.Int64()
}

// countingRequest counts the reads a decision makes of a request.
type countingRequest struct {
	fakeRequest
	reads *int
}

func (r countingRequest) Header(name string) (string, bool) {
	*r.reads++
	return r.fakeRequest.Header(name)
}

// The fast path for the common rule shape, with the key table's shortcuts for a known key, decides
// exactly as the general path taken plainly (Policy.plain): for random
// configurations of that shape (missing-key policies, costs, one to three limits of every
// algorithm, headers on or off, small tables that force sharing, short key limits) and random
// requests (known, new, empty, missing and over-long keys) at random times, both give the same
// Outcome, read the request as often, and leave shared data the same.
func TestFastPathMatchesGeneral(t *testing.T) {
	limits := []string{
		`{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}`,
		`{"capacity": 1, "refill_tokens": 1, "refill_interval": "24h"}`,
		`{"capacity": 1000000000, "refill_tokens": 1000000000, "refill_interval": "1s"}`,
		`{"algorithm": "fixed_window", "capacity": 2, "window": "1s"}`,
		`{"algorithm": "sliding_window", "capacity": 5, "window": "2s"}`,
		`{"capacity": 100000, "refill_tokens": 1, "refill_interval": "1d"}`,
		`{"capacity": 1000000000, "refill_tokens": 3, "refill_interval": "366d"}`,
		`{"algorithm": "fixed_window", "capacity": 4, "window": "7d"}`,
		`{"algorithm": "fixed_window", "capacity": 3, "calendar": "day"}`,
		`{"algorithm": "fixed_window", "capacity": 6, "calendar": "month"}`,
	}
	missing := []string{``, `, "missing_key": {"action": "allow"}`, `, "missing_key": {"action": "reject", "status": 403}`,
		`, "missing_key": {"action": "fallback", "key": [{"client_ip": {}}]}`}
	costs := []string{``, `, "cost": 0`, `, "cost": 2`}
	// Count and refund keep a rule on the fast path: the decision is the same, and the charge
	// is held from the Outcome, which both paths fill alike; the steps settle it on both.
	outcomes := []string{``, `, "count": {"statuses": ["401"]}`, `, "refund": {"statuses": ["5xx"]}`}
	r := rand.New(rand.NewPCG(3, 4))
	longKey := strings.Repeat("k", fastKeyBytes+1)
	for round := range 300 {
		var ls []string
		for range 1 + r.IntN(3) {
			ls = append(ls, limits[r.IntN(len(limits))])
		}
		headers := []string{`"off"`, `"draft"`}[r.IntN(2)]
		whenFull := []string{"overflow", "reject", "allow"}[r.IntN(3)]
		doc := `{"rate_limit_headers": ` + headers + `, "key_table": {"max_keys": ` + []string{"16", "100000"}[r.IntN(2)] +
			`, "when_full": "` + whenFull + `", "max_key_bytes": ` + []string{"16", "1024"}[r.IntN(2)] + `},
		  "rules": [{"name": "r", "key": [{"header": "x-api-key"}], "limits": [` + strings.Join(ls, ", ") + `]` +
			missing[r.IntN(len(missing))] + costs[r.IntN(len(costs))] + outcomes[r.IntN(len(outcomes))] + `}]}`
		cfg, err := config.Parse([]byte(doc))
		if err != nil {
			continue // a cost above a capacity
		}
		gates := [2]*Gate{}
		stores := [2]*memStore{newMemStore(), newMemStore()}
		// The wall clock runs with the monotonic one from 20 seconds before a month ends, and is
		// sometimes stepped back by up to a day.
		now, wallOffset := int64(1000*sec), utcNanos(2025, 1, 31, 23)+int64(59*time.Minute+40*time.Second)-1000*sec
		wall := func() (int64, error) { return now + wallOffset, nil }
		for i := range gates {
			p, err := Compile(cfg, "test")
			if err != nil {
				t.Fatal(err)
			}
			secret := uint64(round)
			if err := p.LoadSecret(stores[i], func() uint64 { secret++; return secret }); err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				p.fast, p.plain = nil, true // the general path, without shortcuts
			}
			gates[i] = NewGate(p)
			gates[i].SetWallClock(wall)
		}
		if gates[0].fast == nil {
			t.Fatalf("%s: not the fast shape", doc)
		}
		keys := []string{"alice", "bob", "carol", "", longKey, strings.Repeat("x", 14)}
		var held [2][]*Pending
		for step := range 60 {
			now += r.Int64N(800 * int64(time.Millisecond))
			if r.IntN(20) == 0 {
				wallOffset -= r.Int64N(int64(24 * time.Hour))
			}
			req := fakeRequest{headers: map[string]string{}, source: "192.0.2.7:4000"}
			if k := r.IntN(len(keys) + 1); k < len(keys) {
				req.headers["x-api-key"] = keys[k]
			} else if r.IntN(2) == 0 {
				req.source = "" // no key and no address either
			}
			var reads [2]int
			var outs [2]Outcome
			for i, g := range gates {
				outs[i] = *g.Admit(countingRequest{req, &reads[i]}, stores[i], now)
			}
			if !reflect.DeepEqual(outs[0], outs[1]) || reads[0] != reads[1] {
				t.Fatalf("%s\nround %d step %d, request %+v:\n fast    %+v (%d reads)\n general %+v (%d reads)",
					doc, round, step, req, outs[0], reads[0], outs[1], reads[1])
			}
			for i, g := range gates {
				p := &Pending{}
				g.Admit(req, stores[i], now).Hold(p) // decided again: a second request at now
				held[i] = append(held[i], p)
			}
			if len(held[0]) > 0 && r.IntN(2) == 0 {
				status := []int{0, 200, 401, 503}[r.IntN(4)]
				var given [2][]int
				for i, g := range gates {
					given[i] = slices.Clone(g.Settle(stores[i], held[i][0], status, now))
					held[i] = held[i][1:]
				}
				if !slices.Equal(given[0], given[1]) {
					t.Fatalf("%s\nround %d step %d: settled %v on the fast path, %v on the general one", doc, round, step, given[0], given[1])
				}
			}
		}
		if !reflect.DeepEqual(stores[0].entries(), stores[1].entries()) {
			t.Fatalf("%s\nround %d: shared data differs", doc, round)
		}
	}
}

// fastShape checks every field of config.Match, config.Exemptions and config.Rule that could take
// a request off the fast path: a field added to one of them must be considered there too, or the
// fast path would ignore it.
func TestFastShapeKnowsEveryMatchField(t *testing.T) {
	for typ, want := range map[reflect.Type]int{reflect.TypeOf(config.Match{}): 4, reflect.TypeOf(config.Exemptions{}): 3, reflect.TypeOf(config.Rule{}): 12} {
		if typ.NumField() != want {
			t.Errorf("config.%s has %d fields, fastShape knows %d: check it against the new ones", typ.Name(), typ.NumField(), want)
		}
	}
}

// appendDecimal writes what strconv.AppendInt writes.
func TestAppendDecimal(t *testing.T) {
	for _, n := range append([]int{0, 1, 9, 10, 99, 100, 65536, 1<<31 - 1, math.MaxInt64}, rand.Perm(20000)...) {
		if got, want := string(appendDecimal([]byte("x"), n)), "x"+strconv.Itoa(n); got != want {
			t.Fatalf("appendDecimal(%d) = %q, want %q", n, got, want)
		}
	}
}

// slotKey writes what the prefix and strconv.FormatUint(index, 16) make, whatever it wrote before.
func TestSlotKeyMatchesStrconv(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 100_000 {
		index := r.Uint64() >> r.IntN(64)
		if i < len(interesting) {
			index = uint64(interesting[i])
		}
		want := g.slotPrefix + strconv.FormatUint(index, 16)
		for range 1 + r.IntN(2) { // once, or again right after (the key kept in the buffer)
			if got := g.slotKey(index); got != want {
				t.Fatalf("slotKey(%d) = %q, want %q", index, got, want)
			}
		}
	}
}

// undo gives back what the reference, on levels in big integers, says is still owed: n tokens,
// or the room above the most the bucket can have held since the write (its written level
// refilled to the later of now and the state's last update), whichever is less, added to the
// state refilled to now; and nothing, leaving the state as it is, once the bucket may have been
// full since. Random long and short limits, states and times.
func TestTokenBucketUndoMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const day = int64(24 * time.Hour)
	for checked := 0; checked < 100_000; {
		l := config.Limit{Capacity: 1 + r.Int64N(1000), RefillTokens: 1 + r.Int64N(100), RefillInterval: time.Duration(1 + r.Int64N(int64(time.Hour)))}
		if r.IntN(2) == 0 {
			l = config.Limit{Capacity: []int64{53_376, 100_000, 1e9}[r.IntN(3)], RefillTokens: 1 + r.Int64N(3),
				RefillInterval: time.Duration([]int64{day, 7 * day, 366 * day}[r.IntN(3)])}
		}
		algo, err := newAlgorithm(l, false)
		if err != nil {
			t.Fatal(err)
		}
		tb := algo.(*tokenBucket)
		perToken, perNano := tb.creditsPerToken, tb.creditsPerNano
		level := func(c cells) *big.Int {
			v := new(big.Int).Mul(big.NewInt(c[0]), big.NewInt(perToken))
			return v.Add(v, big.NewInt(c[2]))
		}
		full := new(big.Int).Mul(big.NewInt(l.Capacity), big.NewInt(perToken))
		refilled := func(c cells, at int64) *big.Int {
			v := level(c)
			if at > c[1] {
				v.Add(v, new(big.Int).Mul(big.NewInt(at-c[1]), big.NewInt(perNano)))
			}
			if v.Cmp(full) > 0 {
				v.Set(full)
			}
			return v
		}
		state := func() cells {
			tokens := r.Int64N(l.Capacity + 1)
			credits := r.Int64N(perToken)
			if tokens == l.Capacity {
				credits = 0
			}
			return cells{tokens, int64(1e15) + r.Int64N(30*day), credits}
		}
		for range 10 {
			written, c := state(), state()
			c[1] = max(c[1], written[1]) // written first, then others
			now, n := c[1]-r.Int64N(day)+r.Int64N(2*day), r.Int64N(l.Capacity+2)-1
			got := level(tb.undo(c, written, now, n))
			end := max(now, c[1])
			want := level(c) // nothing owed: the state is left as it is
			if peak := refilled(written, end); peak.Cmp(full) < 0 && n > 0 {
				want = refilled(c, now)
				owed := new(big.Int).Mul(big.NewInt(min(n, l.Capacity)), big.NewInt(perToken))
				if room := new(big.Int).Sub(full, peak); room.Cmp(owed) < 0 {
					owed = room
				}
				want.Add(want, owed)
				if want.Cmp(full) > 0 {
					want.Set(full)
				}
			}
			if got.Cmp(want) != 0 {
				t.Fatalf("%+v: undo(%v, written %v, now %d, n %d) = level %v, want %v", l, c, written, now, n, got, want)
			}
			checked++
		}
	}
}
