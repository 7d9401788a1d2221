package hostcore

import (
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/wire"
)

func TestGrpcCallIDs(t *testing.T) {
	var ids GrpcCallIDs
	for _, want := range []uint32{5, 9, 13} {
		if got := ids.Next(); got != want {
			t.Fatalf("id %d, want %d", got, want)
		}
	}
	// Wrapping keeps the call bits: the id past 0xfffffffd is 1; a counter that lost them
	// starts again at 5.
	for last, want := range map[uint32]uint32{^uint32(0) - 2: 1, ^uint32(0): 5} {
		ids.last = last
		if got := ids.Next(); got != want {
			t.Fatalf("after %#x: %d, want %d", last, got, want)
		}
	}
	for token, want := range map[uint32]struct {
		st     wire.Status
		isCall bool
	}{5: {wire.StatusOK, true}, 6: {wire.StatusNotFound, false}, 4: {wire.StatusBadArgument, false}, 7: {wire.StatusBadArgument, false}} {
		if st, isCall := CancelStatus(token); st != want.st || isCall != want.isCall {
			t.Errorf("CancelStatus(%d) = %d, %v; want %d, %v", token, st, isCall, want.st, want.isCall)
		}
	}
}
