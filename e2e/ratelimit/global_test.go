package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/yaml"

	"github.com/tollgate-proxy/tollgate/config"
	"github.com/tollgate-proxy/tollgate/internal/admission"
)

// sharedLimit is the global limit per key of rule "shared", per hour.
const sharedLimit = 30

// descriptors is the service's configuration for these tests (domain tollgate-e2e): the rules of
// tollgateConfig send (rule, <name>), (key, <hash>).
var descriptors = `domain: tollgate-e2e
descriptors:
- key: rule
  value: shared
  descriptors:
  - key: key
    rate_limit: {unit: hour, requests_per_unit: ` + strconv.Itoa(sharedLimit) + `}
- key: rule
  value: open
  descriptors:
  - key: key
    rate_limit: {unit: hour, requests_per_unit: 1000000}
- key: rule
  value: closed
  descriptors:
  - key: key
    rate_limit: {unit: hour, requests_per_unit: 1000000}
- key: rule
  value: bench
  descriptors:
  - key: key
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
- key: rule
  value: leased-bench
  descriptors:
  - key: key
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
- key: rule
  value: leased
  descriptors:
  - key: key
    rate_limit: {unit: hour, requests_per_unit: ` + strconv.Itoa(leasedLimit) + `}
`

// tollgateConfig gives each rule its own path. The local limits never bind in these tests: what
// is measured is the global limit. Every rule waits up to 10 s for the service, so that a slow
// machine cannot turn a check into a timeout that the failure mode would then decide; a stopped
// service fails the calls at once (connection refused), whatever the timeout.
const tollgateConfig = `{"rules": [
  {"name": "shared", "match": {"path": {"prefix": "/shared"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100000, "refill_tokens": 100000, "refill_interval": "1s"}],
   "global": {"cluster": "ratelimit", "domain": "tollgate-e2e", "timeout": "10s"}},
  {"name": "open", "match": {"path": {"prefix": "/open"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100000, "refill_tokens": 100000, "refill_interval": "1s"}],
   "global": {"cluster": "ratelimit", "domain": "tollgate-e2e", "timeout": "10s", "failure_mode": "allow"}},
  {"name": "closed", "match": {"path": {"prefix": "/closed"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100000, "refill_tokens": 100000, "refill_interval": "1s"}],
   "global": {"cluster": "ratelimit", "domain": "tollgate-e2e", "timeout": "10s", "failure_mode": "deny"}},
  {"name": "local", "match": {"path": {"prefix": "/local"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100000, "refill_tokens": 100000, "refill_interval": "1s"}]},
  {"name": "bench", "match": {"path": {"prefix": "/bench"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100000, "refill_tokens": 100000, "refill_interval": "1s"}],
   "global": {"cluster": "ratelimit", "domain": "tollgate-e2e", "timeout": "10s"}},
  {"name": "leased-bench", "match": {"path": {"prefix": "/leased-bench"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100000, "refill_tokens": 100000, "refill_interval": "1s"}],
   "global": {"cluster": "ratelimit", "domain": "tollgate-e2e", "timeout": "10s", "lease": {"max_tokens": 16, "ttl": "1s"}}},
  {"name": "leased", "match": {"path": {"prefix": "/leased-figure"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100000, "refill_tokens": 100000, "refill_interval": "1s"}],
   "global": {"cluster": "ratelimit", "domain": "tollgate-e2e", "timeout": "10s", "lease": {"max_tokens": 16, "ttl": "10s"}}}
]}`

func upstream(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("upstream\n"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// hourWindow is the service's counting window for unit hour that holds the instant: the service
// counts per Unix hour, and answers duration_until_reset = 3600 - now%3600 seconds
// (envoyproxy/ratelimit src/utils/utilities.go, CalculateReset).
func hourWindow(at time.Time) int64 { return at.Unix() / 3600 }

// Two replicas (two `tollgate serve` processes, two worker VMs each) share one global limit:
// requests for one key spread over both inside one window admit exactly the limit in total; a
// second key is unaffected.
func TestTwoReplicasShareOneGlobalLimit(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	svc := e.startService(t, descriptors)
	up := upstream(t)
	replicas := []*replica{
		e.startReplica(t, "replica A", tollgateConfig, up, svc.GrpcAddr),
		e.startReplica(t, "replica B", tollgateConfig, up, svc.GrpcAddr),
	}

	// Each replica's first call opens its connection to the service, which takes longer than a
	// call: made during the burst, it would leave the other replica to admit the whole limit
	// before the first answers at all. One request of another key on each opens them first.
	for i, r := range replicas {
		if status, _, body := r.get(t, "/shared", "warm-up-"+strconv.Itoa(i)); status != 200 {
			t.Fatalf("replica %d's first request: %d %q", i, status, body)
		}
	}

	// The exact total holds within one window of the service. Every answer the service gives
	// during a burst is decided between its first send and its last answer; when those fall in
	// one hour, so does every decision. A burst that spans the turn of the hour proves nothing
	// and runs again with a fresh key, wholly inside the new hour.
	const total, workers = 4 * sharedLimit, 8
	var (
		key             string
		results         []burstResult
		before          map[string]int64
		began, finished time.Time
	)
	for attempt := 0; ; attempt++ {
		key = "alice-" + strconv.Itoa(attempt)
		before = sumStats(t, replicas)
		began = time.Now()
		results = burst(t, replicas, key, total, workers)
		finished = time.Now()
		if hourWindow(began) == hourWindow(finished) {
			break
		}
		if attempt > 0 {
			t.Fatalf("two bursts in a row spanned the turn of an hour (the last from %v to %v)", began, finished)
		}
		t.Logf("the burst for %s spanned the turn of the hour; again with another key", key)
	}
	// Retry-After is the service's duration_until_reset, decided between began and finished.
	latest, earliest := 3600-began.Unix()%3600, 3600-finished.Unix()%3600
	admitted, rejected := [2]int{}, [2]int{}
	for _, res := range results {
		switch res.status {
		case 200:
			admitted[res.replica]++
		case 429:
			rejected[res.replica]++
			n, err := strconv.ParseInt(res.retryAfter, 10, 64)
			if err != nil || n < earliest || n > latest {
				t.Errorf("Retry-After %q: want the seconds left in the service's hour window, from %d to %d", res.retryAfter, earliest, latest)
			}
		default:
			t.Errorf("replica %d answered %d", res.replica, res.status)
		}
	}
	t.Logf("key %s: %d requests over 2 replicas: admitted %d (A %d, B %d), rejected %d (A %d, B %d); global limit %d per hour",
		key, total, admitted[0]+admitted[1], admitted[0], admitted[1], rejected[0]+rejected[1], rejected[0], rejected[1], sharedLimit)
	if admitted[0]+admitted[1] != sharedLimit {
		t.Fatalf("the replicas admitted %d requests for one key, want exactly the global limit %d", admitted[0]+admitted[1], sharedLimit)
	}
	if admitted[0] == 0 || admitted[1] == 0 {
		t.Errorf("one replica admitted nothing (%v): the requests did not spread", admitted)
	}
	for i := 0; i < 10; i++ {
		if status, _, body := replicas[i%2].get(t, "/shared", "bob"); status != 200 {
			t.Fatalf("bob, request %d: %d %q: another key must be unaffected", i, status, body)
		}
	}
	after := sumStats(t, replicas)
	ok := after["tollgate.rule.shared.global_ok"] - before["tollgate.rule.shared.global_ok"]
	over := after["tollgate.rule.shared.global_over_limit"] - before["tollgate.rule.shared.global_over_limit"]
	if failures := after["tollgate.rule.shared.global_error"] + after["tollgate.rule.shared.global_timeout"]; failures != 0 {
		t.Errorf("the replicas counted %d failed checks: %v", failures, after)
	}
	for _, r := range replicas {
		r.healthy(t)
	}
	if ok != sharedLimit+10 || over != total-sharedLimit {
		t.Errorf("counters: global_ok %d, global_over_limit %d; want %d and %d", ok, over, sharedLimit+10, total-sharedLimit)
	}
}

type burstResult struct {
	replica    int
	status     int
	retryAfter string
}

// burst sends total requests for key from concurrent workers, alternating between the replicas.
func burst(t *testing.T, replicas []*replica, key string, total, workers int) []burstResult {
	results := make(chan burstResult, total)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < total; i += workers {
				r := i % len(replicas)
				status, retryAfter, _, err := replicas[r].do("/shared", key)
				if err != nil {
					t.Error(err)
				}
				results <- burstResult{r, status, retryAfter}
			}
		}(w)
	}
	wg.Wait()
	close(results)
	var out []burstResult
	for res := range results {
		out = append(out, res)
	}
	return out
}

// sumStats adds up the replicas' counters.
func sumStats(t *testing.T, replicas []*replica) map[string]int64 {
	t.Helper()
	sum := map[string]int64{}
	for _, r := range replicas {
		for name, v := range r.stats(t) {
			sum[name] += v
		}
	}
	return sum
}

// The service stopped mid-test: every request follows its rule's failure mode (allow: 200,
// deny: 503), no VM traps, and the replicas use the service again by themselves once it is back.
func TestServiceStoppedMidTest(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	svc := e.startService(t, descriptors)
	r := e.startReplica(t, "replica", tollgateConfig, upstream(t), svc.GrpcAddr)
	expect := func(phase, path string, want int, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if status, _, body := r.get(t, path, "carol"); status != want {
				t.Fatalf("%s: %s request %d: got %d %q, want %d", phase, path, i, status, body, want)
			}
		}
	}
	expect("service up", "/open", 200, 5)
	expect("service up", "/closed", 200, 5)

	svc.stop()
	start := time.Now()
	expect("service stopped", "/open", 200, 20)
	expect("service stopped", "/closed", 503, 20)
	t.Logf("service stopped: 20 requests of the allow rule answered 200, 20 of the deny rule 503, in %v", time.Since(start).Round(time.Millisecond))
	s := r.stats(t)
	if s["tollgate.rule.open.global_error"]+s["tollgate.rule.open.global_timeout"] != 20 ||
		s["tollgate.rule.closed.global_error"]+s["tollgate.rule.closed.global_timeout"] != 20 {
		t.Errorf("failures counted: %v", s)
	}
	r.healthy(t)

	restarted := time.Now()
	svc.start(t)
	back := time.Now()
	if err := waitFor(time.Minute, func() error {
		if status, _, _ := r.get(t, "/closed", "carol"); status != 200 {
			return fmt.Errorf("status %d", status)
		}
		return nil
	}); err != nil {
		t.Fatalf("the deny rule did not recover within a minute of the service's return: %v", err)
	}
	recovered := time.Since(back)
	expect("service back", "/closed", 200, 10)
	expect("service back", "/open", 200, 10)
	t.Logf("service back (it took %v to start and answer): the deny rule answered 200 again %v later, then 10 of 10 for each rule",
		back.Sub(restarted).Round(time.Millisecond), recovered.Round(time.Millisecond))
	r.healthy(t)
}

// latency measures n requests, alternating between the paths, and returns each path's
// durations, sorted.
func latency(t testing.TB, r *replica, paths []string, n int) [][]time.Duration {
	out := make([][]time.Duration, len(paths))
	for i := 0; i < n; i++ {
		for j, path := range paths {
			start := time.Now()
			if status, _, body := r.get(t, path, "dave"); status != 200 {
				t.Fatalf("%s: %d %q", path, status, body)
			}
			out[j] = append(out[j], time.Since(start))
		}
	}
	for _, d := range out {
		sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
	}
	return out
}

// The latency a global check adds per request: the same replica, the same key, a rule with a
// global limit against one without, measured in the same run, interleaved. The figure is logged
// and written to build/global-latency.txt (make test prints it).
func TestGlobalPathLatency(t *testing.T) {
	e := setUp(t)
	svc := e.startService(t, descriptors)
	r := e.startReplica(t, "replica", tollgateConfig, upstream(t), svc.GrpcAddr)
	paths := []string{"/local", "/bench", "/leased-bench"}
	latency(t, r, paths, 50) // warm up connections and VMs
	const n = 500
	d := latency(t, r, paths, n)
	report := latencyReport(time.Now(), n, []latencyPath{
		{"local only", d[0]},
		{"with global", d[1]},
		{"with global and a lease (max_tokens 16, ttl 1s)", d[2]},
	})
	t.Log("\n" + report)
	err := os.MkdirAll(filepath.Join(repoRoot, "build"), 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(repoRoot, "build", "global-latency.txt"), []byte(report), 0o644)
	}
	if err != nil {
		t.Logf("cannot write build/global-latency.txt: %v", err)
	}
	s := r.stats(t)
	if s["tollgate.rule.bench.global_ok"] != 550 {
		t.Errorf("global_ok of bench = %d, want 550: some checks did not reach the service", s["tollgate.rule.bench.global_ok"])
	}
	// With a lease most requests go on without a call; each call is a lease request.
	calls, served := s["tollgate.rule.leased-bench.global_ok"], s["tollgate.rule.leased-bench.global_lease_served"]
	t.Logf("with a lease: %d calls for 550 requests, %d served from the lease", calls, served)
	if calls != s["tollgate.rule.leased-bench.global_lease_requests"] || calls+served > 550 || served < 550/2 {
		t.Errorf("leased-bench: %d calls, %d served from the lease, %d lease requests, for 550 requests", calls, served,
			s["tollgate.rule.leased-bench.global_lease_requests"])
	}
	r.healthy(t)
}

// BenchmarkGlobalPath and BenchmarkLocalPath: one request per iteration through `tollgate
// serve`, with and without a global check (make bench).
func BenchmarkGlobalPath(b *testing.B) { benchmarkPath(b, "/bench") }
func BenchmarkLocalPath(b *testing.B)  { benchmarkPath(b, "/local") }

func benchmarkPath(b *testing.B, path string) {
	e := setUp(b)
	svc := e.startService(b, descriptors)
	r := e.startReplica(b, "replica", tollgateConfig, upstream(b), svc.GrpcAddr)
	latency(b, r, []string{path}, 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if status, _, _ := r.get(b, path, "erin"); status != 200 {
			b.Fatalf("status %d", status)
		}
	}
}

// The shipped descriptor configuration loads in the real service (its own checker and a
// running service), and the service gives a limit to the descriptor the shipped Envoy
// configuration's Tollgate sends.
func TestShippedDescriptorConfigInTheService(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	shipped, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "ratelimit", "ratelimit.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ratelimit.yaml"), shipped, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(e.checker, "-config_dir", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all rate limit configs ok") {
		t.Fatalf("config_check_cmd refuses deploy/ratelimit/ratelimit.yaml: %v\n%s", err, out)
	}

	rule := shippedGlobalRule(t)
	svc := e.startService(t, string(shipped))
	descriptor := &commonv3.RateLimitDescriptor{}
	for _, entry := range rule.Global.Entries {
		descriptor.Entries = append(descriptor.Entries, &commonv3.RateLimitDescriptor_Entry{Key: entry.Key, Value: entry.Value})
	}
	descriptor.Entries = append(descriptor.Entries,
		&commonv3.RateLimitDescriptor_Entry{Key: rule.Global.RuleEntry, Value: rule.Name},
		&commonv3.RateLimitDescriptor_Entry{Key: rule.Global.KeyEntry, Value: admission.GlobalKey(rule.Name, "frank")})
	descriptor.HitsAddend = wrapperspb.UInt64(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := svc.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: rule.Global.Domain, Descriptors: []*commonv3.RateLimitDescriptor{descriptor}})
	if err != nil {
		t.Fatal(err)
	}
	status := resp.GetStatuses()[0]
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || status.GetCurrentLimit() == nil {
		t.Fatalf("the service has no limit for what deploy/ratelimit/envoy.yaml sends: %v", resp)
	}
	t.Logf("the shipped pair: rule %s, %d requests per %s across replicas", rule.Name,
		status.GetCurrentLimit().GetRequestsPerUnit(), status.GetCurrentLimit().GetUnit())
}

// shippedGlobalRule reads the rule with a global limit of deploy/ratelimit/envoy.yaml's Tollgate
// configuration: the JSON text of the StringValue that holds "rules".
func shippedGlobalRule(t *testing.T) config.Rule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "ratelimit", "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var text string
	var find func(v any)
	find = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["@type"] == "type.googleapis.com/google.protobuf.StringValue" {
				if s, ok := v["value"].(string); ok && strings.Contains(s, `"rules"`) {
					text = s
				}
			}
			for _, child := range v {
				find(child)
			}
		case []any:
			for _, child := range v {
				find(child)
			}
		}
	}
	find(doc)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("the Tollgate configuration of deploy/ratelimit/envoy.yaml: %v", err)
	}
	for _, r := range cfg.Rules {
		if r.Global != nil {
			return r
		}
	}
	t.Fatal("no rule with a global limit in deploy/ratelimit/envoy.yaml")
	return config.Rule{}
}

// The Makefile builds the same version of the service as the tests.
func TestMakefilePinsTheSameVersion(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "RATELIMIT_VERSION ?= " + RateLimitVersion + "\n"; !strings.Contains(string(data), want) {
		t.Fatalf("the Makefile lacks %q", want)
	}
}
