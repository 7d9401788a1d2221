package ratelimit

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// quotaLimit is the global limit per key, per hour, of the rules of quotaConfig.
const quotaLimit = 10

var quotaDescriptors = `domain: tollgate-quota
descriptors:
- key: rule
  value: direct
  descriptors:
  - key: key
    rate_limit: {unit: hour, requests_per_unit: ` + strconv.Itoa(quotaLimit) + `}
- key: rule
  value: leased
  descriptors:
  - key: key
    rate_limit: {unit: hour, requests_per_unit: ` + strconv.Itoa(quotaLimit) + `}
`

// quotaConfig: X-RateLimit headers, and a global limit far tighter than the local one, asked per
// request (/direct) or leased (/leased).
const quotaConfig = `{"rate_limit_headers": "x-ratelimit", "rules": [
  {"name": "direct", "match": {"path": {"prefix": "/direct"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100000, "refill_tokens": 100000, "refill_interval": "1s"}],
   "global": {"cluster": "ratelimit", "domain": "tollgate-quota", "timeout": "10s"}},
  {"name": "leased", "match": {"path": {"prefix": "/leased"}}, "key": [{"header": "x-api-key"}],
   "limits": [{"capacity": 100000, "refill_tokens": 100000, "refill_interval": "1s"}],
   "global": {"cluster": "ratelimit", "domain": "tollgate-quota", "timeout": "10s", "lease": {"max_tokens": 4, "ttl": "10s"}}}
]}`

// quotaSeen is what one admitted response said of the quota.
type quotaSeen struct {
	status                  int
	limit, remaining, reset string
}

// The global quota in the headers of admitted responses, against the real service: on one
// replica, each admitted request shows exactly what is left of the global limit (the service's
// count, and with a lease the service's count plus the tokens leased here) and the seconds left
// in the service's hour; then the limit rejects.
func TestGlobalQuotaInResponseHeaders(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	svc := e.startService(t, quotaDescriptors)
	r := e.startReplica(t, "replica", quotaConfig, upstream(t), svc.GrpcAddr)
	for _, path := range []string{"/direct", "/leased"} {
		t.Run(path, func(t *testing.T) {
			var seen []quotaSeen
			var began, finished time.Time
			for attempt := 0; ; attempt++ {
				key := "quota-" + strconv.Itoa(attempt)
				began = time.Now()
				seen = quotaRequests(t, r, path, key, quotaLimit+2)
				finished = time.Now()
				if hourWindow(began) == hourWindow(finished) {
					break
				}
				if attempt > 0 {
					t.Fatalf("two runs in a row spanned the turn of an hour")
				}
			}
			earliest, latest := 3600-finished.Unix()%3600, 3600-began.Unix()%3600+1
			for i, s := range seen {
				if i >= quotaLimit {
					if s.status != 429 {
						t.Errorf("request %d: %d, want 429 once the global limit is spent", i, s.status)
					}
					continue
				}
				reset, err := strconv.ParseInt(s.reset, 10, 64)
				if s.status != 200 || s.limit != strconv.Itoa(quotaLimit) || s.remaining != strconv.Itoa(quotaLimit-1-i) ||
					err != nil || reset < earliest || reset > latest {
					t.Errorf("request %d: %d, X-RateLimit limit %q remaining %q reset %q; want 200, %d, %d, from %d to %d s",
						i, s.status, s.limit, s.remaining, s.reset, quotaLimit, quotaLimit-1-i, earliest, latest)
				}
			}
		})
	}
	r.healthy(t)
}

// quotaRequests sends n requests for key one after the other and returns what each response said.
func quotaRequests(t *testing.T, r *replica, path, key string, n int) []quotaSeen {
	t.Helper()
	var seen []quotaSeen
	for i := 0; i < n; i++ {
		req, err := http.NewRequest("GET", r.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-api-key", key)
		resp, err := r.client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v\n%s", r.description, err, r.proc.output())
		}
		resp.Body.Close()
		seen = append(seen, quotaSeen{resp.StatusCode, resp.Header.Get("X-RateLimit-Limit"),
			resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("X-RateLimit-Reset")})
	}
	return seen
}
