//go:build wasip1

package admission

// vmRejected is the VM's memory of rejected buckets (rejected.go): static, so that it costs the
// VM its size and no more.
var vmRejected rejectedBuckets

// vmRejectedBuckets is the memory the VM's Gates remember rejected buckets in.
func vmRejectedBuckets() *rejectedBuckets { return &vmRejected }
