package simulate

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// exactConfig: an enforced per-key rule (a request without x-api-key gets 401), a shadow rule per
// client address, and an exempt path. max_keys is the largest allowed, so that no two of the
// few buckets share a slot of the key table (the model below has no key table); with the seeded
// secret that holds on every run.
const exactConfig = `{
  "rules": [
    {"name": "per-key", "key": [{"header": "x-api-key"}],
     "limits": [{"capacity": 4, "refill_tokens": 3, "refill_interval": "250ms"}]},
    {"name": "per-client", "shadow": true, "key": [{"client_ip": {}}],
     "limits": [{"capacity": 6, "refill_tokens": 5, "refill_interval": "1s"}]}
  ],
  "exempt": {"paths": [{"exact": "/health"}]},
  "key_table": {"max_keys": 10000000}
}`

// bucket is the test's own token bucket in integer milliseconds: one token is interval units,
// and every elapsed millisecond adds tokens units (continuous refill, as the limiter's
// documentation states).
type bucket struct {
	level, last int64
}

type bucketShape struct{ capacity, tokens, interval int64 }

func (s bucketShape) take(b *bucket, seen bool, now int64) bool {
	if !seen {
		b.level, b.last = s.capacity*s.interval, now
	}
	b.level = min(s.capacity*s.interval, b.level+(now-b.last)*s.tokens)
	b.last = now
	if b.level >= s.interval {
		b.level -= s.interval
		return true
	}
	return false
}

// modelKey is the model's per-key figures.
type modelKey struct {
	requests, admitted, limited, shadowLimited, peak, second, inSecond int64
}

func (k *modelKey) offered(ms int64) {
	k.requests++
	if sec := ms / 1000; sec != k.second || k.requests == 1 {
		k.second, k.inSecond = sec, 0
	}
	k.inSecond++
	k.peak = max(k.peak, k.inSecond)
}

// TestSummaryEqualsAnIndependentTokenBucket replays a generated log (requests without a key,
// exempt requests, bursts in one millisecond, lines out of start order, bad lines) through the
// module and compares summary.json with the test's own computation, the shadow rule enforced alone
// included.
func TestSummaryEqualsAnIndependentTokenBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	reqs := generateLog(t, path, 7, genOptions{requests: 20_000, keys: 12, noKey: 0.08, exempt: 0.03,
		clients: 9, meanGapMs: 6, badEvery: 5_000})
	_, got := simulateFile(t, path, EnvoyJSON, true, exactConfig)

	perKey := bucketShape{capacity: 4, tokens: 3, interval: 250}
	perClient := bucketShape{capacity: 6, tokens: 5, interval: 1000}
	keyBuckets, clientBuckets := map[string]*bucket{}, map[string]*bucket{}
	keys := map[string]*modelKey{}    // by API key
	clients := map[string]*modelKey{} // by client address
	type totals struct{ requests, admitted, limited, shadowLimited, missingKey, exempt int64 }
	var keyRule, clientRule totals
	// The shadow rule enforced alone: every request that is not exempt reaches it.
	aloneBuckets, aloneClients := map[string]*bucket{}, map[string]*modelKey{}
	var alone totals
	statuses := map[string]int64{}
	var exempt int64
	for _, r := range reqs {
		if r.path == "/health" {
			exempt++
			keyRule.exempt++
			clientRule.exempt++
			statuses["200"]++
			continue
		}
		keyRule.requests++
		clientRule.requests++
		ac := aloneClients[r.client]
		if ac == nil {
			ac = &modelKey{}
			aloneClients[r.client] = ac
		}
		ac.offered(r.ms)
		ab, seen := aloneBuckets[r.client]
		if !seen {
			ab = &bucket{}
			aloneBuckets[r.client] = ab
		}
		if perClient.take(ab, seen, r.ms) {
			alone.admitted++
			ac.admitted++
		} else {
			alone.limited++
			ac.limited++
		}
		client := clients[r.client]
		if r.key == "" {
			// The enforced rule rejects it first; the shadow rule is not reached.
			keyRule.missingKey++
			statuses["401"]++
			if client == nil {
				client = &modelKey{}
				clients[r.client] = client
			}
			client.offered(r.ms)
			continue
		}
		k := keys[r.key]
		if k == nil {
			k = &modelKey{}
			keys[r.key] = k
		}
		k.offered(r.ms)
		if client == nil {
			client = &modelKey{}
			clients[r.client] = client
		}
		client.offered(r.ms)
		kb, seen := keyBuckets[r.key]
		if !seen {
			kb = &bucket{}
			keyBuckets[r.key] = kb
		}
		if !perKey.take(kb, seen, r.ms) {
			keyRule.limited++
			k.limited++
			statuses["429"]++
			continue
		}
		keyRule.admitted++
		k.admitted++
		statuses["200"]++
		cb, seen := clientBuckets[r.client]
		if !seen {
			cb = &bucket{}
			clientBuckets[r.client] = cb
		}
		if perClient.take(cb, seen, r.ms) {
			clientRule.admitted++
			client.admitted++
		} else {
			clientRule.shadowLimited++
			client.shadowLimited++
		}
	}
	if keyRule.limited == 0 || clientRule.shadowLimited == 0 || keyRule.missingKey == 0 || exempt == 0 || alone.limited <= clientRule.shadowLimited {
		t.Fatalf("the generated log does not exercise every outcome: %+v %+v exempt %d", keyRule, clientRule, exempt)
	}

	top := func(m map[string]*modelKey) (limited, busiest []any) {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		entry := func(n string) any {
			k := m[n]
			return map[string]any{"key": n, "requests": float64(k.requests), "admitted": float64(k.admitted),
				"limited": float64(k.limited), "shadow_limited": float64(k.shadowLimited), "peak_per_second": float64(k.peak),
				"peak_units_per_second": float64(k.peak)} // every request costs 1
		}
		sort.Slice(names, func(i, j int) bool {
			a, b := m[names[i]], m[names[j]]
			if x, y := a.limited+a.shadowLimited, b.limited+b.shadowLimited; x != y {
				return x > y
			}
			if a.peak != b.peak {
				return a.peak > b.peak
			}
			return names[i] < names[j]
		})
		limited = []any{}
		for _, n := range names {
			if len(limited) < 10 && m[n].limited+m[n].shadowLimited > 0 {
				limited = append(limited, entry(n))
			}
		}
		sort.Slice(names, func(i, j int) bool {
			a, b := m[names[i]], m[names[j]]
			if a.peak != b.peak {
				return a.peak > b.peak
			}
			if a.requests != b.requests {
				return a.requests > b.requests
			}
			return names[i] < names[j]
		})
		for _, n := range names[:min(10, len(names))] {
			busiest = append(busiest, entry(n))
		}
		return limited, busiest
	}
	keysLimited := func(m map[string]*modelKey) float64 {
		n := 0
		for _, k := range m {
			if k.limited+k.shadowLimited > 0 {
				n++
			}
		}
		return float64(n)
	}
	rule := func(tt totals, shadow bool, m map[string]*modelKey, limit map[string]any) map[string]any {
		limited, busiest := top(m)
		r := map[string]any{
			"requests": float64(tt.requests), "admitted": float64(tt.admitted), "limited": float64(tt.limited),
			"shadow_limited": float64(tt.shadowLimited), "missing_key": float64(tt.missingKey), "exempt": float64(tt.exempt),
			"invalid_cost": float64(0), "cost": "a request costs 1 unit", "keys": float64(len(m)), "keys_limited": keysLimited(m),
			"limits": []any{limit}, "top_limited_keys": limited, "busiest_keys": busiest,
		}
		if shadow {
			r["shadow"] = true
			aloneLimited, _ := top(aloneClients)
			r["enforced_alone"] = map[string]any{"admitted": float64(alone.admitted), "limited": float64(alone.limited),
				"missing_key": float64(0), "keys_limited": keysLimited(aloneClients), "top_limited_keys": aloneLimited}
		}
		return r
	}
	statusesAny := map[string]any{}
	for s, n := range statuses {
		statusesAny[s] = float64(n)
	}
	want := map[string]any{
		"requests": float64(len(reqs)), "exempt": float64(exempt), "internal_errors": float64(0),
		"statuses": statusesAny, "warnings": []any{},
		"rules": map[string]any{
			"per-key": rule(keyRule, false, keys, map[string]any{"algorithm": "token_bucket", "capacity": float64(4), "per_second": float64(12),
				"text": "4 requests at once, then 3 every 250ms"}),
			"per-client": rule(clientRule, true, clients, map[string]any{"algorithm": "token_bucket", "capacity": float64(6), "per_second": float64(5),
				"text": "6 requests at once, then 5 per second"}),
		},
	}
	for field, w := range want {
		if !reflect.DeepEqual(got[field], w) {
			t.Errorf("summary.json %s:\n got %s\nwant %s", field, asJSON(got[field]), asJSON(w))
		}
	}
	log := got["log"].(map[string]any)
	if log["lines"] != float64(len(reqs)+3) || log["bad_lines"] != float64(3) {
		t.Errorf("log: %s; want %d lines of which 3 bad", asJSON(log), len(reqs)+3)
	}
	samples := log["bad_line_samples"].([]any)
	for i, s := range samples {
		line := s.(map[string]any)["line"].(float64)
		if want := float64((i + 1) * 5_001); line != want {
			t.Errorf("bad line %d reported at line %v, want %v", i, line, want)
		}
	}
}

func asJSON(v any) string {
	data, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}
