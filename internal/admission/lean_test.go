package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// AdmitLean, given the key header as a caller read it, answers as Admit, which reads it through
// the Request: two gates of one policy, each with its own store, run the same steps at fixed
// instants, one by Admit and one by AdmitLean, and must give the same verdicts, Retry-After and
// stored rows, AdmitLean without reading the header again. The steps cover each of the lean path's ends: a new key, a known one, a rejection
// from shared data and then from the VM's memory, a missing and an empty key (refused), a key too
// long for the lean path (the general way), and the refill admitting again.
func TestAdmitLeanAnswersAsAdmit(t *testing.T) {
	long := strings.Repeat("k", fastKeyBytes+1)
	steps := []struct {
		at    time.Duration
		key   string
		found bool
		want  string
	}{
		{0, "alice", true, "allow"},
		{0, "alice", true, "allow"},
		{0, "alice", true, "limited 1s"},
		{400 * time.Millisecond, "alice", true, "limited 600ms"},
		{0, "", false, "missing_key"},
		{0, "", true, "missing_key"},
		{0, long, true, "allow"},
		{0, "bob", true, "allow"},
		{time.Second, "alice", true, "allow"},
		{time.Second, "alice", true, "limited 1s"},
	}
	policy := mustGate(t, perKey).Policy
	setCollectStatus(policy, false)
	byAdmit, byLean := ownMemory(NewGate(policy)), ownMemory(NewGate(policy))
	if got := byLean.LeanKeyHeader(); got != "x-api-key" {
		t.Fatalf("LeanKeyHeader %q, want x-api-key", got)
	}
	admitStore, leanStore := newMemStore(), newMemStore()
	answer := func(out *Outcome) string {
		switch out.Verdict {
		case Limited:
			return fmt.Sprintf("limited %v", out.RetryAfter)
		case MissingKey:
			return "missing_key"
		case Allow:
			return "allow"
		}
		return fmt.Sprintf("verdict %d", out.Verdict)
	}
	for i, s := range steps {
		reads := 0
		req := countingRequest{fakeRequest{headers: map[string]string{}, source: "192.0.2.1:5000"}, &reads}
		if s.found {
			req.headers["x-api-key"] = s.key
		}
		now := 1000*sec + int64(s.at)
		lean := answer(byLean.AdmitLean(req, s.key, s.found, leanStore, now))
		leanReads := reads
		got := answer(byAdmit.Admit(req, admitStore, now))
		if got != s.want || lean != s.want {
			t.Errorf("step %d (%q at %v): Admit %s, AdmitLean %s; want %s", i, s.key, s.at, got, lean, s.want)
		}
		// The header is the caller's to read: AdmitLean reads it from nothing else, Admit once.
		if leanReads != 0 || reads != 1 {
			t.Errorf("step %d (%q at %v): AdmitLean read the request's headers %d times, Admit %d; want 0 and 1",
				i, s.key, s.at, leanReads, reads-leanReads)
		}
	}
	if a, l := fmt.Sprint(admitStore.data.Entries(testVMID)), fmt.Sprint(leanStore.data.Entries(testVMID)); a != l {
		t.Errorf("stored by Admit:\n%s\nby AdmitLean:\n%s", a, l)
	}
}

// A policy without the lean shape (here, rate-limit headers) has no lean outcomes or key header,
// and AdmitLean decides it the general way, reading the request, whatever value it is given: a
// value of its own for each request would admit all three.
func TestAdmitLeanWithoutTheLeanShape(t *testing.T) {
	g := ownMemory(mustGate(t, perKey)) // mustGate turns the limits' statuses on
	if g.LeanKeyHeader() != "" || g.LeanAdmission() != nil || g.LeanRejection() != nil {
		t.Fatalf("lean key header %q, admission %v, rejection %v; want none", g.LeanKeyHeader(), g.LeanAdmission(), g.LeanRejection())
	}
	store := newMemStore()
	for i, want := range []Verdict{Allow, Allow, Limited} {
		out := g.AdmitLean(header("x-api-key", "alice"), fmt.Sprint("value", i), true, store, 1000*sec)
		if out.Verdict != want || len(out.Limits) != 1 {
			t.Fatalf("request %d: %v with %d limits described, want %v with 1", i, out.Verdict, len(out.Limits), want)
		}
	}
}
