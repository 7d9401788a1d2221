package plugin

import (
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/abi/abitest"
	"github.com/tollgate-proxy/tollgate/internal/admission"
)

// headerRequest is a request with the given headers and a fixed client address.
type headerRequest map[string]string

func (r headerRequest) Header(name string) (string, bool)       { v, ok := r[name]; return v, ok }
func (r headerRequest) HeaderValues(name string) (string, bool) { v, ok := r[name]; return v, ok }
func (headerRequest) SourceAddress() (string, bool)             { return "192.0.2.1:1", true }
func (headerRequest) Property([]string) (string, bool)          { return "", false }

// rateLimitHeaders renders the headers into a buffer of their own: the results of two calls do
// not share bytes.
func rateLimitHeaders(style config.HeaderStyle, rules []rule, out *admission.Outcome) [][2]string {
	var t rateLimitText
	return t.render(style, rules, out)
}

func TestRateLimitHeaders(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"rate_limit_headers": "draft", "rules": [
	  {"name": "burst", "key": [{"header": "k"}], "limits": [{"capacity": 10, "refill_tokens": 10, "refill_interval": "1m"}]},
	  {"name": "daily", "key": [{"header": "k"}], "limits": [
	    {"algorithm": "fixed_window", "capacity": 1000, "window": "24h"},
	    {"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	policy, err := admission.Compile(cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	abitest.New(t, abitest.Options{}) // the host behind the filter's own store
	store := sharedData
	if err := policy.LoadSecret(store, func() uint64 { return 7 }); err != nil {
		t.Fatal(err)
	}
	gate := admission.NewGate(policy)
	request := headerRequest{"k": "secret-key"}
	xRateLimit := *cfg
	xRateLimit.RateLimitHeaders = config.HeadersXRateLimit

	out := gate.Admit(request, store, 0)
	if out.Verdict != admission.Allow || len(out.Limits) != 3 {
		t.Fatalf("first request: %+v", out)
	}
	// pk is the partition key's keyed hash, which admission computes; never the key.
	pk := func(l admission.LimitStatus) string {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], l.PartitionHash)
		return ":" + base64.StdEncoding.EncodeToString(b[:]) + ":"
	}
	burstPK, dailyPK := pk(out.Limits[0]), pk(out.Limits[1])
	draft := rateLimitHeaders(cfg.RateLimitHeaders, compiledNames(cfg), out)
	wantPolicy := `"burst";q=10;w=60, "daily/0";q=1000;w=86400, "daily/1";q=2;w=2`
	// t is the time until more quota: a token every 6 s, the window's end, a token every second.
	wantState := `"burst";r=9;t=6;pk=` + burstPK + `, "daily/0";r=999;t=86400;pk=` + dailyPK + `, "daily/1";r=1;t=1;pk=` + dailyPK
	if len(draft) != 2 || draft[0] != [2]string{"ratelimit-policy", wantPolicy} || draft[1] != [2]string{"ratelimit", wantState} {
		t.Fatalf("draft headers:\n got  %q\n want %q / %q", draft, wantPolicy, wantState)
	}
	if strings.Contains(draft[1][1], "secret-key") {
		t.Fatalf("the partition key shows: %q", draft[1][1])
	}
	x := rateLimitHeaders(xRateLimit.RateLimitHeaders, compiledNames(cfg), out)
	if len(x) != 3 || x[0] != [2]string{"x-ratelimit-limit", "2"} || x[1] != [2]string{"x-ratelimit-remaining", "1"} || x[2] != [2]string{"x-ratelimit-reset", "1"} {
		t.Fatalf("x-ratelimit: %q", x)
	}

	gate.Admit(request, store, 0)
	out = gate.Admit(request, store, 0)
	x = rateLimitHeaders(xRateLimit.RateLimitHeaders, compiledNames(cfg), out)
	// X-RateLimit-Reset is the time until the limit is whole again, on a rejection too (two tokens,
	// 2 s); Retry-After is when the request would be admitted.
	if out.Verdict != admission.Limited || x[0][1] != "2" || x[1][1] != "0" || x[2][1] != "2" {
		t.Fatalf("rejected: %+v %q", out, x)
	}
	// On a rejection RateLimit carries the rejecting limit only, its t equal to Retry-After.
	draft = rateLimitHeaders(cfg.RateLimitHeaders, compiledNames(cfg), out)
	if draft[0][1] != wantPolicy || draft[1][1] != `"daily/1";r=0;t=1;pk=`+dailyPK {
		t.Fatalf("rejected draft headers: %q", draft)
	}

	off := *cfg
	off.RateLimitHeaders = config.HeadersOff
	if got := rateLimitHeaders(off.RateLimitHeaders, compiledNames(cfg), out); got != nil {
		t.Fatalf("headers off: %q", got)
	}

	// Rendered again into the buffer that rendered them before, they allocate nothing, and the
	// buffer's last rendering is whole.
	var buf rateLimitText
	names := compiledNames(cfg)
	buf.render(config.HeadersDraft, names, out)
	if n := testing.AllocsPerRun(100, func() {
		buf.render(config.HeadersXRateLimit, names, out)
		buf.render(config.HeadersDraft, names, out)
	}); n != 0 {
		t.Errorf("rendering into a grown buffer: %.1f allocations, want 0", n)
	}
	if got := buf.render(config.HeadersDraft, names, out); got[0][1] != wantPolicy || got[1][1] != `"daily/1";r=0;t=1;pk=`+dailyPK {
		t.Errorf("rendered again: %q", got)
	}
	// A rejection that no limit decided (a delay whose queue is full) has an empty RateLimit,
	// into a buffer that never grew too.
	burst := out.Limits[0]
	burst.Rejecting = false
	queueFull := &admission.Outcome{Verdict: admission.Limited, Limits: []admission.LimitStatus{burst}}
	var fresh rateLimitText
	if got := fresh.render(config.HeadersDraft, names, queueFull); len(got) != 2 || got[1] != [2]string{"ratelimit", ""} ||
		got[0] != [2]string{"ratelimit-policy", `"burst";q=10;w=60`} {
		t.Errorf("a rejection no limit decided: %q", got)
	}
}

// Long and calendar windows in the headers: a month's RateLimit-Policy window is that month's
// length, and the reset is the time to the next calendar boundary; a 30-day window and a daily
// bucket of 100,000 tokens (one a day) state their full length.
func TestRateLimitHeadersOfLongQuotas(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"rate_limit_headers": "draft", "rules": [
	  {"name": "month", "key": [{"header": "k"}], "limits": [{"algorithm": "fixed_window", "capacity": 3, "calendar": "month"}]},
	  {"name": "long", "key": [{"header": "k"}], "limits": [
	    {"algorithm": "fixed_window", "capacity": 50, "window": "30d"},
	    {"capacity": 100000, "refill_tokens": 1, "refill_interval": "1d"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	policy, err := admission.Compile(cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	abitest.New(t, abitest.Options{}) // the host behind the filter's own store
	store := sharedData
	if err := policy.LoadSecret(store, func() uint64 { return 7 }); err != nil {
		t.Fatal(err)
	}
	gate := admission.NewGate(policy)
	// 2024-02-28 12:00 UTC: the leap February ends in 36 hours.
	const feb28Noon = 1709121600 * int64(1e9)
	gate.SetWallClock(func() (int64, error) { return feb28Noon, nil })
	request := headerRequest{"k": "key"}
	out := gate.Admit(request, store, 0)
	if out.Verdict != admission.Allow || len(out.Limits) != 3 {
		t.Fatalf("first request: %+v", out)
	}
	draft := rateLimitHeaders(cfg.RateLimitHeaders, compiledNames(cfg), out)
	wantPolicy := `"month";q=3;w=2505600, "long/0";q=50;w=2592000, "long/1";q=100000;w=8640000000`
	if draft[0][1] != wantPolicy {
		t.Errorf("RateLimit-Policy %q, want %q", draft[0][1], wantPolicy)
	}
	if !strings.HasPrefix(draft[1][1], `"month";r=2;t=129600;`) || !strings.Contains(draft[1][1], `"long/0";r=49;t=2592000;`) ||
		!strings.Contains(draft[1][1], `"long/1";r=99999;t=86400;`) {
		t.Errorf("RateLimit %q", draft[1][1])
	}
	xRateLimit := *cfg
	xRateLimit.RateLimitHeaders = config.HeadersXRateLimit
	gate.Admit(request, store, 0)
	gate.Admit(request, store, 0)
	out = gate.Admit(request, store, 0)
	if out.Verdict != admission.Limited || out.RetryAfterSeconds() != 36*3600 {
		t.Fatalf("fourth request in the month: %+v, want limited for 36 hours", out)
	}
	x := rateLimitHeaders(xRateLimit.RateLimitHeaders, compiledNames(cfg), out)
	if x[0] != [2]string{"x-ratelimit-limit", "3"} || x[1] != [2]string{"x-ratelimit-remaining", "0"} || x[2] != [2]string{"x-ratelimit-reset", "129600"} {
		t.Errorf("x-ratelimit on the rejection: %q", x)
	}
}

// appendBase64 writes what encoding/base64's padded standard encoding writes.
func TestAppendBase64(t *testing.T) {
	values := []uint64{0, 1, 63, 64, 1 << 63, 0xffffffffffffffff, 0x0123456789abcdef, 0xfedcba9876543210}
	for i := range 1000 {
		values = append(values, uint64(i)*0x9e3779b97f4a7c15)
	}
	for _, v := range values {
		var b [8]byte
		for i := range b {
			b[i] = byte(v >> (56 - 8*i))
		}
		want := "x" + base64.StdEncoding.EncodeToString(b[:])
		if got := string(appendBase64([]byte("x"), v)); got != want {
			t.Fatalf("appendBase64(%#x) = %q, want %q", v, got, want)
		}
	}
}

// compiledNames are the rules of cfg with what the rate-limit headers read of them compiled.
func compiledNames(cfg *config.Config) []rule {
	rules := make([]rule, len(cfg.Rules))
	for i := range cfg.Rules {
		rules[i].policyNames = policyNames(&cfg.Rules[i])
	}
	return rules
}
