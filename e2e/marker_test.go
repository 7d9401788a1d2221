package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// A client's own shadow marker never reaches the upstream, on any path through the filter that
// forwards a request: whatever the configuration (with or without a shadow rule), exempt or
// not, admitted at once, after a hold for its tokens or for a slot, without its key, when no
// rule matches, and when the failure mode lets the request through. Only a shadow rule that
// would have limited the request marks it, with its own name.
func TestForgedShadowMarkerNeverReachesTheUpstream(t *testing.T) {
	t.Parallel()
	const rules = `"exempt": {"paths": [{"exact": "/healthz"}]}, "rules": [
	  {"name": "plain", "match": {"path": {"prefix": "/plain/"}}, "key": [{"header": "x-api-key"}],
	   "missing_key": {"action": "allow"}, "limits": [{"capacity": 100, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "paced", "match": {"path": {"prefix": "/paced/"}}, "key": [{"header": "x-api-key"}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1s"}], "on_limit": {"action": "delay", "max_delay": "5s"}},
	  {"name": "slots", "match": {"path": {"prefix": "/slots/"}}, "key": [{"header": "x-api-key"}],
	   "limits": [{"algorithm": "concurrency", "max_in_flight": 1}], "on_limit": {"action": "delay", "max_delay": "5s"}}`
	const shadowRule = `,
	  {"name": "trial", "shadow": true, "match": {"path": {"prefix": "/trial/"}}, "key": [{"header": "x-api-key"}],
	   "limits": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}]}`
	for _, c := range []struct {
		name, config string
	}{
		{"without a shadow rule", `{` + rules + `]}`},
		{"with a shadow rule", `{` + rules + shadowRule + `]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t, host.Envoy139, c.config, 1)
			vm := g.vms[0]
			forged := func(path string, headers ...string) host.Request {
				headers = append(headers, "x-tollgate-shadow-limited", "forged", "X-Tollgate-Shadow-Limited", "forged too")
				return httpReq("GET", path, peer, headers...)
			}
			// wantUnmarked fails unless the request went on upstream with the marker gone (or,
			// with want, set to want alone).
			check := func(what string, d host.Decision, want string) {
				t.Helper()
				if !d.Continue {
					t.Fatalf("%s: %+v, want it forwarded\nlogs:\n%s", what, d, g.logText())
				}
				var marks []string
				for _, h := range d.RequestHeaders {
					if h[0] == "x-tollgate-shadow-limited" {
						marks = append(marks, h[1])
					}
				}
				if got := strings.Join(marks, "|"); got != want {
					t.Fatalf("%s: the upstream saw the marks %q, want %q", what, got, want)
				}
			}
			g.at(0)
			for _, s := range []struct {
				what string
				req  host.Request
			}{
				{"exempt", forged("/healthz")},
				{"no rule matches", forged("/other")},
				{"admitted", forged("/plain/x", "x-api-key", "k")},
				{"without its key, allowed", forged("/plain/x")},
				{"the first of a paced key", forged("/paced/x", "x-api-key", "k")},
			} {
				r := g.open(vm, s.req)
				if r.held {
					t.Fatalf("%s: held", s.what)
				}
				check(s.what, r.decision, "")
				g.finish(r)
			}

			// Held for its token, then resumed at a tick.
			held := g.open(vm, forged("/paced/x", "x-api-key", "k"))
			if !held.held {
				t.Fatalf("the second paced request was not held: %+v", held.decision)
			}
			g.tickAt(time.Second)
			if !g.settled(held) {
				t.Fatal("the paced request was not resumed when its token was due")
			}
			check("resumed after a hold", held.decision, "")
			g.finish(held)

			// Held for a slot, then resumed when the slot frees.
			first := g.open(vm, forged("/slots/x", "x-api-key", "k"))
			check("the first of a slot", first.decision, "")
			waiter := g.open(vm, forged("/slots/x", "x-api-key", "k"))
			if !waiter.held {
				t.Fatalf("the second request of one slot was not held: %+v", waiter.decision)
			}
			g.finish(first)
			g.tickAt(1100 * time.Millisecond)
			if !g.settled(waiter) {
				t.Fatal("the slot waiter was not resumed when the slot freed")
			}
			check("resumed after a slot wait", waiter.decision, "")
			g.finish(waiter)

			// The failure mode (allow) lets a request through when shared data fails.
			store := g.host.SharedData()
			store.SetFault(func(op, key string) wire.Status { return wire.StatusInternalFailure })
			r := g.open(vm, forged("/plain/x", "x-api-key", "k2"))
			check("failure mode allow", r.decision, "")
			g.finish(r)
			store.SetFault(nil)

			if strings.Contains(c.config, `"trial"`) {
				for i, want := range []string{"", "trial"} {
					r := g.open(vm, forged("/trial/x", "x-api-key", "k"))
					check("shadow rule, request "+string(rune('1'+i)), r.decision, want)
					g.finish(r)
				}
			}
		})
	}
}
