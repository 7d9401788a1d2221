package e2e

import (
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
)

// limits_by through the module: the x-plan header names the tier, free when missing or unknown,
// and a key that changes tier carries its tokens over (refills are an hour away, so every count
// below is what the configuration alone allows).
func TestTiersThroughTheModule(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy133, `{"rate_limit_headers": "x-ratelimit", "rules": [{"name": "plans", "key": [{"header": "x-user"}],
	  "limits_by": {"part": {"header": "x-plan"}, "default": "free", "tiers": {
	    "free": [{"capacity": 2, "refill_tokens": 2, "refill_interval": "1h"}],
	    "pro":  [{"capacity": 4, "refill_tokens": 4, "refill_interval": "1h"},
	             {"algorithm": "fixed_window", "capacity": 100, "calendar": "month"}]}}}]}`, 2)
	user := func(name string, plan ...string) host.Request {
		headers := []string{"x-user", name}
		if len(plan) > 0 {
			headers = append(headers, "x-plan", plan[0])
		}
		return httpReq("GET", "/", peer, headers...)
	}
	limit := func(quota, remaining string) map[string]string {
		return map[string]string{"x-ratelimit-limit": quota, "x-ratelimit-remaining": remaining}
	}
	runPolicy(t, g, []policyStep{
		{name: "free by default", req: user("alice"), status: 200, headers: limit("2", "1")},
		{name: "free 2", req: user("alice"), status: 200, headers: limit("2", "0")},
		{name: "free spent", req: user("alice"), status: 429},
		{name: "an unknown tier is free", req: user("alice", "gold"), status: 429},
		{name: "pro carries the empty bucket", req: user("alice", "pro"), status: 429},

		{name: "pro 1", req: user("bob", "pro"), status: 200, headers: limit("4", "3")},
		{name: "pro 2", req: user("bob", "pro"), status: 200},
		{name: "pro 3", req: user("bob", "pro"), status: 200},
		{name: "pro 4", req: user("bob", "pro"), status: 200, headers: limit("4", "0")},
		{name: "pro spent", req: user("bob", "pro"), status: 429},
		{name: "free gains nothing", req: user("bob"), status: 429},

		// Back and forth: 3 left in pro, 2 of them fit in free, and pro gets back what free left.
		{name: "carol pro", req: user("carol", "pro"), status: 200, headers: limit("4", "3")},
		{name: "carol free", req: user("carol", "free"), status: 200, headers: limit("2", "1")},
		{name: "carol pro again", req: user("carol", "pro"), status: 200, headers: limit("4", "0")},
		{name: "carol spent", req: user("carol", "pro"), status: 429},
		{name: "carol free spent too", req: user("carol"), status: 429},

		{name: "no user: the key is missing", req: httpReq("GET", "/", peer, "x-plan", "pro"), status: 401},
	})
}

// The tier from metadata an auth filter wrote, read through an attribute. Envoy answers
// proxy_get_property for ["metadata", "filter_metadata", NAMESPACE, KEY...] with a string value's
// bytes as they are (proxy-wasm-rust-sdk's examples/filter_metadata/src/lib.rs reads a Lua
// filter's string that way, against Envoy), which is what the host gives here.
func TestTierFromMetadataThroughTheModule(t *testing.T) {
	t.Parallel()
	g := newRig(t, host.Envoy133, `{"rules": [{"name": "plans", "key": [{"header": "x-user"}],
	  "limits_by": {"part": {"attribute": ["metadata", "filter_metadata", "auth", "plan"]}, "default": "free", "tiers": {
	    "free": [{"capacity": 1, "refill_tokens": 1, "refill_interval": "1h"}],
	    "pro":  [{"capacity": 3, "refill_tokens": 3, "refill_interval": "1h"}]}}}]}`, 1)
	withPlan := func(r host.Request, plan string) host.Request {
		r.Attributes = map[string]string{"metadata.filter_metadata.auth.plan": plan}
		return r
	}
	runPolicy(t, g, []policyStep{
		{name: "pro 1", req: withPlan(httpReq("GET", "/", peer, "x-user", "a"), "pro"), status: 200},
		{name: "pro 2", req: withPlan(httpReq("GET", "/", peer, "x-user", "a"), "pro"), status: 200},
		{name: "pro 3", req: withPlan(httpReq("GET", "/", peer, "x-user", "a"), "pro"), status: 200},
		{name: "pro spent", req: withPlan(httpReq("GET", "/", peer, "x-user", "a"), "pro"), status: 429},
		{name: "no metadata: free", req: httpReq("GET", "/", peer, "x-user", "b"), status: 200},
		{name: "free spent", req: httpReq("GET", "/", peer, "x-user", "b"), status: 429},
		// A client sending x-plan itself changes nothing: the tier is not a header here.
		{name: "a header is not the tier", req: httpReq("GET", "/", peer, "x-user", "b", "x-plan", "pro"), status: 429},
	})
}
