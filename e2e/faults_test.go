package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// Fault injection through the real module: shared data failing, foreign or corrupt values under
// the module's keys, a monotonic clock that steps backwards or leaps forwards, and property
// lookups that fail. The module must keep serving, apply failure_mode, log each distinct error
// once and count every occurrence in tollgate.internal_errors.

func failureConfig(mode string) string {
	return `{"failure_mode": "` + mode + `", "rules": [{"name": "r", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]}]}`
}

func wantStatus(mode string) int {
	if mode == "deny" {
		return 503
	}
	return 200
}

func keyReq(key string) host.Request { return httpReq("GET", "/", peer, "x-api-key", key) }

func TestSharedDataErrorsFollowFailureMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"allow", "deny"} {
		for _, op := range []string{"get", "set"} {
			t.Run(mode+"/"+op, func(t *testing.T) {
				g := newRigWith(t, host.Envoy133, failureConfig(mode), 2, rigOptions{})
				store := g.host.SharedData()
				store.SetFault(func(o, key string) wire.Status {
					if o == op && strings.HasPrefix(key, rowPrefix) {
						return wire.StatusInternalFailure
					}
					return wire.StatusOK
				})
				const requests = 10
				for i := 0; i < requests; i++ {
					resp := g.send(g.vms[i%2], keyReq("alice"), nil)
					if resp.Status != wantStatus(mode) {
						t.Fatalf("request %d: status %d, want %d", i, resp.Status, wantStatus(mode))
					}
				}
				if v := g.counter("tollgate.internal_errors"); v != requests {
					t.Errorf("tollgate.internal_errors = %d, want %d", v, requests)
				}
				// Two VMs: each logs the error once.
				message := map[string]string{"get": "cannot read shared data", "set": "cannot write to shared data"}[op]
				if n := g.countLogs(message); n != 2 {
					t.Errorf("%d log lines for one error on two VMs, want 2:\n%s", n, g.logText())
				}
				store.SetFault(nil)
				for i, want := range []int{200, 200, 200, 429} {
					if resp := g.send(g.vms[i%2], keyReq("alice"), nil); resp.Status != want {
						t.Fatalf("after the fault, request %d: status %d, want %d", i, resp.Status, want)
					}
				}
				for _, vm := range g.vms {
					if err := vm.Err(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// The module remembers only the last error it logged, and the message names the slot, so a store
// failing for two keys in turn logs a line per request rather than one per distinct error.
func TestDistinctErrorsLoggedOnceEach(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, failureConfig("allow"), 1, rigOptions{})
	g.host.SharedData().SetFault(func(op, key string) wire.Status {
		if strings.HasPrefix(key, rowPrefix) {
			return wire.StatusInternalFailure
		}
		return wire.StatusOK
	})
	for i := 0; i < 20; i++ {
		g.send(g.vms[0], keyReq([]string{"alice", "bob"}[i%2]), nil)
	}
	if n := g.countLogs("get shared data"); n > 2 {
		t.Fatalf("%d log lines for 2 distinct errors over 20 requests:\n%s", n, g.logText())
	}
}

// onlyRow returns the key of the only row in use, and its value.
func (g *rig) onlyRow() (string, []byte) {
	g.t.Helper()
	rows := g.rows()
	if len(rows) != 1 {
		g.t.Fatalf("%d rows in use, want 1", len(rows))
	}
	for key, value := range rows {
		return key, value
	}
	return "", nil
}

// corruptRows are values another writer could leave under a row's key, made from a valid row of
// one slot, the only bucket's: whole values that are not a row (not whole slots, or more than a
// row's), and rows whose slot is not a slot (or holds a level no bucket can have).
func corruptRows(valid []byte) map[string][]byte {
	out := map[string][]byte{
		"empty":               {},
		"short":               []byte("TG\x04"),
		"one short":           valid[:slotSize-1],
		"one long":            append(append([]byte(nil), valid...), 0),
		"one slot too many":   bytes.Repeat(valid, rowSlots+1),
		"foreign":             []byte("some other plugin's value, not a slot at all........"),
		"json":                []byte(`{"tokens": 1000}`),
		"all ones":            bytes.Repeat([]byte{0xff}, slotSize),
		"a whole row of ones": bytes.Repeat([]byte{0xff}, rowSlots*slotSize),
		"all zeros":           make([]byte, slotSize),
	}
	slot := func(name string, change func(slot []byte)) {
		v := append([]byte(nil), valid...)
		change(v[:slotSize])
		out[name] = v
	}
	for name, head := range map[string]string{"bad magic": "XG", "version 2": "TG\x02", "version 3": "TG\x03",
		"version 5": "TG\x05", "kind 0": "TG\x04\x00", "kind 2 (a claim)": "TG\x04\x21", "algorithm 9": "TG\x04\x19"} {
		slot(name, func(s []byte) { copy(s, head) })
	}
	for name, level := range map[string]int64{"negative tokens": -1, "tokens above capacity": math.MaxInt64} {
		slot(name, func(s []byte) { binary.LittleEndian.PutUint64(s[24:], uint64(level)) })
	}
	return out
}

// A corrupt or foreign value under the module's row key is replaced with a valid row, and the
// key then has at most a fresh bucket: the module never traps, never fails the request, and
// never admits more than the capacity from the replaced row.
func TestCorruptSlotValuesAreReplaced(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, failureConfig("deny"), 1, rigOptions{})
	g.send(g.vms[0], keyReq("alice"), nil)
	row, valid := g.onlyRow()
	owner := slotOwner(valid[:slotSize])
	for name, value := range corruptRows(valid) {
		g.clock.Advance(time.Minute) // whatever was there is idle
		g.host.SharedData().Set("tollgate", row, value, 0)
		admitted := 0
		for i := 0; i < 5; i++ {
			resp := g.send(g.vms[0], keyReq("alice"), nil)
			switch resp.Status {
			case 200:
				admitted++
			case 429:
			default:
				t.Fatalf("%s: status %d: %s", name, resp.Status, resp.Body)
			}
		}
		if admitted != 3 {
			t.Errorf("%s: %d admitted in one instant, want the capacity, 3", name, admitted)
		}
		now, _, _ := g.host.SharedData().Get("tollgate", row)
		if len(now)%slotSize != 0 || len(now) == 0 || len(now) > rowSlots*slotSize || string(now[:3]) != "TG"+string(rune(slotLayoutVersion)) || slotOwner(now[:slotSize]) != owner {
			t.Errorf("%s: the row now holds %x, want alice's valid slot first", name, now)
		}
	}
	if err := g.vms[0].Err(); err != nil {
		t.Fatal(err)
	}
}

// A value under the module's key that it did not write means another plugin shares the
// namespace, or memory was corrupted: it is logged once and counted, as any internal error.
func TestCorruptSlotValuesAreReported(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, failureConfig("allow"), 1, rigOptions{})
	g.send(g.vms[0], keyReq("alice"), nil)
	row, _ := g.onlyRow()
	g.host.SharedData().Set("tollgate", row, []byte("garbage"), 0)
	g.send(g.vms[0], keyReq("alice"), nil)
	if g.counter("tollgate.internal_errors") == 0 || g.countLogs("tollgate:") <= 1 {
		t.Fatalf("a foreign value under a row key went unreported:\n%s", g.logText())
	}
}

// The key table's secret is read once per plugin start. A value under its key that Tollgate did
// not write is never overwritten (running VMs may still hash with the old secret, and a second
// secret would give every key a second bucket): a VM that finds one refuses to start, naming it.
func TestCorruptSecretIsNeverReplaced(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, failureConfig("allow"), 1, rigOptions{})
	foreign := []byte("someone else's value")
	g.host.SharedData().Set("tollgate", secretKey, foreign, 0)
	if _, err := g.host.NewVM(context.Background()); err == nil {
		t.Fatal("a VM started with a foreign value under the secret's key")
	}
	if g.countLogs("holds a value Tollgate did not write") == 0 {
		t.Errorf("the refusal does not name the problem:\n%s", g.logText())
	}
	if got, _, _ := g.host.SharedData().Get("tollgate", secretKey); string(got) != string(foreign) {
		t.Fatalf("the secret's key now holds %q: it was overwritten", got)
	}
}

// Envoy's monotonic clock never steps back (std::chrono::steady_clock), but the module must
// survive a host whose clock does: a bucket or window never refills while the clock is behind
// the time it was last updated, so a step back admits nothing extra, and time moving on again
// continues from where it was.
func TestMonotonicClockStepsBackwards(t *testing.T) {
	t.Parallel()
	config := `{"rules": [
	  {"name": "tb", "match": {"headers": [{"name": "x-rule", "exact": "tb"}]}, "key": [{"header": "x-api-key"}],
	   "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "fixed", "match": {"headers": [{"name": "x-rule", "exact": "fixed"}]}, "key": [{"header": "x-api-key"}],
	   "limits": [{"algorithm": "fixed_window", "capacity": 3, "window": "1s"}]},
	  {"name": "sliding", "match": {"headers": [{"name": "x-rule", "exact": "sliding"}]}, "key": [{"header": "x-api-key"}],
	   "limits": [{"algorithm": "sliding_window", "capacity": 3, "window": "1s"}]}]}`
	g := newRigWith(t, host.Envoy133, config, 2, rigOptions{})
	send := func(rule, key string) *host.Response {
		return g.send(g.vms[0], httpReq("GET", "/", peer, "x-rule", rule, "x-api-key", key), nil)
	}
	for _, rule := range []string{"tb", "fixed", "sliding"} {
		t.Run(rule, func(t *testing.T) {
			g.at(time.Hour)
			for i := 0; i < 3; i++ {
				if s := send(rule, "alice").Status; s != 200 {
					t.Fatalf("request %d: %d", i, s)
				}
			}
			for _, back := range []time.Duration{time.Nanosecond, time.Second, time.Hour} {
				g.at(time.Hour - back)
				resp := send(rule, "alice")
				if resp.Status != 429 {
					t.Fatalf("%v back: status %d; an empty bucket must not refill while the clock is behind", back, resp.Status)
				}
				if ra, err := strconv.Atoi(resp.Header("retry-after")); err != nil || ra < 1 || ra > 2 {
					t.Errorf("%v back: Retry-After %q, want 1 or 2 s counted from the last update", back, resp.Header("retry-after"))
				}
				// A key never seen starts afresh at the earlier time.
				if s := send(rule, "bob-"+back.String()).Status; s != 200 {
					t.Errorf("%v back: a new key got %d", back, s)
				}
			}
			// Forward again: refills (or the next windows) counted from the last update; the
			// sliding window still weighs the previous window fully at its start.
			later := time.Second
			if rule == "sliding" {
				later = 2 * time.Second
			}
			g.at(time.Hour + later)
			if s := send(rule, "alice").Status; s != 200 {
				t.Errorf("%v after the last update: %d, want 200", later, s)
			}
		})
	}
	if v := g.counter("tollgate.internal_errors"); v != 0 {
		t.Errorf("tollgate.internal_errors = %d", v)
	}
	for _, vm := range g.vms {
		if err := vm.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A monotonic clock leaping to the edge of its range (and past it: Envoy's clock is read as an
// unsigned 64-bit value) must not trap or overflow: requests are decided, Retry-After stays a
// small whole number. Coming back from such a leap leaves the keys used during it without refill
// until the clock catches up again, which is the price of never refilling on a step back.
func TestMonotonicClockLeapsForward(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, `{"rules": [
	  {"name": "tb", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "fixed", "key": [{"header": "x-api-key"}], "limits": [{"algorithm": "fixed_window", "capacity": 4, "window": "1s"}]},
	  {"name": "sliding", "key": [{"header": "x-api-key"}], "limits": [{"algorithm": "sliding_window", "capacity": 4, "window": "1s"}]}]}`,
		1, rigOptions{})
	for _, at := range []uint64{1 << 62, math.MaxInt64 - uint64(time.Second), math.MaxInt64, 1 << 63, math.MaxUint64} {
		g.clock.SetMonotonic(int64(at))
		key := "key-" + strconv.FormatUint(at, 16)
		statuses := ""
		for i := 0; i < 4; i++ {
			resp := g.send(g.vms[0], keyReq(key), nil)
			statuses += strconv.Itoa(resp.Status) + " "
			if resp.Status == 429 {
				if ra, err := strconv.ParseInt(resp.Header("retry-after"), 10, 64); err != nil || ra < 1 || ra > 3600 {
					t.Errorf("monotonic %d: Retry-After %q", at, resp.Header("retry-after"))
				}
			}
		}
		if statuses != "200 200 429 429 " {
			t.Errorf("monotonic %d: statuses %s, want two admitted then limited", at, statuses)
		}
	}
	// Back to normal time: a key never used in the future is fine.
	g.at(0)
	if s := g.send(g.vms[0], keyReq("fresh"), nil).Status; s != 200 {
		t.Errorf("after the leap, a new key: %d", s)
	}
	if v := g.counter("tollgate.internal_errors"); v != 0 {
		t.Errorf("tollgate.internal_errors = %d", v)
	}
	if err := g.vms[0].Err(); err != nil {
		t.Fatal(err)
	}
}

// Property lookups failing for a rule keyed on something else change nothing; for a client_ip
// key the module keeps serving, and is back to normal when the lookups work again.
func TestPropertyLookupFailuresKeepTheModuleServing(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, `{"rules": [
	  {"name": "by-key", "match": {"path": {"prefix": "/key"}}, "key": [{"header": "x-api-key"}],
	   "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "by-ip", "match": {"path": {"prefix": "/ip"}}, "key": [{"client_ip": {}}],
	   "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}],
	  "client_ip": {"xff_num_trusted_hops": 1}}`, 1, rigOptions{})
	lookups := 0
	g.host.SetPropertyFault(func(path []string) wire.Status {
		lookups++
		return wire.StatusInternalFailure
	})
	for i, want := range []int{200, 200, 429} {
		if s := g.send(g.vms[0], httpReq("GET", "/key", peer, "x-api-key", "alice"), nil).Status; s != want {
			t.Fatalf("header key, request %d: %d, want %d", i, s, want)
		}
	}
	for i := 0; i < 3; i++ {
		resp := g.send(g.vms[0], httpReq("GET", "/ip", peer, "x-forwarded-for", "203.0.113.9"), nil)
		if resp.Status >= 500 && resp.Status != 503 {
			t.Fatalf("client_ip key with failing lookups: %d", resp.Status)
		}
	}
	if lookups == 0 {
		t.Fatal("the fault was never consulted")
	}
	g.host.SetPropertyFault(nil)
	for i, want := range []int{200, 200, 429} {
		if s := g.send(g.vms[0], httpReq("GET", "/ip", peer, "x-forwarded-for", "203.0.113.9"), nil).Status; s != want {
			t.Fatalf("client_ip key after the fault, request %d: %d, want %d", i, s, want)
		}
	}
	if err := g.vms[0].Err(); err != nil {
		t.Fatal(err)
	}
}

// A property lookup that fails is not a property that is absent: it follows failure_mode and is
// counted in tollgate.internal_errors. Taken for a missing key it would get 401 (counted in
// missing_key) and, for x-forwarded-for, silently fall back to source.address.
func TestPropertyLookupFailureFollowsFailureMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"allow", "deny"} {
		t.Run(mode, func(t *testing.T) {
			g := newRigWith(t, host.Envoy133, `{"failure_mode": "`+mode+`", "rules": [{"name": "by-ip", "key": [{"client_ip": {}}],
			  "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`, 1, rigOptions{})
			g.host.SetPropertyFault(func(path []string) wire.Status { return wire.StatusInternalFailure })
			resp := g.send(g.vms[0], httpReq("GET", "/", peer), nil)
			if resp.Status != wantStatus(mode) || g.counter("tollgate.internal_errors") != 1 {
				t.Fatalf("status %d (want %d), internal_errors %d (want 1): %s", resp.Status, wantStatus(mode),
					g.counter("tollgate.internal_errors"), resp.Body)
			}
		})
	}
}

// The plugin name is read once, in proxy_on_configure, to namespace the shared-data keys. A VM
// that cannot read it refuses to start (Envoy then keeps the previous configuration) rather than
// use another namespace, where every key's limit would be doubled.
func TestPluginNameLookupFailureRefusesToStart(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, failureConfig("allow"), 1, rigOptions{})
	g.host.SetPropertyFault(func(path []string) wire.Status {
		if path[0] == "plugin_name" {
			return wire.StatusInternalFailure
		}
		return wire.StatusOK
	})
	if _, err := g.host.NewVM(context.Background()); err == nil {
		t.Fatal("a VM started without its plugin name")
	}
	if g.countLogs("cannot read the plugin_name property") == 0 {
		t.Errorf("the refusal does not name the problem:\n%s", g.logText())
	}
}

// A read of the request's headers that fails is not the last request's headers: the request follows
// failure_mode and is counted in tollgate.internal_errors, and no bucket is charged for it. The
// module keeps the headers it read until a callback forgets them; a failed read that answered
// them would decide this request on the last one's key (here alice's, whose bucket is empty).
func TestFailedHeaderReadIsNotTheLastRequest(t *testing.T) {
	t.Parallel()
	g := newRigWith(t, host.Envoy133, `{"failure_mode": "allow", "rules": [{"name": "by-key", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}]}`, 1, rigOptions{})
	if s := g.send(g.vms[0], httpReq("GET", "/", peer, "x-api-key", "alice"), nil).Status; s != 200 {
		t.Fatalf("alice's first request: %d, want 200", s)
	}
	reads := 0
	g.host.SetHeaderPairsFault(func(mapType uint32) wire.Status {
		if mapType != 0 { // the request's headers
			return wire.StatusOK
		}
		reads++
		return wire.StatusInvalidMemoryAccess
	})
	resp := g.send(g.vms[0], httpReq("GET", "/", peer, "x-api-key", "bob"), nil)
	if resp.Status != 200 || g.counter("tollgate.internal_errors") != 1 || reads == 0 {
		t.Fatalf("bob's request while header reads fail: %d (want 200, the failure mode), internal_errors %d (want 1), %d failed reads: %s",
			resp.Status, g.counter("tollgate.internal_errors"), reads, resp.Body)
	}
	g.host.SetHeaderPairsFault(nil)
	for _, c := range []struct {
		key  string
		want int
	}{{"alice", 429}, {"bob", 200}, {"bob", 429}} {
		if s := g.send(g.vms[0], httpReq("GET", "/", peer, "x-api-key", c.key), nil).Status; s != c.want {
			t.Fatalf("%s after the fault: %d, want %d", c.key, s, c.want)
		}
	}
	if err := g.vms[0].Err(); err != nil {
		t.Fatal(err)
	}
}
