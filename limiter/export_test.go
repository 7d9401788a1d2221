package limiter

// The bucket's units and its level arithmetic, for the tests that check them against the
// package documentation and against big integers.

func (b *Bucket) CreditsPerToken() int64 { return b.creditsPerToken }
func (b *Bucket) CreditsPerNano() int64  { return b.creditsPerNano }

func (b *Bucket) AddLevel(s BucketState, tokens, credits int64) BucketState {
	return b.addLevel(s, tokens, credits)
}

func (b *Bucket) Narrow() bool { return b.narrow() }

// ClampOwing is the state a bucket that reserves reads s as.
func ClampOwing(b Bucket, s BucketState) BucketState { return b.clampOwing(s) }
