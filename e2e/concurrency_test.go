package e2e

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// With the clock frozen no token refills, so however the four workers interleave, exactly the
// bucket's capacity is admitted: every admission is a successful CAS on the one shared value.
func TestFourWorkersAdmitExactlyCapacity(t *testing.T) {
	t.Parallel()
	const (
		workers  = 4
		requests = 1000
		capacity = 100
	)
	config := `{"rules": [{"name": "hot", "key": [{"header": "x-api-key"}],
	  "limits": [{"capacity": ` + strconv.Itoa(capacity) + `, "refill_tokens": 1, "refill_interval": "1s"}]}]}`
	for _, p := range profiles {
		t.Run(p.String(), func(t *testing.T) {
			g := newRig(t, p, config, workers)
			var admitted, limited atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, vm := range g.vms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := 0; i < requests/workers; i++ {
						switch status := g.request(vm, [2]string{"x-api-key", "shared"}).Status; status {
						case 200:
							admitted.Add(1)
						case 429:
							limited.Add(1)
						default:
							t.Errorf("unexpected status %d", status)
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			if admitted.Load() != capacity || limited.Load() != requests-capacity {
				t.Fatalf("admitted %d, limited %d; want %d and %d", admitted.Load(), limited.Load(), capacity, requests-capacity)
			}
			for name, want := range map[string]int64{"tollgate.rule.hot.admitted": capacity, "tollgate.rule.hot.limited": requests - capacity} {
				if got := g.counter(name); got != want {
					t.Errorf("metric %s = %d, want %d", name, got, want)
				}
			}
			if n := g.host.SharedData().Keys("tollgate"); n != 2 {
				t.Errorf("shared data holds %d keys, want 2: the key table's secret and the one bucket's slot", n)
			}
		})
	}
}
