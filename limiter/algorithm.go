package limiter

// Algorithm is what the three limiters have in common, for a caller that keeps per-key states
// of type S (BucketState for Bucket, WindowState for FixedWindow and SlidingWindow) and decides
// on them without depending on which algorithm it holds.
type Algorithm[S any] interface {
	// Initial is the state of a key never seen, as of now: a full bucket, an empty window.
	Initial(now int64) S
	// Take brings s to now and tries to take n units (n < 1 counts as 1). A rejected request
	// takes nothing, but the returned state is still brought to now.
	Take(s S, now int64, n int64) (S, Decision)
	// Give brings s to now and returns n units (n < 1 counts as 1): it undoes a Take that
	// another limit overruled.
	Give(s S, now int64, n int64) S
	// Valid reports whether s is in range for this limiter, as a state it stored would be.
	Valid(s S) bool
	// Fingerprint is a stable hash of the algorithm and its numbers: a stored state is only
	// reused by a limiter with the same fingerprint; otherwise start again from Initial.
	Fingerprint() uint32
}

var (
	_ Algorithm[BucketState] = (*Bucket)(nil)
	_ Algorithm[WindowState] = FixedWindow{}
	_ Algorithm[WindowState] = SlidingWindow{}
)
