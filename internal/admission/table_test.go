package admission

import (
	"strconv"
	"testing"
	"time"
)

func tableGate(t *testing.T, whenFull string) *Gate {
	return mustGate(t, `{"key_table": {"max_keys": 16, "when_full": "`+whenFull+`"},
	  "rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
}

// keysSharingASlot returns n partition keys whose buckets all fall in one slot.
func keysSharingASlot(g *Gate, n int) []string {
	l := &g.rules[0].limits[0]
	bySlot := map[uint64][]string{}
	for i := 0; ; i++ {
		value := "key-" + strconv.Itoa(i)
		part := strconv.Itoa(len(value)) + ":" + value
		slot := g.owner(l, []byte(part)) % uint64(g.table.MaxKeys)
		bySlot[slot] = append(bySlot[slot], value)
		if len(bySlot[slot]) == n {
			return bySlot[slot]
		}
	}
}

func TestKeyTableIsBounded(t *testing.T) {
	g := tableGate(t, "reject")
	store := newMemStore()
	if err := g.LoadSecret(store, func() uint64 { return 42 }); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10_000; i++ {
		g.Admit(header("k", "flood-"+strconv.Itoa(i)), store, sec+int64(i))
	}
	if n := len(store.values); n > 16+1 {
		t.Fatalf("%d shared-data keys for a table of 16 slots and the secret", n)
	}
}

func TestWhenFullPolicies(t *testing.T) {
	for _, c := range []struct {
		policy      string
		second      Verdict
		secondRetry time.Duration
		third       Verdict // the first key's second request: its bucket had 2 tokens
	}{
		// The slot holds the first key's bucket until it is full again: 1 s after its one take.
		{"reject", Limited, time.Second, Allow},
		// Both keys draw from the first key's bucket, which is empty now.
		{"share", Allow, 0, Limited},
		// The second key goes through uncounted.
		{"allow", Allow, 0, Allow},
	} {
		t.Run(c.policy, func(t *testing.T) {
			g := tableGate(t, c.policy)
			keys := keysSharingASlot(g, 2)
			store := newMemStore()
			if out := g.Admit(header("k", keys[0]), store, sec); out.Verdict != Allow {
				t.Fatalf("first key: %+v", out)
			}
			out := g.Admit(header("k", keys[1]), store, sec)
			if out.Verdict != c.second || out.RetryAfter != c.secondRetry || out.TableFull != 1 {
				t.Fatalf("second key: %+v", out)
			}
			out = g.Admit(header("k", keys[0]), store, sec)
			if out.Verdict != c.third || out.Limits[0].Remaining != 0 {
				t.Fatalf("first key again: %+v", out)
			}
		})
	}
}

// A slot whose bucket is idle (full again) goes to another key; its old owner, coming back,
// starts with the full bucket it would have had anyway.
func TestIdleSlotIsTakenOver(t *testing.T) {
	g := tableGate(t, "reject")
	keys := keysSharingASlot(g, 2)
	store := newMemStore()
	runSteps(t, g, store, []step{
		{"a takes one", 0, header("k", keys[0]), Allow, -1, 0},
		{"b: a's bucket is not full yet", 500 * int64(time.Millisecond), header("k", keys[1]), Limited, 0, 500 * time.Millisecond},
		{"b: full again, taken over", sec, header("k", keys[1]), Allow, -1, 0},
		{"b", sec, header("k", keys[1]), Allow, -1, 0},
		{"a: b's bucket is empty", sec, header("k", keys[0]), Limited, 0, 2 * time.Second},
	})
}

func TestLongKeysCountAsMissing(t *testing.T) {
	g := mustGate(t, `{"key_table": {"max_key_bytes": 16},
	  "rules": [{"name": "r", "key": [{"header": "k"}], "limits": [{"capacity": 2, "refill_tokens": 1, "refill_interval": "1s"}]}]}`)
	out := g.Admit(header("k", "0123456789abcdef"), newMemStore(), sec)
	if out.Verdict != MissingKey || out.MissingPart != "key of at most 16 bytes" {
		t.Fatalf("%+v", out)
	}
	if out := g.Admit(header("k", "0123456789a"), newMemStore(), sec); out.Verdict != Allow {
		t.Fatalf("a key within the limit: %+v", out)
	}
}

func TestSecretIsSharedAndStable(t *testing.T) {
	store := newMemStore()
	a, b := tableGate(t, "reject"), tableGate(t, "reject")
	if err := a.LoadSecret(store, func() uint64 { return 1 }); err != nil {
		t.Fatal(err)
	}
	if err := b.LoadSecret(store, func() uint64 { return 2 }); err != nil {
		t.Fatal(err)
	}
	if a.secret != b.secret || a.secret != [2]uint64{1, 1} {
		t.Fatalf("secrets %v and %v: the second VM must read the first one's", a.secret, b.secret)
	}
}
