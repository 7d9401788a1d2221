package admission

// GlobalCheck is one rule of an admitted request whose global limit must still be asked: the
// rate limit service decides it for every replica.
type GlobalCheck struct {
	// Rule is the rule's index in the configuration.
	Rule int
	// Key identifies the partition key to the service without revealing it (GlobalKey).
	Key string
	// Cost is what the request costs the rule's limits, sent as hits_addend; never 0 (a request
	// that costs nothing is not sent).
	Cost int64
}

// appendGlobalChecks appends the global checks of an admitted request's enforced limits: one per
// rule with a global limit, for a request that costs something.
func appendGlobalChecks(dst []GlobalCheck, enforced []applied) []GlobalCheck {
	for i := range enforced {
		a := &enforced[i]
		if i > 0 && enforced[i-1].rule == a.rule {
			continue // one check per rule, not per limit
		}
		if !a.rule.global || a.cost == 0 {
			continue
		}
		dst = append(dst, GlobalCheck{Rule: a.rule.index, Key: a.globalKey, Cost: a.cost})
	}
	return dst
}

// Charge is what an admitted request took from its enforced rate limits (concurrency slots are
// Leases, released by Release), kept so that it can be
// given back if the request is rejected after all (by a global limit, or when the request goes
// away before the service answers): all or nothing, as for several local limits.
type Charge struct {
	entries []charged
	at      int64 // when it was taken
}

type charged struct {
	limit *limit
	slot  uint64
	owner uint64
	cost  int64
	next  cells
}

// charge is what a's write took from its limit, kept to give back.
func (a *applied) charge() charged {
	return charged{limit: a.limit, slot: a.slot, owner: a.writeOwner, cost: a.cost, next: a.next}
}

// undo is the limit to refund that gives c back.
func (c *charged) undo() applied {
	return applied{limit: c.limit, slot: c.slot, writeOwner: c.owner, cost: c.cost, next: c.next}
}

// Empty reports whether the charge took nothing.
func (c Charge) Empty() bool { return len(c.entries) == 0 }

// appendCharged appends what an admitted request's enforced limits were charged.
func appendCharged(dst []charged, enforced []applied) []charged {
	for i := range enforced {
		a := &enforced[i]
		if a.skip || a.cost == 0 || a.limit.isConcurrency() {
			continue // a concurrency slot is a Lease, released by Release
		}
		dst = append(dst, a.charge())
	}
	return dst
}

// Charge returns what the request was charged (nothing unless the verdict is Allow). It is a
// copy: it stays valid across later decisions of the Gate, for as long as the request is held.
func (o *Outcome) Charge() Charge {
	if o.Verdict != Allow {
		return Charge{}
	}
	entries := appendCharged(nil, o.enforced)
	if len(entries) == 0 {
		return Charge{}
	}
	return Charge{entries: entries, at: o.decidedAt}
}

// GiveBack returns a charge to the limits it was taken from, at now (monotonic nanoseconds).
// What a late refund is worth depends on the algorithm: a token bucket gets the tokens back, up
// to its capacity; a window uncounts them only while the window they were counted in lasts (in
// the next one they would be taken off what that window counted). It is best effort, as when a
// write fails: a slot that holds another bucket by now is left alone, and if shared data fails
// the charge stands, which errs towards admitting less.
func (g *Gate) GiveBack(store Store, c Charge, now int64) {
	g.wallRead = false // a calendar window's refund reads the wall clock of now
	group := make([]applied, 0, len(c.entries))
	for _, e := range c.entries {
		if w := windowLength(e.limit.algo); w > 0 && floorDiv(c.at, w) != floorDiv(now, w) {
			continue
		}
		group = append(group, e.undo())
	}
	if len(group) > 0 {
		g.refund(store, group, now)
	}
}

// windowLength is the window of a window algorithm in nanoseconds, 0 for a token bucket.
func windowLength(a algorithm) int64 {
	if w, ok := a.(window); ok {
		return int64(w.limit.Window)
	}
	return 0
}

// floorDiv is ⌊a/b⌋ for b > 0: the index of the window holding a, as windows are aligned.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// Fixed SipHash keys of GlobalKey. They are not secret: every replica, and every version of
// Tollgate, must compute the same value for a key, or the service would count one client under
// several names. Changing them would reset every client's global count.
const (
	globalKeyK0, globalKeyK1 = 0x74_6f_6c_6c_67_61_74_65, 0x67_6c_6f_62_61_6c_2f_31 // "tollgate", "global/1"
	globalKeyK2, globalKeyK3 = 0x6b_65_79_20_68_61_73_68, 0x20_68_69_67_68_20_36_34 // "key hash", " high 64"
)

// GlobalKey is the value of the key entry sent to the rate limit service for a rule's partition
// key: 32 hexadecimal digits of a 128-bit hash (two SipHash-2-4 under fixed keys) of the rule
// name and the key. It is the same in every replica, so the service counts a client once
// however many proxies it goes through, and keeps raw keys (API keys, user ids) out of the
// service, its logs and Redis. It hides keys from casual view only: whoever can guess a key
// can compute its hash, so keys from a small space (addresses) can be recovered by trying
// them all.
func GlobalKey(rule, key string) string { return globalKey(rule, []byte(key)) }

func globalKey(rule string, key []byte) string {
	buf := make([]byte, 0, 4+len(rule)+len(key))
	buf = append(buf, "gk\x00"...)
	buf = append(buf, rule...)
	buf = append(buf, 0)
	buf = append(buf, key...)
	low, high := sipHash24(globalKeyK0, globalKeyK1, buf), sipHash24(globalKeyK2, globalKeyK3, buf)
	// The 16 bytes high, low (big-endian) in lower-case hexadecimal, as encoding/hex writes them;
	// encoding/hex itself would link fmt, os and their package initialisation into the module.
	const digits = "0123456789abcdef"
	text := make([]byte, 0, 32)
	for _, h := range [2]uint64{high, low} {
		for shift := 60; shift >= 0; shift -= 4 {
			text = append(text, digits[h>>uint(shift)&0xf])
		}
	}
	return string(text)
}
