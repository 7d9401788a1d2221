package simulate

import (
	"context"
	"fmt"
	"testing"
)

// --suggest fits a token bucket (its shape kept) and a fixed window to 100 keys sending 1 to 10
// requests at once, ten keys each: at most 10 % of the keys may be limited, the keys the first
// replay limited most (the ten sending 10, for the rule that limited them) left out, so the
// limits fit 9 requests; replayed, they limit one request of each key sending 10.
func TestSuggestFitsTheLimitsToTheLog(t *testing.T) {
	t.Parallel()
	var requests []logRequest
	for i := range 100 {
		requests = append(requests, repeat(i%10+1, "/", fmt.Sprintf("key-%02d", i))...)
	}
	path := writeEnvoyLog(t, requests)
	log, err := Open(path, EnvoyJSON)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	const config = `{"rules": [
	  {"name": "bucket", "key": [{"header": "x-api-key"}], "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]},
	  {"name": "window", "key": [{"header": "x-api-key"}], "limits": [{"algorithm": "fixed_window", "capacity": 2, "window": "1m"},
	                                                                   {"algorithm": "concurrency", "max_in_flight": 5}]}]}`
	results, err := Run(context.Background(), log, RunOptions{Wasm: module(t), Seed: 1, Cache: testCache, SuggestPercent: 10,
		Configs: []ConfigFile{{Name: "config.json", Data: []byte(config)}}})
	if err != nil {
		t.Fatal(err)
	}
	sug := Summarize(log, false, results).Suggestion
	if sug == nil {
		t.Fatal("no suggestion")
	}
	tests := []struct {
		rule                 string
		excluded             int
		limits               string
		limited, keysLimited int64
	}{
		// The module counts these requests limited by the window rule, not the bucket rule.
		{"bucket", 0, "[9 requests at once, then 5 per second] ", 0, 0},
		{"window", 10, "[9 requests per 1-minute window (fixed windows, one after the other)] [5 requests in flight at once] only token buckets and fixed or sliding windows are fitted", 10, 10},
	}
	for _, tt := range tests {
		rs, rr := sug.Rules[tt.rule], sug.Result.Rules[tt.rule]
		var limits string
		for _, l := range rs.Limits {
			limits += "[" + l.Text + "] "
		}
		limits += rs.Limits[len(rs.Limits)-1].Kept
		if rs.KeysExcluded != tt.excluded || limits != tt.limits || rr.Limited != tt.limited || int64(rr.KeysLimited) != tt.keysLimited {
			t.Errorf("rule %s: %d keys left out, limits %q, replayed %d limited from %d keys; want %d, %q, %d, %d",
				tt.rule, rs.KeysExcluded, limits, rr.Limited, rr.KeysLimited, tt.excluded, tt.limits, tt.limited, tt.keysLimited)
		}
	}
}
