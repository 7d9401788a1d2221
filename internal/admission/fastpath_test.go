package admission

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// interesting are values around the edges of 64-bit arithmetic, mixed into random ones.
var interesting = []int64{0, 1, 2, 3, 7, 10, 999, 1000, 1001, 1e9, 1e12, 1 << 31, 1<<32 + 1, 1 << 40,
	1<<62 - 1, 1 << 62, 1<<62 + 1, math.MaxInt64 - 1, math.MaxInt64, -1, -2, -1e9, math.MinInt64}

// countingRequest counts the reads a decision makes of a request.
type countingRequest struct {
	fakeRequest
	reads *int
}

func (r countingRequest) Header(name string) (string, bool) {
	*r.reads++
	return r.fakeRequest.Header(name)
}

// The fast path for the common rule shape, and the lean path where the shape allows it (one
// plain token bucket, no headers, nothing settled), decide exactly as the general path: for random
// configurations of that shape (missing-key policies, costs, one to three limits of every
// algorithm, headers on or off, small tables that force sharing, short key limits) and random
// requests (known, new, empty, missing and over-long keys) at random times, both give the same
// answer (sameAnswer), read the request as often, and leave shared data the same.
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
	settlements := []string{``, `, "count": {"statuses": ["401"]}`, `, "refund": {"statuses": ["5xx"]}`}
	r := rand.New(rand.NewPCG(3, 4))
	longKey := strings.Repeat("k", fastKeyBytes+1)
	leanAnswers := 0 // decisions AdmitLean answered itself
	defer func() {
		if leanAnswers < 1000 {
			t.Errorf("the lean path answered %d decisions, want at least 1000", leanAnswers)
		}
	}()
	for round := range 300 {
		var ls []string
		for range 1 + r.IntN(3) {
			ls = append(ls, limits[r.IntN(len(limits))])
		}
		headers := []string{`"off"`, `"draft"`}[r.IntN(2)]
		settlement := settlements[r.IntN(len(settlements))]
		if round%2 == 0 { // the lean shape: one token bucket, no headers, nothing settled
			ls, headers, settlement = []string{limits[[]int{0, 1, 2, 5, 6}[r.IntN(5)]]}, `"off"`, ``
		}
		whenFull := []string{"overflow", "reject", "allow"}[r.IntN(3)]
		doc := `{"rate_limit_headers": ` + headers + `, "key_table": {"max_keys": ` + []string{"16", "100000"}[r.IntN(2)] +
			`, "when_full": "` + whenFull + `", "max_key_bytes": ` + []string{"16", "1024"}[r.IntN(2)] + `},
		  "rules": [{"name": "r", "key": [{"header": "x-api-key"}], "limits": [` + strings.Join(ls, ", ") + `]` +
			missing[r.IntN(len(missing))] + costs[r.IntN(len(costs))] + settlement + `}]}`
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
				p.fast = nil // the general path
			}
			gates[i] = ownMemory(NewGate(p)) // the general path never looks into it
			gates[i].SetWallClock(wall)
		}
		if gates[0].fast == nil {
			t.Fatalf("%s: not the fast shape", doc)
		}
		keys := []string{"alice", "bob", "carol", "", longKey, strings.Repeat("x", 14)}
		// Now and then a write loses its race (every seventh, counted alike on both stores if both
		// paths write alike), and a stored row is changed alike on both (corruptRow): a tag, a
		// fingerprint, a level out of range, an owner that is no longer the key's, a length.
		var sets [2]int
		for i := range stores {
			stores[i].onSet(func(string) error {
				if sets[i]++; round%4 < 2 && sets[i]%7 == 3 { // lean rounds and others alike
					return ErrCasMismatch
				}
				return nil
			})
		}
		var held [2][]*Pending
		for step := range 60 {
			now += r.Int64N(800 * int64(time.Millisecond))
			if r.IntN(8) == 0 {
				corruptRow(r, stores)
				// A write from outside the rule's requests: the fast gate's memory of rejected
				// buckets sees it at its tick (rejected.go).
				gates[0].ForgetRejected()
			}
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
				out := g.Admit(countingRequest{req, &reads[i]}, stores[i], now)
				if out == &g.leanOut.allowed || out == &g.leanOut.limited {
					leanAnswers++
				}
				outs[i] = *out
			}
			if !sameAnswer(outs[0], outs[1]) || reads[0] != reads[1] ||
				outs[0].Verdict == Limited && string(gates[0].LimitedKey(outs[0].Rule)) != string(gates[1].LimitedKey(outs[1].Rule)) {
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

// corruptRow changes one stored row the same way on every store (which hold the same): one bit
// of one byte, one bit of a slot's whole tokens' top byte (a level out of range), or its length
// by one byte.
func corruptRow(r *rand.Rand, stores [2]*memStore) {
	var rows []string
	for key := range stores[0].entries() {
		if strings.Contains(key, "/row/") {
			rows = append(rows, key)
		}
	}
	if len(rows) == 0 {
		return
	}
	slices.Sort(rows)
	key := rows[r.IntN(len(rows))]
	value := stores[0].value(key)
	at, bit, change := r.IntN(len(value)), byte(1)<<r.IntN(8), r.IntN(5)
	if tokensTop := at/SlotSize*SlotSize + 31; change == 2 && tokensTop < len(value) {
		at = tokensTop
	}
	for _, store := range stores {
		v := store.value(key)
		switch change {
		case 0:
			v = append(v, bit)
		case 1:
			v = v[:len(v)-1]
		default:
			v[at] ^= bit
		}
		store.put(key, v)
	}
}

// fastShape checks every field of config.Match, config.Exemptions and config.Rule that could take
// a request off the fast path: a field added to one of them must be considered there too, or the
// fast path would ignore it.
func TestFastShapeKnowsEveryMatchField(t *testing.T) {
	for typ, want := range map[reflect.Type]int{reflect.TypeOf(config.Match{}): 4, reflect.TypeOf(config.Exemptions{}): 3, reflect.TypeOf(config.Rule{}): 13} {
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

// rowKey writes what the prefix and strconv.FormatUint(index, 16) make, whatever it wrote before.
func TestRowKeyMatchesStrconv(t *testing.T) {
	g := mustGate(t, `{"rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 100_000 {
		index := r.Uint64() >> r.IntN(64)
		if i < len(interesting) {
			index = uint64(interesting[i])
		}
		want := g.rowPrefix + strconv.FormatUint(index, 16)
		for range 1 + r.IntN(2) { // once, or again right after (the key kept in the buffer)
			if got := g.rowKey(index); got != want {
				t.Fatalf("rowKey(%d) = %q, want %q", index, got, want)
			}
		}
	}
}

// The rows hold at least max_keys slots and less than a row more, and every owner's row is one
// of them.
func TestRowsCoverTheTable(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, size := range []int{16, 17, 23, 24, 1000, config.DefaultMaxKeys, 10_000_000} {
		p := &Policy{table: config.KeyTable{MaxKeys: size}}
		p.setRowSlots(defaultRowSlots)
		if slots := int(p.rowCount) * p.rowSlots; slots < size || slots >= size+p.rowSlots {
			t.Fatalf("max_keys %d: %d rows of %d slots", size, p.rowCount, p.rowSlots)
		}
		for i := range 10_000 {
			owner := r.Uint64()
			if i < len(interesting) {
				owner = uint64(interesting[i])
			}
			if row := p.rowOf(owner); row >= p.rowCount {
				t.Fatalf("max_keys %d, owner %d: row %d of %d", size, owner, row, p.rowCount)
			}
		}
	}
}

// sameAnswer reports whether two Outcomes answer alike: every exported field (a slice empty or
// nil alike), and what Charge and Hold read of the limits charged. The limits as decided
// (enforced) are the decision's scratch otherwise, which the lean path does not keep.
func sameAnswer(a, b Outcome) bool {
	if !reflect.DeepEqual(a.Charge(), b.Charge()) {
		return false
	}
	var held [2]Pending
	a.Hold(&held[0])
	b.Hold(&held[1])
	if !reflect.DeepEqual(held[0], held[1]) {
		return false
	}
	for _, o := range []*Outcome{&a, &b} {
		o.enforced = nil
		for _, s := range []*[]int{&o.Admitted, &o.InvalidCost, &o.ShadowLimited, &o.MissingKeys} {
			if len(*s) == 0 {
				*s = nil
			}
		}
		if len(o.Limits) == 0 {
			o.Limits = nil
		}
		if len(o.Global) == 0 {
			o.Global = nil
		}
		if len(o.inFlight) == 0 {
			o.inFlight = nil
		}
		if len(o.shadowCharged) == 0 {
			o.shadowCharged = nil
		}
	}
	return reflect.DeepEqual(a, b)
}
