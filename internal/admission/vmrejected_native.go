//go:build !wasip1

package admission

// vmRejectedBuckets is the memory a Gate remembers rejected buckets in: none natively, where a
// process runs the Gates of many VMs (tests, the simulator), each on a goroutine of its own.
// Tests give a Gate a memory of its own (holdRejected).
func vmRejectedBuckets() *rejectedBuckets { return nil }
