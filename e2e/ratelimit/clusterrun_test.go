package ratelimit

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-proxy/tollgate/internal/admission"
)

// The Redis Cluster run: per-key global limits of clusterLimit a day, over clusterKeys keys per
// phase, from clusterClients concurrent clients through clusterReplicas `tollgate serve`
// replicas (two worker VMs each), against one envoyproxy/ratelimit in cluster mode.
const (
	clusterLimit       = 16
	clusterKeys        = 32
	clusterClients     = 16
	clusterReplicas    = 3
	clusterLeaseTokens = 4
)

// The rules, in the order of clusterPaths: direct (a call per request, failure mode allow), deny
// (the same with failure mode deny), leased (leases of up to clusterLeaseTokens, failure mode
// deny), and a local-only rule for the latency without a global check.
var (
	clusterPaths = []string{"/direct", "/deny", "/leased", "/local"}
	clusterRules = []string{"direct", "deny", "leased"}
)

const (
	pathDirect = iota
	pathDeny
	pathLeased
	pathLocal
)

var clusterDescriptors = func() string {
	var b strings.Builder
	b.WriteString("domain: tollgate-cluster\ndescriptors:\n")
	for _, rule := range clusterRules {
		fmt.Fprintf(&b, "- key: rule\n  value: %s\n  descriptors:\n  - key: key\n    rate_limit: {unit: day, requests_per_unit: %d}\n",
			rule, clusterLimit)
	}
	return b.String()
}()

// clusterConfig: local limits that never bind; the service is given 2 s, so that only a failed
// node (not a slow machine) turns a check into a failure.
var clusterConfig = func() string {
	data, err := os.ReadFile(clusterConfigFile)
	if err != nil {
		panic(err)
	}
	return string(data)
}()

// clusterConfigFile is the configuration's file: internal/simulate's fleet test models this run
// from the same file.
const clusterConfigFile = "testdata/cluster.json"

// clusterJob is one request: a path of clusterPaths and a key.
type clusterJob struct {
	path int
	key  string
}

type clusterResult struct {
	job     clusterJob
	status  int
	latency time.Duration
	err     error
}

// clusterFleet is the replicas in front of the service.
type clusterFleet struct {
	replicas []*replica
	cluster  *redisCluster // where the service counts
	sent     atomic.Int64  // requests sent so far, for a hook mid-run
}

// drive sends the jobs from clusterClients concurrent clients, job i to replica i mod the number
// of replicas; hook, if not nil, runs once when job hookAt is taken.
func (f *clusterFleet) drive(jobs []clusterJob, hookAt int, hook func()) []clusterResult {
	results := make([]clusterResult, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < clusterClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) {
					return
				}
				if hook != nil && i == hookAt {
					hook()
				}
				f.sent.Add(1)
				r := f.replicas[i%len(f.replicas)]
				began := time.Now()
				status, _, _, err := r.do(clusterPaths[jobs[i].path], jobs[i].key)
				results[i] = clusterResult{job: jobs[i], status: status, latency: time.Since(began), err: err}
			}
		}()
	}
	wg.Wait()
	return results
}

// rounds are n rounds of one request per key and path, keys interleaved.
func rounds(keys []string, n int) []clusterJob {
	var jobs []clusterJob
	for i := 0; i < n; i++ {
		for _, k := range keys {
			for p := range clusterPaths {
				jobs = append(jobs, clusterJob{p, k})
			}
		}
	}
	return jobs
}

func phaseKeys(phase string) []string {
	keys := make([]string, clusterKeys)
	for i := range keys {
		keys[i] = phase + "-" + strconv.Itoa(i)
	}
	return keys
}

// drain sends each key's leased requests to each replica, one after the other, until that
// replica rejects: what a replica still holds leased is spent, so that what the leased rule
// admitted can be compared with the limit. At most 2 × clusterLimit requests per replica and key.
func (f *clusterFleet) drain(keys []string) ([]clusterResult, error) {
	var out []clusterResult
	for _, r := range f.replicas {
		for _, k := range keys {
			for i := 0; i < 2*clusterLimit; i++ {
				status, _, _, err := r.do(clusterPaths[pathLeased], k)
				if err != nil {
					return out, err
				}
				out = append(out, clusterResult{job: clusterJob{pathLeased, k}, status: status})
				if status != http.StatusOK {
					break
				}
			}
		}
	}
	return out, nil
}

// stats adds up the fleet's counters.
func (f *clusterFleet) stats(t *testing.T) map[string]int64 { return sumStats(t, f.replicas) }

// phaseFigures are one phase's measurements, per path of clusterPaths.
type phaseFigures struct {
	name     string
	duration time.Duration
	requests [4]int
	statuses [4]map[int]int
	latency  [4][]time.Duration // sorted
	calls    [3]int64           // calls to the service, per rule
	ok       [3]int64           // calls answered OK, per rule
	failed   [3]int64           // calls that failed or timed out, per rule
	admitted [3]map[string]int  // per rule and key
	sent     [3]map[string]int  // requests per rule and key
	// counted is, per rule of countedRules and key, the count Redis holds at the phase's end.
	counted [3]map[string]int
}

// measure turns a phase's results and the counters before and after it into its figures.
func measure(name string, d time.Duration, results []clusterResult, before, after map[string]int64) *phaseFigures {
	p := &phaseFigures{name: name, duration: d}
	for i := range p.statuses {
		p.statuses[i] = map[int]int{}
	}
	for i := range p.admitted {
		p.admitted[i], p.sent[i], p.counted[i] = map[string]int{}, map[string]int{}, map[string]int{}
	}
	for _, r := range results {
		p.requests[r.job.path]++
		p.statuses[r.job.path][r.status]++
		if r.latency > 0 {
			p.latency[r.job.path] = append(p.latency[r.job.path], r.latency)
		}
		if r.job.path < pathLocal {
			p.sent[r.job.path][r.job.key]++
		}
		if r.job.path < pathLocal && r.status == http.StatusOK {
			p.admitted[r.job.path][r.job.key]++
		}
	}
	for i := range p.latency {
		sort.Slice(p.latency[i], func(a, b int) bool { return p.latency[i][a] < p.latency[i][b] })
	}
	delta := func(rule, kind string) int64 {
		name := "tollgate.rule." + rule + ".global_" + kind
		return after[name] - before[name]
	}
	for i, rule := range clusterRules {
		p.failed[i] = delta(rule, "error") + delta(rule, "timeout")
		p.ok[i] = delta(rule, "ok")
		p.calls[i] = p.ok[i] + delta(rule, "over_limit") + p.failed[i]
	}
	return p
}

// over is what a rule admitted beyond the limit, summed over the phase's keys; under is what it
// admitted below it.
func (p *phaseFigures) overUnder(rule int) (over, under int) {
	for _, n := range p.admitted[rule] {
		over += max(n-clusterLimit, 0)
		under += max(clusterLimit-n, 0)
	}
	// Keys never admitted at all are under by the whole limit.
	under += (clusterKeys - len(p.admitted[rule])) * clusterLimit
	return over, under
}

// countedRules are the rules whose every request is one call with hits_addend 1: the hits
// Tollgate sent the service for a key are the key's requests, and Redis can be asked how many of
// them it holds. (A leased rule's calls carry a lease's worth, known to no one but the replica.)
var countedRules = []int{pathDirect, pathDeny}

// readCounts reads, per rule of countedRules and key, the count Redis holds. envoyproxy/ratelimit
// names a counter after the domain, each descriptor entry's key and value, and the window's start
// (Unix seconds, a multiple of the unit's), joined with "_"; Tollgate's entries are (rule, the rule's
// name) and (key, GlobalKey of the rule and the partition key).
func (f *clusterFleet) readCounts(p *phaseFigures, keys []string, windowStart int64) error {
	for _, rule := range countedRules {
		name := clusterRules[rule]
		for _, k := range keys {
			counter := fmt.Sprintf("tollgate-cluster_rule_%s_key_%s_%d", name, admission.GlobalKey(name, partitionKey(k)), windowStart)
			n, err := f.cluster.count(counter)
			if err != nil {
				return err
			}
			p.counted[rule][k] = n
		}
	}
	return nil
}

// partitionKey is Tollgate's partition key of the rules' one key part, the x-api-key header:
// the value's length, ':', the value.
func partitionKey(value string) string { return strconv.Itoa(len(value)) + ":" + value }

// accounting is what Redis's counters say of a rule's hits (a rule of countedRules), summed over
// the phase's keys. lost is the hits Tollgate sent that Redis does not hold: increments a master
// acknowledged and lost with it, and checks that failed before reaching Redis. extra is the hits
// Redis holds beyond those Tollgate sent (the service ran some increments more than once).
// misread is what a key was admitted over the limit beyond its lost hits: OK answers no lost
// increment explains, so replies the service got wrong. For the deny rule, whose admissions are
// exactly its OK answers, over-admission is at most lost + misread, key by key.
type accounting struct{ lost, extra, misread int }

func (p *phaseFigures) accounting(rule int) accounting {
	var a accounting
	for k, sent := range p.sent[rule] {
		l := sent - p.counted[rule][k]
		a.lost += max(l, 0)
		a.extra += max(-l, 0)
		a.misread += max(p.admitted[rule][k]-clusterLimit-max(l, 0), 0)
	}
	return a
}

// callsPerRequest is a rule's calls to the service per request it received.
func (p *phaseFigures) callsPerRequest(rule int) float64 {
	if p.requests[rule] == 0 {
		return 0
	}
	return float64(p.calls[rule]) / float64(p.requests[rule])
}

func (p *phaseFigures) quantile(path int, q float64) time.Duration {
	if len(p.latency[path]) == 0 {
		return 0
	}
	return quantile(p.latency[path], q)
}
