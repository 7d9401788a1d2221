package admission

import (
	"testing"
	"time"
)

// A request served from the lease learns how much of the global quota is left, for its
// response's headers: what the service said was left at the last grant plus the tokens still
// unspent here, no more than the quota, and nothing when the service named no limit or its
// window is over.
func TestLeaseServedEstimatesTheGlobalQuotaLeft(t *testing.T) {
	hour := time.Hour
	tests := []struct {
		name      string
		grant     LeaseGrant
		takeAt    int64 // ms after the grant was put
		wantLeft  int64
		wantReset time.Duration
	}{
		{"service's remaining plus the pool", LeaseGrant{Tokens: 5, Asked: 6, UntilReset: hour, Remaining: 40, Quota: 100, Unit: 3},
			10, 40 + 4, hour - 11*time.Millisecond},
		{"no more than the quota", LeaseGrant{Tokens: 5, Asked: 6, UntilReset: hour, Remaining: 99, Quota: 100, Unit: 3},
			0, 100, hour - time.Millisecond},
		{"no limit named", LeaseGrant{Tokens: 5, Asked: 6, UntilReset: hour, Remaining: -1}, 0, -1, 0},
		{"no window known", LeaseGrant{Tokens: 5, Asked: 6, Remaining: 40, Quota: 100, Unit: 3}, 0, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _, store := leaseGates(t, 100)
			now := sec
			tt.grant.SentAt = now - ms
			if _, err := a.PutLease(store, 0, "key", tt.grant, now); err != nil {
				t.Fatal(err)
			}
			take, err := a.TakeLease(store, 0, "key", 1, now+tt.takeAt*ms)
			if err != nil || take.Verdict != LeaseServed {
				t.Fatalf("take: %+v, %v", take, err)
			}
			if take.Left != tt.wantLeft || take.UntilReset != tt.wantReset {
				t.Fatalf("left %d, until reset %v; want %d, %v", take.Left, take.UntilReset, tt.wantLeft, tt.wantReset)
			}
			if tt.wantLeft >= 0 && (take.Quota != tt.grant.Quota || take.Unit != tt.grant.Unit) {
				t.Fatalf("quota %d unit %d, want %d %d", take.Quota, take.Unit, tt.grant.Quota, tt.grant.Unit)
			}
		})
	}
}
