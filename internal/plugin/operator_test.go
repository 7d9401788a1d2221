package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
	"github.com/tollgate-proxy/tollgate/internal/hostcore"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

const operatorToken = "s3cret-operator-token"

// operatorConfig is a rule of 2 tokens per key (refilled 1/s) with the operator endpoint on for
// 10.0.0.0/8, x-forwarded-for trusted for one hop (which the endpoint must ignore), and extra
// fields for the operator block.
func operatorConfig(extra string) string {
	sum := sha256.Sum256([]byte(operatorToken))
	return `{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
		"limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}],
		"client_ip": {"xff_num_trusted_hops": 1},
		"operator": {"path_prefix": "/.tollgate/", "client_cidrs": ["10.0.0.0/8"],
		"token_sha256": ["` + hex.EncodeToString(sum[:]) + `"]` + extra + `}}`
}

// opRequest is a request to the endpoint from source with the bearer token (none when "").
func opRequest(method, path, source, token string, extra ...[2]string) abitest.Request {
	headers := [][2]string{{":method", method}, {":path", path}}
	if token != "" {
		headers = append(headers, [2]string{"authorization", "Bearer " + token})
	}
	return abitest.Request{Headers: append(headers, extra...), SourceAddress: source, EndOfStream: true}
}

const operatorPeer = "10.1.2.3:40000"

// TestOperatorRefusals: every request under the prefix is answered by the filter, never
// forwarded nor charged, and each refusal is counted under its reason.
func TestOperatorRefusals(t *testing.T) {
	tests := []struct {
		name    string
		req     abitest.Request
		status  int
		counter string
	}{
		{"peer outside client_cidrs", opRequest("GET", "/.tollgate/top", "192.0.2.1:5000", operatorToken), 403, "forbidden"},
		{"x-forwarded-for in range, peer not", opRequest("GET", "/.tollgate/top", "192.0.2.1:5000", operatorToken,
			[2]string{"x-forwarded-for", "10.9.9.9"}), 403, "forbidden"},
		{"no token", opRequest("GET", "/.tollgate/top", operatorPeer, ""), 401, "unauthorized"},
		{"wrong token", opRequest("GET", "/.tollgate/top", operatorPeer, "guess"), 401, "unauthorized"},
		{"not bearer", opRequest("GET", "/.tollgate/top", operatorPeer, "", [2]string{"authorization", "Basic " + operatorToken}),
			401, "unauthorized"},
		{"the token's digest as token", opRequest("GET", "/.tollgate/top", operatorPeer, strings.Repeat("ab", 32)), 401, "unauthorized"},
		{"no such operation", opRequest("GET", "/.tollgate/secrets", operatorPeer, operatorToken), 404, "not_found"},
		{"reset by GET", opRequest("GET", "/.tollgate/reset?key=a", operatorPeer, operatorToken), 404, "not_found"},
		{"top by POST", opRequest("POST", "/.tollgate/top", operatorPeer, operatorToken), 404, "not_found"},
		{"the prefix alone", opRequest("GET", "/.tollgate/", operatorPeer, operatorToken), 404, "not_found"},
		{"unknown rule", opRequest("GET", "/.tollgate/keys?key=a&rule=nope", operatorPeer, operatorToken), 404, "not_found"},
		{"served", opRequest("GET", "/.tollgate/top", operatorPeer, operatorToken), 200, "answered"},
		{"ipv4-mapped peer", opRequest("GET", "/.tollgate/top", "[::ffff:10.0.0.1]:1", operatorToken), 200, "answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := rig(t, operatorConfig(""))
			s, _ := host.Request(tt.req)
			r := s.Reply()
			if r == nil || s.Continued() {
				t.Fatalf("not answered by the filter: %s", outcome(s))
			}
			if r.Status != tt.status || r.Header("content-type") != "application/json" || r.Details != detailsOperator ||
				r.Header(OperatorHeader) != "1" {
				t.Errorf("reply %d %q %s, want %d application/json", r.Status, r.Header("content-type"), r.Details, tt.status)
			}
			var body map[string]any
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Errorf("body %q is not JSON: %v", r.Body, err)
			}
			if tt.status == 401 && r.Header("www-authenticate") == "" {
				t.Errorf("a 401 without a challenge")
			}
			checkCounters(t, host, map[string]uint64{"tollgate.operator." + tt.counter: 1,
				"tollgate.rule.per-key.admitted": 0, "tollgate.rule.per-key.missing_key": 0})
			for key := range host.SharedData().Entries("") {
				if strings.Contains(key, "/row/") {
					t.Errorf("the request was charged: %s", key)
				}
			}
		})
	}
}

// TestOperatorIsRateLimited: the endpoint answers a burst of 10 from peers in range, then 429
// until its bucket refills, token or not; peers out of range never use it up.
func TestOperatorIsRateLimited(t *testing.T) {
	host := rig(t, operatorConfig(""))
	statuses := ""
	for range 3 {
		s, _ := host.Request(opRequest("GET", "/.tollgate/top", "192.0.2.1:5000", operatorToken))
		statuses += outcome(s)[:3] + " "
	}
	for range 12 {
		s, _ := host.Request(opRequest("GET", "/.tollgate/top", operatorPeer, "guess"))
		statuses += outcome(s)[:3] + " "
	}
	host.Advance(1e8) // one more request's worth
	s, _ := host.Request(opRequest("GET", "/.tollgate/top", operatorPeer, operatorToken))
	statuses += outcome(s)[:3]
	if want := strings.Repeat("403 ", 3) + strings.Repeat("401 ", 10) + "429 429 200"; statuses != want {
		t.Errorf("statuses %s, want %s", statuses, want)
	}
	checkCounters(t, host, map[string]uint64{"tollgate.operator.rate_limited": 2, "tollgate.operator.forbidden": 3,
		"tollgate.operator.unauthorized": 10})
}

// TestOperatorOffByDefault: without an operator block the prefix is an ordinary path, limited
// like any other.
func TestOperatorOffByDefault(t *testing.T) {
	host := rig(t, `{"rules": [{"name": "per-key", "key": [{"header": "x-api-key"}],
		"limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	got := ""
	for range 2 {
		s, _ := host.Request(opRequest("GET", "/.tollgate/top", operatorPeer, operatorToken, [2]string{"x-api-key", "a"}))
		got += outcome(s)[:3] + " "
	}
	if got != "con 429 " {
		t.Errorf("got %s, want the first forwarded and the second limited", got)
	}
}

// keyState is the part of a key operation's reply the tests read.
type keyState struct {
	Rules []struct {
		Rule    string `json:"rule"`
		KeyHash string `json:"key_hash"`
		Limits  []struct {
			Bucket    bool   `json:"bucket"`
			Remaining int64  `json:"remaining"`
			Tokens    int64  `json:"tokens"`
			NextMs    int64  `json:"next_refill_ms"`
			Written   bool   `json:"written"`
			Skipped   string `json:"skipped"`
		} `json:"limits"`
	} `json:"rules"`
	Skipped []struct {
		Rule   string `json:"rule"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

// operate asks the endpoint, 100 ms after the last thing the test did: the endpoint's own rate
// limit refills one request in that time.
func operate(t *testing.T, host *abitest.Host, method, path string, into any) int {
	t.Helper()
	host.Advance(1e8)
	s, _ := host.Request(opRequest(method, path, operatorPeer, operatorToken))
	r := s.Reply()
	if r == nil {
		t.Fatalf("%s %s: not answered (%s)", method, path, outcome(s))
	}
	if into != nil && r.Status == 200 {
		if err := json.Unmarshal(r.Body, into); err != nil {
			t.Fatalf("%s %s: %q: %v", method, path, r.Body, err)
		}
	}
	return r.Status
}

// TestOperatorInspectsAndResets: a limited key's state, its reset (logged with the key's hash
// and counted), and the requests the reset lets through.
func TestOperatorInspectsAndResets(t *testing.T) {
	host := rig(t, operatorConfig(""))
	send := func(n int) string {
		got := ""
		for range n {
			s, _ := host.Request(keyed("alice", "/"))
			got += outcome(s)[:3] + " "
		}
		return got
	}
	if got := send(3); got != "con con 429 " {
		t.Fatalf("before: %s", got)
	}
	for i, path := range []string{"/.tollgate/keys?key=alice", "/.tollgate/keys/alice", "/.tollgate/keys?key=alice&rule=per-key"} {
		var state keyState
		if status := operate(t, host, "GET", path, &state); status != 200 || len(state.Rules) != 1 {
			t.Fatalf("%s: %d %+v", path, status, state)
		}
		l := state.Rules[0].Limits[0]
		// Each operation comes 100 ms after the one before.
		if wantMs := int64(900 - 100*i); !l.Bucket || l.Remaining != 0 || l.Tokens != 0 || l.NextMs != wantMs {
			t.Errorf("%s: %+v, want an empty bucket refilling in %d ms", path, l, wantMs)
		}
	}
	var reset keyState
	if status := operate(t, host, "POST", "/.tollgate/reset?key=alice", &reset); status != 200 || !reset.Rules[0].Limits[0].Written {
		t.Fatalf("reset: %d %+v", status, reset)
	}
	if got := send(3); got != "con con 429 " {
		t.Errorf("after the reset: %s, want the bucket whole again", got)
	}
	if status := operate(t, host, "POST", "/.tollgate/reset?key=alice&level=1", &reset); status != 200 {
		t.Fatalf("reset to a level: %d", status)
	}
	if got := send(2); got != "con 429 " {
		t.Errorf("after a reset to level 1: %s", got)
	}
	hash := reset.Rules[0].KeyHash
	logs := logsAt(host, abi.LogLevelInfo)
	for _, want := range []string{"operator reset rule per-key key#" + hash + " to whole", "key#" + hash + " to level 1", "asked by 10.1.2.3"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the info log has no %q: %s", want, logs)
		}
	}
	if strings.Contains(logs, "alice") {
		t.Errorf("the log names the key: %s", logs)
	}
	checkCounters(t, host, map[string]uint64{"tollgate.operator.resets": 2, "tollgate.operator.answered": 5,
		"tollgate.rule.per-key.admitted": 5, "tollgate.rule.per-key.limited": 3})

	for _, tt := range []struct{ path, want string }{
		{"/.tollgate/reset", "give the key"},
		{"/.tollgate/reset?key=a&level=-1", "level is"},
		{"/.tollgate/reset?key=a&level=x", "level is"},
	} {
		s, _ := host.Request(opRequest("POST", tt.path, operatorPeer, operatorToken))
		if r := s.Reply(); r == nil || r.Status != 400 || !strings.Contains(string(r.Body), tt.want) {
			t.Errorf("%s: %s, want 400 saying %q", tt.path, outcome(s), tt.want)
		}
	}
	// A key with '+', '/' and a space, in the path form and the query form.
	send2 := func(key string) {
		s, _ := host.Request(keyed(key, "/"))
		if outcome(s) != "continued" {
			t.Fatalf("%q: %s", key, outcome(s))
		}
	}
	send2("a+b/c d")
	var byPath, byQuery keyState
	operate(t, host, "GET", "/.tollgate/keys/a+b%2Fc%20d", &byPath)
	operate(t, host, "GET", "/.tollgate/keys?key=a%2Bb%2Fc+d", &byQuery)
	for _, got := range []keyState{byPath, byQuery} {
		if len(got.Rules) != 1 || !got.Rules[0].Limits[0].Bucket || got.Rules[0].Limits[0].Remaining != 1 {
			t.Errorf("the key a+b/c d: %+v, want its bucket with 1 token left", got)
		}
	}
	var two keyState
	operate(t, host, "GET", "/.tollgate/keys?key=a&key=b", &two)
	if len(two.Rules) != 0 || len(two.Skipped) != 1 || !strings.Contains(two.Skipped[0].Reason, "1 part(s) and 2 value(s)") {
		t.Errorf("two values for a one-part key: %+v", two)
	}
}

// topView is the part of the top offenders reply the tests read.
type topView struct {
	Rules []struct {
		Rule       string `json:"rule"`
		Rejections int64  `json:"rejections"`
		ErrorBound int64  `json:"error_bound"`
		Keys       []struct {
			KeyHash string `json:"key_hash"`
			Key     string `json:"key"`
			AtLeast int64  `json:"limited_at_least"`
			AtMost  int64  `json:"limited_at_most"`
		} `json:"keys"`
	} `json:"rules"`
}

// TestOperatorTopOffenders: rejections counted in the VM reach the view at the next tick, by
// hash, or by key with raw_keys.
func TestOperatorTopOffenders(t *testing.T) {
	for _, raw := range []bool{false, true} {
		extra := ""
		if raw {
			extra = `, "raw_keys": true`
		}
		t.Run(map[bool]string{false: "hashes", true: "raw keys"}[raw], func(t *testing.T) {
			host := rig(t, operatorConfig(extra))
			for _, key := range []string{"alice", "alice", "alice", "alice", "alice", "bob", "bob", "bob"} {
				host.Request(keyed(key, "/"))
			}
			var before topView
			operate(t, host, "GET", "/.tollgate/top", &before)
			if before.Rules[0].Rejections != 0 {
				t.Errorf("raw %v: rejections before the tick: %+v", raw, before)
			}
			host.Tick()
			var view topView
			operate(t, host, "GET", "/.tollgate/top", &view)
			rule := view.Rules[0]
			if rule.Rule != "per-key" || rule.Rejections != 4 || rule.ErrorBound != 0 || len(rule.Keys) != 2 {
				t.Fatalf("raw %v: %+v", raw, view)
			}
			first, second := rule.Keys[0], rule.Keys[1]
			if first.AtLeast != 3 || first.AtMost != 3 || second.AtLeast != 1 {
				t.Errorf("raw %v: counts %+v", raw, rule.Keys)
			}
			var alice keyState
			operate(t, host, "GET", "/.tollgate/keys/alice", &alice)
			if first.KeyHash != alice.Rules[0].KeyHash {
				t.Errorf("raw %v: the top key's hash %s is not alice's %s", raw, first.KeyHash, alice.Rules[0].KeyHash)
			}
			if wantKey := map[bool]string{false: "", true: "alice"}[raw]; first.Key != wantKey {
				t.Errorf("raw %v: key %q, want %q", raw, first.Key, wantKey)
			}
		})
	}
}

// TestOperatorTopForgetsOldPeriods: the view covers the current minute and the one before; a
// minute later the rejections move to the previous period, two minutes later they are gone.
func TestOperatorTopForgetsOldPeriods(t *testing.T) {
	host := rig(t, operatorConfig(""))
	host.SetMonotonic(20 * topPeriod) // the start of a period, later than the rig's first reading
	for range 4 {
		host.Request(keyed("alice", "/"))
	}
	host.Tick()
	for _, tt := range []struct {
		after      int64
		rejections int64
	}{{0, 2}, {topPeriod, 2}, {topPeriod, 0}} {
		host.Advance(tt.after)
		var view topView
		if status := operate(t, host, "GET", "/.tollgate/top", &view); status != 200 || view.Rules[0].Rejections != tt.rejections {
			t.Errorf("%d ns on: %d %+v, want %d rejections", host.Monotonic()-20*topPeriod, status, view, tt.rejections)
		}
	}
}

// TestOperatorTopMergeRetries: a merge that loses its compare-and-swap to another worker reads
// the summary again and lands; a merge that cannot land keeps its counts for the next tick.
func TestOperatorTopMergeRetries(t *testing.T) {
	host := rig(t, operatorConfig(""))
	for range 5 {
		host.Request(keyed("alice", "/"))
	}
	const topKey = "tollgate/v2/test/top/per-key"
	lose := 1
	host.SharedData().SetFault(func(op, key string) wire.Status {
		if op == "set" && key == topKey && lose > 0 {
			lose--
			return wire.StatusCasMismatch
		}
		return wire.StatusOK
	})
	host.Tick()
	var view topView
	operate(t, host, "GET", "/.tollgate/top", &view)
	if lose != 0 || view.Rules[0].Rejections != 3 {
		t.Errorf("after a lost race: %+v", view)
	}
	host.Request(keyed("alice", "/"))
	host.SharedData().SetFault(func(op, key string) wire.Status {
		if op == "set" && key == topKey {
			return wire.StatusCasMismatch
		}
		return wire.StatusOK
	})
	host.Tick() // contended throughout: nothing lands
	host.SharedData().SetFault(func(op, key string) wire.Status {
		if key == topKey {
			return wire.StatusInternalFailure
		}
		return wire.StatusOK
	})
	host.Tick() // failing: logged once, and nothing lands
	host.Tick()
	if logs := host.LogsAt(abi.LogLevelWarn); len(logs) != 1 || !strings.Contains(logs[0], "cannot read the top offenders of rule per-key") {
		t.Errorf("warnings %q, want one", logs)
	}
	host.SharedData().SetFault(nil)
	host.Request(keyed("alice", "/"))
	host.Tick()
	operate(t, host, "GET", "/.tollgate/top", &view)
	if view.Rules[0].Rejections != 5 || view.Rules[0].Keys[0].AtLeast != 5 {
		t.Errorf("after a tick that could not merge: %+v, want all 5 rejections", view)
	}
}

// TestOperatorTopFlushedWhenThePluginStops: a new configuration replaces the plugin, whose
// rejections since its last tick still reach the summary the next plugin shows.
func TestOperatorTopFlushedWhenThePluginStops(t *testing.T) {
	data := hostcore.NewSharedData()
	data.Acquire("") // as another VM of the vm_id would: the data outlives the first plugin's VM
	defer data.Release("")
	opts := abitest.Options{LogLevel: abi.LogLevelInfo, SharedData: data}
	t.Run("first plugin", func(t *testing.T) {
		first := rigWith(t, operatorConfig(""), opts)
		for range 4 {
			first.Request(keyed("alice", "/"))
		}
		first.StopPlugin()
	})
	second := rigWith(t, operatorConfig(""), opts)
	var view topView
	operate(t, second, "GET", "/.tollgate/top", &view)
	if view.Rules[0].Rejections != 2 {
		t.Errorf("%+v, want the first plugin's 2 rejections", view)
	}
}
