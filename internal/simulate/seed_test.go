package simulate

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The seed decides the module's randomness: two hosts with one seed give the module the same
// key-table secret (so the same keys share slots on every run), another seed another secret.
func TestSeedFixesTheModulesSecret(t *testing.T) {
	ctx := context.Background()
	secret := func(seed uint64) []byte {
		s, err := New(ctx, Options{Wasm: module(t), Config: []byte(exactConfig), ConfigName: "exact.json",
			Start: logStart.UnixNano(), Keys: &KeyNamer{Show: true}, Seed: seed, Cache: testCache})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		for key, value := range s.host.SharedData().Entries(pluginName) {
			if strings.HasSuffix(key, "/secret") {
				return value
			}
		}
		t.Fatalf("no secret in shared data: %v", s.host.SharedData().Entries(pluginName))
		return nil
	}
	a, b, c := secret(1), secret(1), secret(2)
	if !bytes.Equal(a, b) {
		t.Errorf("seed 1 gave two secrets: %x and %x", a, b)
	}
	if bytes.Equal(a, c) {
		t.Errorf("seeds 1 and 2 gave the same secret %x", a)
	}
}
