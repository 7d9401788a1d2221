package e2e

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// operatorDigest is the SHA-256 of operatorToken.
const (
	operatorToken  = "test"
	operatorDigest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
)

// The top offenders through the real module on four workers, under both Envoy generations: a
// skewed (Zipf) stream of keys, each allowed one request a day, spread over the workers, whose
// ticks merge what each counted. What the endpoint then shows must keep the summary's guarantee
// (internal/heavy) against the exact rejections per key: limited_at_least ≤ rejections ≤
// limited_at_most, at most rejections/top_keys apart, and every key rejected more often than
// that listed.
func TestOperatorTopOffendersAcrossWorkers(t *testing.T) {
	t.Parallel()
	const (
		topKeys  = 8
		workers  = 4
		requests = 12_000
	)
	config := `{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "24h"}]}],
	  "operator": {"path_prefix": "/.tollgate/", "client_cidrs": ["192.0.2.0/24"], "token_sha256": ["` + operatorDigest + `"],
	  "raw_keys": true, "top_keys": ` + strconv.Itoa(topKeys) + `}}`
	for _, profile := range profiles {
		t.Run(profile.String(), func(t *testing.T) {
			g := newRig(t, profile, config, workers)
			rng := rand.New(rand.NewPCG(11, 1))
			zipf := rand.NewZipf(rng, 1.2, 1, 2000)
			rejected := map[string]int64{}
			var total int64
			for i := 0; i < requests; i++ {
				key := "k" + strconv.FormatUint(zipf.Uint64(), 10)
				resp := g.request(g.vms[i%workers], [2]string{"x-api-key", key})
				if resp.Status == 429 {
					rejected[key]++
					total++
				}
				if i%1000 == 999 {
					if err := g.host.Tick(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := g.host.Tick(t.Context()); err != nil {
				t.Fatal(err)
			}
			resp := g.send(g.vms[1], host.Request{Headers: [][2]string{{":method", "GET"}, {":path", "/.tollgate/top"},
				{":authority", "example.test"}, {":scheme", "http"}, {"authorization", "Bearer " + operatorToken}},
				SourceAddress: "192.0.2.10:40000", EndOfStream: true}, nil)
			var view struct {
				Rules []struct {
					Rejections int64 `json:"rejections"`
					ErrorBound int64 `json:"error_bound"`
					Keys       []struct {
						Key     string `json:"key"`
						AtLeast int64  `json:"limited_at_least"`
						AtMost  int64  `json:"limited_at_most"`
					} `json:"keys"`
				} `json:"rules"`
			}
			if resp.Status != 200 || json.Unmarshal(resp.Body, &view) != nil || len(view.Rules) != 1 {
				t.Fatalf("top: %d %s", resp.Status, resp.Body)
			}
			rule := view.Rules[0]
			if rule.Rejections != total || rule.ErrorBound*topKeys > total || len(rule.Keys) > topKeys {
				t.Errorf("%d rejections, error bound %d, %d keys; want %d rejections, a bound of at most %d, at most %d keys",
					rule.Rejections, rule.ErrorBound, len(rule.Keys), total, total/topKeys, topKeys)
			}
			t.Logf("%d rejections, error bound %d, top key %+v", rule.Rejections, rule.ErrorBound, rule.Keys[0])
			listed := map[string]bool{}
			for _, k := range rule.Keys {
				listed[k.Key] = true
				if f := rejected[k.Key]; k.AtLeast > f || f > k.AtMost || k.AtMost-k.AtLeast != rule.ErrorBound {
					t.Errorf("key %s rejected %d times, listed as %d to %d", k.Key, f, k.AtLeast, k.AtMost)
				}
			}
			for key, f := range rejected {
				if f > rule.ErrorBound && !listed[key] {
					t.Errorf("key %s rejected %d times, more than the bound %d, is not listed", key, f, rule.ErrorBound)
				}
			}
		})
	}
}

// An operator's reset through one worker reaches a worker that remembers the key as over its
// limit (it answers such a key from its memory, without reading shared data) at that worker's
// next tick, and the worker that made it at once; until the tick, the other only rejects more,
// never admits more.
func TestOperatorResetReachesEveryWorkerByItsTick(t *testing.T) {
	t.Parallel()
	config := `{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "24h"}]}],
	  "operator": {"path_prefix": "/.tollgate/", "client_cidrs": ["192.0.2.0/24"], "token_sha256": ["` + operatorDigest + `"]}}`
	for _, profile := range profiles {
		t.Run(profile.String(), func(t *testing.T) {
			g := newRig(t, profile, config, 2)
			a, b := g.vms[0], g.vms[1]
			alice := [2]string{"x-api-key", "alice"}
			statuses := func(steps ...*host.VM) string {
				got := ""
				for _, vm := range steps {
					got += strconv.Itoa(g.request(vm, alice).Status) + " "
				}
				return got
			}
			if got := statuses(a, a, a, b); got != "200 200 429 429 " {
				t.Fatalf("before the reset: %s", got)
			}
			resp := g.send(b, host.Request{Headers: [][2]string{{":method", "POST"}, {":path", "/.tollgate/reset?key=alice"},
				{":authority", "example.test"}, {":scheme", "http"}, {"authorization", "Bearer " + operatorToken}},
				SourceAddress: "192.0.2.10:40000", EndOfStream: true}, nil)
			if resp.Status != 200 {
				t.Fatalf("reset: %d %s", resp.Status, resp.Body)
			}
			// b made the reset and takes a token; a still answers from its memory.
			if got := statuses(b, a); got != "200 429 " {
				t.Fatalf("after the reset, before a's tick: %s", got)
			}
			if err := g.host.Tick(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := statuses(a, a, b); got != "200 429 429 " {
				t.Errorf("after the tick: %s, want a to take the last token of the reset", got)
			}
		})
	}
}

// Without an operator endpoint too, every worker forgets on its tick the buckets it remembers as
// over their limit: a bucket written from outside the rule's requests (here its row put back as
// it was after the key's first request, as another configuration of the plugin could write it
// during a rollout) is decided on from the next tick on, and until then the key is only rejected
// more, never admitted more.
func TestForeignWriteSeenAtTheTick(t *testing.T) {
	t.Parallel()
	config := `{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "24h"}]}]}`
	for _, profile := range profiles {
		t.Run(profile.String(), func(t *testing.T) {
			g := newRig(t, profile, config, 1)
			vm := g.vms[0]
			alice := [2]string{"x-api-key", "alice"}
			if status := g.request(vm, alice).Status; status != 200 {
				t.Fatalf("first request: %d", status)
			}
			key, oneLeft := g.onlyRow()
			got := ""
			for range 3 {
				got += strconv.Itoa(g.request(vm, alice).Status) + " "
			}
			if got != "200 429 429 " {
				t.Fatalf("before the write: %s", got)
			}
			reads := g.host.SharedData().Stats().Gets
			if st := g.host.SharedData().Set("tollgate", key, oneLeft, 0); st != 0 {
				t.Fatalf("writing the row: status %d", st)
			}
			if status := g.request(vm, alice).Status; status != 429 || g.host.SharedData().Stats().Gets != reads {
				t.Fatalf("before the tick: %d, %d reads; want 429 from the worker's memory",
					status, g.host.SharedData().Stats().Gets-reads)
			}
			if err := g.host.Tick(t.Context()); err != nil {
				t.Fatal(err)
			}
			if status := g.request(vm, alice).Status; status != 200 {
				t.Errorf("after the tick: %d, want the token the write put back", status)
			}
		})
	}
}
