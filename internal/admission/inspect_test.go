package admission

import (
	"bytes"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

// TestKeyOfIsTheRequestsKey holds the operator's key (values given part by part) to the key a
// request carrying those values gets, for every kind of key part.
func TestKeyOfIsTheRequestsKey(t *testing.T) {
	tests := []struct {
		name, key string
		values    []string
		req       fakeRequest
	}{
		{"header", `[{"header": "x-api-key"}]`, []string{"alice"}, header("x-api-key", "alice")},
		{"client address", `[{"client_ip": {}}]`, []string{"192.0.2.1"}, fakeRequest{source: "192.0.2.1:5000"}},
		{"ipv6 network", `[{"client_ip": {"ipv6_prefix": 64}}]`, []string{"2001:db8::7"},
			fakeRequest{source: "[2001:db8::1]:443"}},
		{"host", `[{"authority": {}}]`, []string{"API.example.com:80"},
			fakeRequest{headers: map[string]string{":authority": "api.example.com"}}},
		{"query and path", `[{"query": "tenant"}, {"path": {}}]`, []string{"a b&c", "/v1/x"},
			fakeRequest{headers: map[string]string{":path": "/v1/x?tenant=a%20b%26c"}}},
		{"method and attribute", `[{"method": {}}, {"attribute": ["xds", "route_name"]}]`, []string{"POST", "r1"},
			fakeRequest{headers: map[string]string{":method": "POST"}, properties: map[string]string{"xds.route_name": "r1"}}},
		{"long value", `[{"header": "x-api-key"}]`, []string{string(bytes.Repeat([]byte("k"), 2000))},
			header("x-api-key", string(bytes.Repeat([]byte("k"), 2000)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGate(t, `{"rules": [{"name": "r", "key": `+tt.key+`, "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
			want, matched := g.PartitionKey(tt.req, 0)
			if !matched || want == nil {
				t.Fatalf("the request has no key")
			}
			want = append([]byte(nil), want...)
			got, ok := g.KeyOf(0, tt.values)
			if !ok || !bytes.Equal(got, want) {
				t.Errorf("KeyOf = %q, %v; the request's key is %q", got, ok, want)
			}
		})
	}
	g := mustGate(t, `{"rules": [{"name": "r", "key": [{"client_ip": {}}], "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	for _, values := range [][]string{{"not-an-address"}, {"192.0.2.1", "extra"}, {}} {
		if key, ok := g.KeyOf(0, values); ok {
			t.Errorf("KeyOf(%q) = %q, want refused", values, key)
		}
	}
}

const inspectDoc = `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}], "limits": [
	{"capacity": 4, "refill_tokens": 1, "refill_interval": "1s"},
	{"algorithm": "fixed_window", "capacity": 10, "window": "1m"}]}]}`

// TestInspectAndReset reads a key's buckets after requests, resets them, and checks what the
// next requests find.
func TestInspectAndReset(t *testing.T) {
	g, store := mustGate(t, inspectDoc), newMemStore()
	now := 1000 * sec
	for range 4 {
		if out := g.Admit(header("x-api-key", "alice"), store, now); out.Verdict != Allow {
			t.Fatalf("verdict %v", out.Verdict)
		}
	}
	out := g.Admit(header("x-api-key", "alice"), store, now)
	if out.Verdict != Limited {
		t.Fatalf("the fifth request: verdict %v, want limited", out.Verdict)
	}
	key, _ := g.KeyOf(0, []string{"alice"})
	if limited := g.LimitedKey(out.Rule); !bytes.Equal(limited, key) {
		t.Errorf("LimitedKey = %q, want %q", limited, key)
	}
	state, err := g.Inspect(store, 0, key, now)
	if err != nil {
		t.Fatal(err)
	}
	bucket, window := state.Limits[0], state.Limits[1]
	if !bucket.Bucket || bucket.Tokens != 0 || bucket.Remaining != 0 || bucket.NextRefill != 1e9 || bucket.Capacity != 4 {
		t.Errorf("token bucket %+v, want 0 of 4 left, the next in 1s", bucket)
	}
	if !window.Bucket || window.Count != 4 || window.Remaining != 6 || window.Algorithm != config.FixedWindow {
		t.Errorf("window %+v, want 4 counted, 6 left", window)
	}
	// A minute on, the window moved: nothing counted in it, whole.
	if later, _ := g.Inspect(store, 0, key, now+60*sec); later.Limits[1].Count != 0 || later.Limits[1].Remaining != 10 ||
		later.Limits[1].Whole != 0 {
		t.Errorf("the window a minute later: %+v, want nothing counted and whole", later.Limits[1])
	}
	if state.KeyHash != g.partitionHash("r", key) {
		t.Errorf("key hash %x is not the debug log's", state.KeyHash)
	}
	unknown, _ := g.KeyOf(0, []string{"bob"})
	if state, _ := g.Inspect(store, 0, unknown, now); state.Limits[0].Bucket || state.Limits[0].Remaining != 4 {
		t.Errorf("a key never seen: %+v, want no bucket and whole", state.Limits[0])
	}

	for _, tt := range []struct {
		name      string
		whole     bool
		level     int64
		admitted  int
		remaining int64
	}{
		{"level 2", false, 2, 2, 2},
		{"whole", true, 0, 4, 4},
		{"level above capacity", false, 99, 4, 4},
	} {
		state, err := g.Reset(store, 0, key, tt.whole, tt.level, now)
		if err != nil {
			t.Fatal(err)
		}
		if !state.Limits[0].Written || state.Limits[0].Remaining != tt.remaining {
			t.Errorf("%s: reset %+v, want written with %d left", tt.name, state.Limits[0], tt.remaining)
		}
		admitted := 0
		for g.Admit(header("x-api-key", "alice"), store, now).Verdict == Allow {
			admitted++
		}
		if admitted != tt.admitted {
			t.Errorf("%s: %d admitted after the reset, want %d", tt.name, admitted, tt.admitted)
		}
	}
	state, _ = g.Reset(store, 0, unknown, true, 0, now)
	if state.Limits[0].Written || state.Limits[0].Skipped == "" {
		t.Errorf("reset of a key without a bucket: %+v, want skipped", state.Limits[0])
	}
}

// TestResetRetriesOnCASMismatch: another worker's write between the reset's read and write
// makes the reset read again, never overwrite blindly.
func TestResetRetriesOnCASMismatch(t *testing.T) {
	g, store := mustGate(t, inspectDoc), newMemStore()
	now := 1000 * sec
	g.Admit(header("x-api-key", "alice"), store, now)
	key, _ := g.KeyOf(0, []string{"alice"})
	lost := 2
	store.onSet(func(string) error {
		if lost > 0 {
			lost--
			return ErrCasMismatch
		}
		return nil
	})
	state, err := g.Reset(store, 0, key, true, 0, now)
	store.onSet(nil)
	if err != nil || !state.Limits[0].Written || lost != 0 {
		t.Errorf("reset %+v, %v; %d mismatches left", state, err, lost)
	}
}

// TestInspectFeatures: what Inspect says of a delaying bucket's debt, a concurrency limit's
// slots and a tiered rule's tier, and that Reset leaves concurrency slots alone.
func TestInspectFeatures(t *testing.T) {
	const (
		delaying = `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}], "on_limit": {"action": "delay", "max_delay": "10s"},
			"limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`
		slots = `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}],
			"limits": [{"algorithm": "concurrency", "max_in_flight": 3, "slot_timeout": "30s"}]}]}`
		tiered = `{"rules": [{"name": "r", "key": [{"header": "x-api-key"}], "limits_by": {"part": {"header": "x-plan"}, "default": "free",
			"tiers": {"free": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}],
			"pro": [{"capacity": 5, "refill_tokens": 1, "refill_interval": "1s"}]}}}]}`
	)
	pro := fakeRequest{headers: map[string]string{"x-api-key": "alice", "x-plan": "pro"}, source: "192.0.2.1:5000"}
	for _, tt := range []struct {
		name     string
		doc      string
		req      fakeRequest
		requests int
		check    func(state RuleState) bool
	}{
		{"debt", delaying, header("x-api-key", "alice"), 4, func(s RuleState) bool {
			l := s.Limits[0]
			return l.Tokens == -2 && l.Debt == 2 && l.Remaining == 0 && l.NextRefill == 3e9
		}},
		{"slots", slots, header("x-api-key", "alice"), 2, func(s RuleState) bool {
			return s.Limits[0].InFlight == 2 && s.Limits[0].Remaining == 1 && s.Limits[0].Capacity == 3
		}},
		{"tier", tiered, pro, 2, func(s RuleState) bool {
			return s.Tier == "pro" && s.Limits[0].Capacity == 5 && s.Limits[0].Remaining == 3
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, store := mustGate(t, tt.doc), newMemStore()
			now := 1000 * sec
			for range tt.requests {
				if out := g.Admit(tt.req, store, now); out.Verdict != Allow {
					t.Fatalf("verdict %v", out.Verdict)
				}
			}
			key, _ := g.KeyOf(0, []string{"alice"})
			state, err := g.Inspect(store, 0, key, now)
			if err != nil || !tt.check(state) {
				t.Errorf("%+v, %v", state, err)
			}
			reset, _ := g.Reset(store, 0, key, true, 0, now)
			if tt.name == "slots" && (reset.Limits[0].Written || reset.Limits[0].InFlight != 2) {
				t.Errorf("reset touched the slots: %+v", reset.Limits[0])
			}
			if tt.name == "tier" && (reset.Tier != "pro" || reset.Limits[0].Remaining != 5) {
				t.Errorf("reset of a pro key: %+v", reset)
			}
		})
	}
}
