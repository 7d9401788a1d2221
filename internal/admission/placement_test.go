package admission

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The placement property: whatever order the worker VMs' shared-data calls interleave in, and
// however the clock moves between any two of them, a key never has two live buckets, and no key
// is admitted more than its token buckets allow.
//
// Each run is one interleaving, chosen by a seeded scheduler. Every worker VM runs its requests
// in a goroutine of its own, against a Store whose every call waits for the scheduler's grant;
// the scheduler lets exactly one goroutine run at a time, so a run is a deterministic sequence
// of steps: start a request on an idle worker (it reads the clock then), let a waiting worker's
// shared-data call happen, or move the clock (by a little, past a bucket's refill, or by a second
// or two, so that buckets become idle and are taken over). After every step the table is
// scanned for two live buckets of one owner.
//
// The reference model is the token bucket's bound, RFC 1363 style, over the instants the
// requests were in flight: a request is admitted at some instant between its start and the end
// of its last call, so for every interval [a, b], the admitted requests that started at or after
// a and ended at or before b number at most capacity + rate × (b - a).

// schedStore is one worker's view of shared data: each call announces itself and waits.
type schedStore struct {
	s *scheduler
	w int
}

func (st schedStore) Get(key string) ([]byte, uint32, error) {
	st.s.park(st.w, "get "+key)
	return st.s.mem.Get(key)
}

func (st schedStore) Set(key string, value []byte, cas uint32) error {
	st.s.park(st.w, "set "+key)
	old := st.s.mem.value(key)
	err := st.s.mem.Set(key, value, cas)
	if strings.Contains(key, "/row/") {
		st.s.events.count(old, value, err)
	}
	return err
}

// placementEvents counts the writes of rows the property is about, to show that the runs reach
// them.
type placementEvents struct {
	placements    int // a new bucket written into an empty slot
	idleTakeovers int // another key's live bucket replaced by a new one
	lostRaces     int // a write that would have placed a new bucket, refused by its CAS
	// drawTouches: a row written with its slots unchanged, after a draw from the overflow bucket
	// (its drawers marked, or marked already)
	drawTouches int
}

// count compares a row as it was (old) with a write of it (now), which err refused or not.
func (e *placementEvents) count(old, now []byte, err error) {
	placed := false
	for at := 0; at+SlotSize <= len(now); at += SlotSize {
		n, ok := decodeSlot(now[at : at+SlotSize])
		if !ok {
			continue
		}
		o, had := slot{}, false
		if at+SlotSize <= len(old) {
			o, had = decodeSlot(old[at : at+SlotSize])
		}
		switch {
		case had && o.owner == n.owner:
		case err != nil:
			placed = true
		case had:
			e.idleTakeovers++
		default:
			e.placements++
		}
	}
	if placed {
		e.lostRaces++
	}
	if slots := func(row []byte) string { return string(row[:len(row)-len(row)%SlotSize]) }; err == nil && slots(old) == slots(now) {
		e.drawTouches++
	}
}

func (e *placementEvents) add(o placementEvents) {
	e.placements += o.placements
	e.idleTakeovers += o.idleTakeovers
	e.lostRaces += o.lostRaces
	e.drawTouches += o.drawTouches
}

type scheduler struct {
	mem    *memStore
	now    int64
	events placementEvents
	parked chan int        // a worker parked at a call
	grant  []chan struct{} // per worker
	record func(string)    // appends a step of the run to its trace, for a failure message
}

func (s *scheduler) park(w int, what string) {
	s.parked <- w
	<-s.grant[w]
	s.record(fmt.Sprintf("t=%d w%d %s", s.now, w, what))
}

// placementRequest is one request of a run.
type placementRequest struct {
	key        int
	start, end int64
	verdict    Verdict
	overflow   bool // a limit found no free slot (when_full)
}

type placementShape struct {
	name   string
	config string
	// buckets: capacity, refill tokens and interval of each token-bucket limit of the rule
	buckets [][3]int64
}

var placementShapes = []placementShape{
	{"one bucket", `[{"capacity": 2, "refill_tokens": 1, "refill_interval": "100ms"}]`, [][3]int64{{2, 1, int64(100 * time.Millisecond)}}},
	{"one bucket of one", `[{"capacity": 1, "refill_tokens": 1, "refill_interval": "30ms"}]`, [][3]int64{{1, 1, int64(30 * time.Millisecond)}}},
	{"two buckets", `[{"capacity": 3, "refill_tokens": 1, "refill_interval": "50ms"}, {"capacity": 2, "refill_tokens": 1, "refill_interval": "200ms"}]`,
		[][3]int64{{3, 1, int64(50 * time.Millisecond)}, {2, 1, int64(200 * time.Millisecond)}}},
	{"windows", `[{"algorithm": "fixed_window", "capacity": 2, "window": "100ms"}, {"algorithm": "sliding_window", "capacity": 3, "window": "100ms"}]`, nil},
}

const (
	placementRuns     = 1000
	placementSoakRuns = 20_000
)

// placementRegressions are seeds beyond placementRuns that once found a hole. 8925 and 1181 found
// theirs when a bucket's candidates were separate values (a worker whose now was older than an
// idle takeover it observed starting the key's next bucket before the old one was idle, which
// the slots' stamps prevent; a key drawing from the overflow bucket while another worker created
// its own bucket from the overflow bucket's state as it was before that draw, which the draw's
// write of its row after the overflow bucket prevents); with rows, they replay other schedules
// and stay as ordinary seeds. With rows that carry their drawers: 20088
// is a draw whose row was written by another worker before the draw's own write, which must
// then still leave the key's marks in the row; without them the key's next bucket starts fresh.
var placementRegressions = []int{8925, 1181, 20088}

func TestPlacementUnderAdversarialInterleavings(t *testing.T) {
	runs := placementRuns
	if os.Getenv("TOLLGATE_SOAK") == "1" {
		runs = placementSoakRuns
	}
	var seeds []int
	for seed := 1; seed <= runs; seed++ {
		seeds = append(seeds, seed)
	}
	seeds = append(seeds, placementRegressions...)
	if one := os.Getenv("TOLLGATE_PLACEMENT_SEED"); one != "" {
		n, err := strconv.Atoi(one)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []int{n}
	}
	var steps, admitted, requests, failed, moved int
	var events placementEvents
	for _, seed := range seeds {
		r := runPlacement(t, uint64(seed))
		events.add(r.events)
		steps += r.steps
		admitted += r.admitted
		requests += r.requests
		failed += r.failed
		moved += r.moved
		if t.Failed() {
			return
		}
	}
	t.Logf("%d runs, %d steps, %d requests, %d admitted, %d failed (contended for %d attempts); %d keys admitted from both the overflow bucket and their own; %+v",
		len(seeds), steps, requests, admitted, failed, MaxAttempts, moved, events)
	if len(seeds) > 1 && (events.placements == 0 || events.idleTakeovers == 0 || events.lostRaces == 0 || events.drawTouches == 0 || moved == 0) {
		t.Errorf("the runs never reached a kind of transition: %+v, %d keys moved between the overflow bucket and their own", events, moved)
	}
}

type placementResult struct {
	steps, requests, admitted, failed int
	moved                             int // keys admitted both from the overflow bucket and from their own
	events                            placementEvents
}

func runPlacement(t *testing.T, seed uint64) placementResult {
	rng := rand.New(rand.NewPCG(seed, 0x91ace))
	shape := placementShapes[rng.IntN(len(placementShapes))]
	workers := 2 + rng.IntN(7)
	keys := 2 + rng.IntN(30) // the table has 16 slots: from a few keys to twice as many
	whenFull := []string{"reject", "overflow", "allow"}[rng.IntN(3)]
	// Some admitted requests are given back later, as when the rate limit service rejects them
	// or their client goes away during the global check: the clock may move in between. Drawn
	// from a generator of its own, so that the seeds kept for regressions replay as they did.
	giveBacks := rand.New(rand.NewPCG(seed, 0x9b))
	mayGiveBack := !slices.Contains(placementRegressions, int(seed))
	doc := `{"key_table": {"max_keys": 16, "when_full": "` + whenFull + `"},
	  "rules": [{"name": "r", "key": [{"header": "k"}], "limits": ` + shape.config + `}]}`
	s := &scheduler{mem: newMemStore(), now: int64(time.Hour), parked: make(chan int)}
	var trace []string
	s.record = func(line string) { trace = append(trace, line) }
	where := func() string {
		tail := trace[max(len(trace)-60, 0):]
		return fmt.Sprintf("seed %d (rerun with TOLLGATE_PLACEMENT_SEED=%d): %s, %d workers, %d keys, when_full %s; last steps:\n%s",
			seed, seed, shape.name, workers, keys, whenFull, strings.Join(tail, "\n"))
	}
	gates := make([]*Gate, workers)
	for w := range gates {
		gates[w] = mustGate(t, doc)
		if err := gates[w].LoadSecret(s.mem, func() uint64 { return seed }); err != nil {
			t.Fatal(err)
		}
		s.grant = append(s.grant, make(chan struct{}))
	}
	var requests []*placementRequest
	busy := make([]*placementRequest, workers) // the request each worker has in flight
	parked := make([]bool, workers)
	// finish is what a worker's goroutine reports when its request is decided.
	finished := make(chan struct{})
	var result placementResult
	// wait lets one worker run until it parks at a call or finishes its request.
	wait := func(w int) {
		select {
		case got := <-s.parked:
			if got != w {
				panic("another worker ran")
			}
			parked[w] = true
		case <-finished:
			busy[w].end = s.now
			trace = append(trace, fmt.Sprintf("t=%d w%d key %d: verdict %d", s.now, w, busy[w].key, busy[w].verdict))
			busy[w], parked[w] = nil, false
		}
	}
	total := 20 + rng.IntN(100)
	for started := 0; started < total || anyBusy(busy); {
		result.steps++
		switch c := rng.IntN(100); {
		case c < 4: // the clock moves
			var d int64
			switch p := rng.IntN(20); {
			case p < 10:
				d = 1 + rng.Int64N(int64(time.Millisecond))
			case p < 15:
				d = rng.Int64N(int64(30 * time.Millisecond))
			case p < 18:
				d = rng.Int64N(int64(300 * time.Millisecond))
			default:
				d = int64(time.Second) + rng.Int64N(int64(time.Second))
			}
			s.now += d
			trace = append(trace, fmt.Sprintf("clock +%v", time.Duration(d)))
		case c < 40 && started < total: // a request starts on an idle worker
			w := rng.IntN(workers)
			if busy[w] != nil {
				continue
			}
			req := &placementRequest{key: rng.IntN(keys), start: s.now}
			requests = append(requests, req)
			busy[w] = req
			started++
			trace = append(trace, fmt.Sprintf("t=%d w%d starts key %d", s.now, w, req.key))
			giveBack := mayGiveBack && giveBacks.IntN(3) == 0
			go func(g *Gate, now int64) {
				store := schedStore{s, w}
				out := g.Admit(header("k", "key-"+strconv.Itoa(req.key)), store, now)
				req.verdict, req.overflow = out.Verdict, out.TableFull > 0
				if giveBack && out.Verdict == Allow {
					charge := out.Charge()
					store.Get("global-check") // a step of its own: the clock may move meanwhile
					g.GiveBack(store, charge, s.now)
					req.verdict = Limited // given back: not admitted
				}
				finished <- struct{}{}
			}(gates[w], s.now)
			wait(w)
		default: // a waiting call goes ahead
			var ready []int
			for w, p := range parked {
				if p {
					ready = append(ready, w)
				}
			}
			if len(ready) == 0 {
				continue
			}
			w := ready[rng.IntN(len(ready))]
			parked[w] = false
			s.grant[w] <- struct{}{}
			wait(w)
		}
		if err := oneLiveBucketPerOwner(s.mem); err != nil {
			t.Fatalf("%s\n%v", where(), err)
			return result
		}
	}
	result.events = s.events
	for _, req := range requests {
		result.requests++
		switch req.verdict {
		case Allow:
			result.admitted++
		case Failed:
			result.failed++
		}
	}
	if whenFull == "allow" {
		return result // keys with no free slot go uncounted: there is no bound to check
	}
	// Per key, everything it was admitted, from its own buckets and from the overflow bucket
	// together, stays within one token bucket's bound: a key that drew from the overflow bucket
	// and then got a bucket of its own (or the other way round) gets no more than its limit.
	// With when_full overflow, what the keys that found no free slot were admitted together is
	// also bounded by one bucket.
	var overflowed []*placementRequest
	for k := 0; k < keys; k++ {
		var mine []*placementRequest
		fromOverflow, fromOwn := 0, 0
		for _, req := range requests {
			if req.key != k || req.verdict != Allow {
				continue
			}
			mine = append(mine, req)
			if req.overflow {
				overflowed = append(overflowed, req)
				fromOverflow++
			} else {
				fromOwn++
			}
		}
		if fromOverflow > 0 && fromOwn > 0 {
			result.moved++
		}
		for _, b := range shape.buckets {
			if err := checkInFlightBound(mine, b); err != nil {
				t.Fatalf("%s\nkey %d (%d admitted from its own bucket, %d from the overflow bucket): %v", where(), k, fromOwn, fromOverflow, err)
			}
		}
	}
	if len(shape.buckets) == 1 {
		if err := checkInFlightBound(overflowed, shape.buckets[0]); err != nil {
			t.Fatalf("%s\nthe overflow bucket: %v", where(), err)
		}
	}
	return result
}

func anyBusy(busy []*placementRequest) bool {
	for _, b := range busy {
		if b != nil {
			return true
		}
	}
	return false
}

// oneLiveBucketPerOwner scans the table for two live buckets of one owner.
func oneLiveBucketPerOwner(m *memStore) error {
	where := map[uint64]string{}
	for key, value := range m.entries() {
		if !strings.Contains(key, "/row/") {
			continue
		}
		for at := 0; at+SlotSize <= len(value); at += SlotSize {
			s, ok := decodeSlot(value[at : at+SlotSize])
			if !ok {
				continue
			}
			place := key + " slot " + strconv.Itoa(at/SlotSize)
			if other, dup := where[s.owner]; dup {
				return fmt.Errorf("owner %x has live buckets in %s and %s", s.owner, other, place)
			}
			where[s.owner] = place
		}
	}
	return nil
}

// checkInFlightBound: for every interval [a, b] between instants at which requests started or
// ended, the admitted requests wholly inside it are at most capacity + rate × (b - a).
func checkInFlightBound(admitted []*placementRequest, bucket [3]int64) error {
	capacity, tokens, interval := bucket[0], bucket[1], bucket[2]
	var instants []int64
	for _, r := range admitted {
		instants = append(instants, r.start, r.end)
	}
	for _, a := range instants {
		for _, b := range instants {
			if b < a {
				continue
			}
			n := int64(0)
			for _, r := range admitted {
				if r.start >= a && r.end <= b {
					n++
				}
			}
			if bound := capacity + (b-a)*tokens/interval; n > bound {
				return fmt.Errorf("%d requests admitted within [%d, %d] (%v), the bucket (capacity %d, %d per %v) allows %d",
					n, a, b, time.Duration(b-a), capacity, tokens, time.Duration(interval), bound)
			}
		}
	}
	return nil
}
