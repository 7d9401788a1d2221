package ratelimit

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// leasedLimit is the global limit per key of rule "leased" (a lease of up to 16 tokens), per hour.
const leasedLimit = 100

// Two replicas (two worker VMs each) with leases of up to 16 tokens share a global limit of 100
// per hour for one key; 400 requests spread over both from several clients. The total admitted
// never exceeds the limit; what the replicas hold back is bounded by replicas × lease size (at
// least 100 - 2 × 16 = 68 admitted); and the service is asked far less than once per request.
func TestLeasesKeepTheGlobalLimitWithFewCalls(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	svc := e.startService(t, descriptors)
	up := upstream(t)
	replicas := []*replica{
		e.startReplica(t, "replica A", tollgateConfig, up, svc.GrpcAddr),
		e.startReplica(t, "replica B", tollgateConfig, up, svc.GrpcAddr),
	}
	const total, clients = 400, 8
	var (
		key             string
		statuses        map[int]int
		before          map[string]int64
		began, finished time.Time
	)
	for attempt := 0; ; attempt++ {
		key = "lease-" + strconv.Itoa(attempt)
		before = sumStats(t, replicas)
		began = time.Now()
		statuses = leaseBurst(t, replicas, key, total, clients)
		finished = time.Now()
		if hourWindow(began) == hourWindow(finished) {
			break
		}
		if attempt > 0 {
			t.Fatalf("two bursts in a row spanned the turn of an hour (the last from %v to %v)", began, finished)
		}
		t.Logf("the burst for %s spanned the turn of the hour; again with another key", key)
	}
	after := sumStats(t, replicas)
	delta := func(kind string) int64 {
		name := "tollgate.rule.leased." + kind
		return after[name] - before[name]
	}
	admitted := statuses[200]
	calls := delta("global_ok") + delta("global_over_limit") + delta("global_error") + delta("global_timeout")
	t.Logf("key %s: %d requests over 2 replicas, %d clients: admitted %d, rejected %d; %d service calls "+
		"(%d lease requests: %d OK, %d OVER_LIMIT), %d tokens leased, %d expired unused, %d requests served from a lease, "+
		"%d rejected by a remembered OVER_LIMIT; global limit %d per hour",
		key, total, clients, admitted, statuses[429], calls, delta("global_lease_requests"), delta("global_ok"),
		delta("global_over_limit"), delta("global_lease_tokens"), delta("global_lease_expired"), delta("global_lease_served"),
		delta("global_over_limit_remembered"), leasedLimit)
	if statuses[200]+statuses[429] != total {
		t.Errorf("statuses %v: want only 200 and 429", statuses)
	}
	if admitted > leasedLimit {
		t.Errorf("admitted %d requests for one key, more than the global limit %d", admitted, leasedLimit)
	}
	if admitted < leasedLimit-2*16 {
		t.Errorf("admitted %d requests, fewer than the bound %d - 2 replicas × 16", admitted, leasedLimit)
	}
	if calls > 60 {
		t.Errorf("%d service calls for %d requests, want at most 60", calls, total)
	}
	if calls != delta("global_lease_requests") || delta("global_error")+delta("global_timeout") != 0 {
		t.Errorf("every call must be a lease request, and none may fail: %v", after)
	}
	if got := delta("admitted"); got != int64(admitted) {
		t.Errorf("admitted counter %d, clients saw %d", got, admitted)
	}
	for _, r := range replicas {
		r.healthy(t)
	}
}

// leaseBurst sends total requests for key from concurrent clients, alternating between the
// replicas, and counts the statuses.
func leaseBurst(t *testing.T, replicas []*replica, key string, total, clients int) map[int]int {
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; i < total; i += clients {
				status, _, _, err := replicas[i%len(replicas)].do("/leased-figure", key)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	return statuses
}
