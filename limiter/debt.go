package limiter

// Debts. A caller that learns a request's true cost only after admitting it (the tokens a
// response reports it used) admits it for an estimate and settles later: Owe takes the rest
// whatever the level, so the bucket may go below zero, and UndoOwing gives back what was taken
// beyond the true cost. A bucket in debt admits nothing until the refill has repaid the debt and
// brought the level up to a request's cost; Reserve with a maxWait of 0 decides on it, with the
// exact RetryAfter. The debt is bounded by the caller (maxDebt), so a bucket can never be locked
// for longer than the refill of maxDebt + Capacity tokens.

// Owe refills s to now and takes n more tokens (n < 1 takes nothing) even if they are not there:
// the whole tokens may go below zero, down to -maxDebt (maxDebt >= 0, at most 2^62), and what
// would go beyond is forgiven. A now behind s.Last is read as s.Last, as in Take.
func (b *Bucket) Owe(s BucketState, now, n, maxDebt int64) BucketState {
	s = b.refillOwing(s, now)
	if n < 1 || b.creditsPerNano == 0 {
		return s
	}
	floor := -min(max(maxDebt, 0), maxDebtTokens)
	if s.Tokens-floor < n { // s.Tokens >= floor, so s.Tokens - floor cannot overflow
		s.Tokens, s.Credits = floor, 0
		return s
	}
	s.Tokens -= n
	return s
}

// UndoOwing is Undo for a bucket that may owe (Owe, Reserve): s and written may be in debt.
func (b *Bucket) UndoOwing(s, written BucketState, now, n int64) BucketState {
	return b.undo(s, written, now, n, true)
}
