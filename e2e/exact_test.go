package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/limiter"
)

// Exact under concurrency: N worker VMs (2 to 8), each in its own goroutine, send requests with
// random keys at random instants of one shared clock, and the number admitted per key must equal
// what the limiter's own arithmetic admits, request by request: zero over-admission and zero
// under-admission. Independently of that arithmetic, every token bucket must stay within the
// RFC 1363 bound (capacity + rate × T over every interval T) and every window within its
// capacity per window.
//
// The coordinator moves the clock between rounds and never during one, so all requests of a
// round happen at one instant. Every request costs one unit of each limit of its rule, so how
// many of a round's requests a key admits does not depend on the order the workers reach shared
// data in: it is min(requests, room left in every limit). That is what makes an exact model
// possible while the VMs really race (the test reports the CAS mismatches they caused).

// exactLimit is one limit of a rule, written into the configuration and modelled with package
// limiter.
type exactLimit struct {
	algorithm string // token_bucket, fixed_window, sliding_window
	capacity  int64
	tokens    int64         // token bucket: refill_tokens
	every     time.Duration // token bucket: refill_interval; windows: window
}

type exactShape struct {
	name   string
	limits []exactLimit
}

var exactShapes = []exactShape{
	{"tb-3-per-100ms", []exactLimit{{"token_bucket", 3, 1, 100 * time.Millisecond}}},
	{"tb-10-3-per-250ms", []exactLimit{{"token_bucket", 10, 3, 250 * time.Millisecond}}},
	{"tb-5-per-1s", []exactLimit{{"token_bucket", 5, 1, time.Second}}},
	{"tb-7-7-per-333ms", []exactLimit{{"token_bucket", 7, 7, 333 * time.Millisecond}}},
	{"fixed-4-per-200ms", []exactLimit{{"fixed_window", 4, 0, 200 * time.Millisecond}}},
	{"sliding-6-per-300ms", []exactLimit{{"sliding_window", 6, 0, 300 * time.Millisecond}}},
	{"tb-and-fixed", []exactLimit{{"token_bucket", 4, 2, 100 * time.Millisecond}, {"fixed_window", 10, 0, time.Second}}},
	{"tb-and-sliding", []exactLimit{{"token_bucket", 5, 1, 50 * time.Millisecond}, {"sliding_window", 8, 0, 500 * time.Millisecond}}},
	// Large enough that most requests of a round are admitted, and so written: the workers'
	// writes race on the same slots far more often.
	{"tb-50-20-per-100ms", []exactLimit{{"token_bucket", 50, 20, 100 * time.Millisecond}}},
	{"fixed-40-and-sliding-60", []exactLimit{{"fixed_window", 40, 0, 100 * time.Millisecond}, {"sliding_window", 60, 0, 200 * time.Millisecond}}},
}

// exactConfig has one rule per shape, chosen by the x-rule header and keyed by x-key. The key
// table is as large as allowed so that the few buckets of one seed practically never share a
// slot (the secret is fixed, so it is the same on every run; key_table_full is checked).
func exactConfig() string {
	var rules []string
	for _, s := range exactShapes {
		var limits []string
		for _, l := range s.limits {
			if l.algorithm == "token_bucket" {
				limits = append(limits, fmt.Sprintf(`{"capacity": %d, "refill_tokens": %d, "refill_interval": "%dms"}`,
					l.capacity, l.tokens, l.every/time.Millisecond))
			} else {
				limits = append(limits, fmt.Sprintf(`{"algorithm": %q, "capacity": %d, "window": "%dms"}`,
					l.algorithm, l.capacity, l.every/time.Millisecond))
			}
		}
		rules = append(rules, fmt.Sprintf(`{"name": %q, "match": {"headers": [{"name": "x-rule", "exact": %q}]},
		  "key": [{"header": "x-key"}], "limits": [%s]}`, s.name, s.name, strings.Join(limits, ", ")))
	}
	return `{"rules": [` + strings.Join(rules, ",\n") + `], "key_table": {"max_keys": 10000000}}`
}

// modelLimit is a limit's reference: Take as package limiter computes it.
type modelLimit struct {
	take  func(now int64) (func(), bool) // decides one unit at now; the func commits it
	spec  exactLimit
	times []int64 // instants of admissions, one per unit
}

func newModelLimit(t *testing.T, l exactLimit, now int64) *modelLimit {
	m := &modelLimit{spec: l}
	switch l.algorithm {
	case "token_bucket":
		b, err := limiter.NewBucket(limiter.BucketLimit{Capacity: l.capacity, RefillTokens: l.tokens, RefillInterval: l.every})
		if err != nil {
			t.Fatal(err)
		}
		state := b.Initial(now)
		m.take = func(now int64) (func(), bool) {
			next, d := b.Take(state, now, 1)
			return func() { state = next }, d.Allowed
		}
	default:
		type window interface {
			Take(limiter.WindowState, int64, int64) (limiter.WindowState, limiter.Decision)
		}
		var w window
		var err error
		var state limiter.WindowState
		if l.algorithm == "fixed_window" {
			var f limiter.FixedWindow
			f, err = limiter.NewFixedWindow(limiter.WindowLimit{Capacity: l.capacity, Window: l.every})
			w, state = f, f.Initial(now)
		} else {
			var s limiter.SlidingWindow
			s, err = limiter.NewSlidingWindow(limiter.WindowLimit{Capacity: l.capacity, Window: l.every})
			w, state = s, s.Initial(now)
		}
		if err != nil {
			t.Fatal(err)
		}
		m.take = func(now int64) (func(), bool) {
			next, d := w.Take(state, now, 1)
			return func() { state = next }, d.Allowed
		}
	}
	return m
}

// admit decides one request on every limit of a key: all or nothing, as the module does.
func admitAll(limits []*modelLimit, now int64) bool {
	commits := make([]func(), len(limits))
	for i, l := range limits {
		commit, ok := l.take(now)
		if !ok {
			return false
		}
		commits[i] = commit
	}
	for i, commit := range commits {
		commit()
		limits[i].times = append(limits[i].times, now)
	}
	return true
}

// checkBounds verifies the admissions of one limit against bounds that do not depend on
// package limiter: RFC 1363 for a token bucket, capacity per aligned window for windows.
func checkBounds(l *modelLimit) error {
	times := l.times
	switch l.spec.algorithm {
	case "token_bucket":
		// Over every interval [times[i], times[j]]: j-i+1 units ≤ capacity + rate × T.
		for i := range times {
			for j := i; j < len(times); j++ {
				elapsed := times[j] - times[i]
				bound := l.spec.capacity + elapsed*l.spec.tokens/int64(l.spec.every)
				if int64(j-i+1) > bound {
					return fmt.Errorf("%d units admitted in %v; RFC 1363 allows %d", j-i+1, time.Duration(elapsed), bound)
				}
			}
		}
	default:
		perWindow := map[int64]int64{}
		for _, at := range times {
			w := at / int64(l.spec.every) // times are positive: floor
			perWindow[w]++
			if perWindow[w] > l.spec.capacity {
				return fmt.Errorf("%d units admitted in the window starting at %d, capacity %d", perWindow[w], w*int64(l.spec.every), l.spec.capacity)
			}
		}
	}
	return nil
}

// exactSeeds is how many seeds make test runs; TOLLGATE_SOAK=1 runs exactSoakSeeds, and
// TOLLGATE_EXACT_SEED=n runs seed n alone.
const (
	exactSeeds     = 32
	exactSoakSeeds = 1500
	exactRounds    = 40
)

func TestExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	seeds := make([]uint64, 0, exactSeeds)
	n := exactSeeds
	if os.Getenv("TOLLGATE_SOAK") == "1" {
		n = exactSoakSeeds
	}
	for s := 1; s <= n; s++ {
		seeds = append(seeds, uint64(s))
	}
	if one := os.Getenv("TOLLGATE_EXACT_SEED"); one != "" {
		s, err := strconv.ParseUint(one, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{s}
	}
	config := exactConfig()
	began := time.Now()
	rigs := map[host.Profile]*rig{}
	for _, p := range profiles {
		rigs[p] = newRigWith(t, p, config, 8, rigOptions{secret: [2]uint64{0x70117a7e, 0xe8ac7}})
	}
	t.Logf("rigs ready in %v", time.Since(began))
	began = time.Now()
	var requests, admitted int
	for _, seed := range seeds {
		g := rigs[profiles[seed%uint64(len(profiles))]]
		r, a := runExactSeed(t, g, seed)
		requests += r
		admitted += a
		if t.Failed() {
			return
		}
	}
	var mismatches int64
	for _, p := range profiles {
		g := rigs[p]
		mismatches += g.host.SharedData().Stats().Mismatches
		for _, name := range []string{"tollgate.internal_errors", "tollgate.key_table_full"} {
			if v := g.counter(name); v != 0 {
				t.Errorf("%v: %s = %d, want 0", p, name, v)
			}
		}
	}
	t.Logf("%d seeds, %d requests in %v, %d admitted, exactly as modelled; the workers caused %d CAS mismatches (retries)",
		len(seeds), requests, time.Since(began).Round(time.Millisecond), admitted, mismatches)
}

// runExactSeed runs one seed's rounds and compares every round with the model.
func runExactSeed(t *testing.T, g *rig, seed uint64) (requests, admittedTotal int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	workers := 2 + rng.IntN(7)
	shape := exactShapes[rng.IntN(len(exactShapes))]
	keys := make([]string, 1+rng.IntN(4))
	for i := range keys {
		keys[i] = "seed" + strconv.FormatUint(seed, 10) + "-key" + strconv.Itoa(i)
	}
	where := func(round int) string {
		return fmt.Sprintf("seed %d (rerun with TOLLGATE_EXACT_SEED=%d), %d workers, rule %s, %d keys, round %d",
			seed, seed, workers, shape.name, len(keys), round)
	}
	// Every earlier seed's buckets are idle an hour later.
	g.clock.Advance(time.Hour)
	models := make([][]*modelLimit, len(keys))
	for k := range keys {
		for _, l := range shape.limits {
			models[k] = append(models[k], newModelLimit(t, l, g.clock.Monotonic()))
		}
	}
	for round := 0; round < exactRounds; round++ {
		switch c := rng.IntN(10); {
		case c < 2: // the same instant as the last round
		case c < 4:
			g.clock.Advance(time.Duration(1 + rng.Int64N(1000)))
		case c < 7:
			g.clock.Advance(time.Duration(1 + rng.Int64N(int64(100*time.Millisecond))))
		case c < 9:
			g.clock.Advance(time.Duration(1 + rng.Int64N(int64(time.Second))))
		default:
			g.clock.Advance(time.Duration(1 + rng.Int64N(int64(5*time.Second))))
		}
		now := g.clock.Monotonic()
		plan := make([][]int, workers) // per worker, the keys of its requests in order
		sent := make([]int, len(keys))
		for w := range plan {
			for i := rng.IntN(9); i > 0; i-- {
				k := rng.IntN(len(keys))
				plan[w] = append(plan[w], k)
				sent[k]++
				requests++
			}
		}
		got := make([][]int, workers) // per worker, admitted per key
		errs := make([]error, workers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range plan {
			got[w] = make([]int, len(keys))
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				<-start
				for _, k := range plan[w] {
					resp, err := g.vms[w].Do(httpReq("GET", "/", peer, "x-rule", shape.name, "x-key", keys[k]), okUpstream)
					switch {
					case err != nil:
						errs[w] = err
						return
					case resp.Status == 200:
						got[w][k]++
					case resp.Status != 429:
						errs[w] = fmt.Errorf("status %d: %s", resp.Status, resp.Body)
						return
					}
				}
			}(w)
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("%s: %v\nlogs:\n%s", where(round), err, g.logText())
			}
		}
		for k := range keys {
			admitted := 0
			for w := range got {
				admitted += got[w][k]
			}
			want := 0
			for i := 0; i < sent[k]; i++ {
				if admitAll(models[k], now) {
					want++
				}
			}
			if admitted != want {
				kind := "under-admission"
				if admitted > want {
					kind = "OVER-ADMISSION"
				}
				t.Fatalf("%s, key %d: %d requests at t=%d admitted %d, the model admits %d (%s)",
					where(round), k, sent[k], now, admitted, want, kind)
			}
			admittedTotal += admitted
		}
	}
	for k := range keys {
		for i, m := range models[k] {
			if err := checkBounds(m); err != nil {
				t.Fatalf("%s, key %d, limit %d: %v", where(exactRounds), k, i, err)
			}
		}
	}
	return requests, admittedTotal
}
