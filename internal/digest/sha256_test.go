package digest

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// TestSum256IsCryptoSHA256 holds Sum256 to the standard library on every length around the
// padding's edges and on random messages.
func TestSum256IsCryptoSHA256(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 300; n++ {
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(rng.Uint32())
		}
		if got, want := Sum256(msg), sha256.Sum256(msg); got != want {
			t.Fatalf("length %d: %x, want %x", n, got, want)
		}
	}
	// FIPS 180-4's example "abc".
	want := "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := Sum256([]byte("abc")); hexOf(got[:]) != want {
		t.Errorf("abc: %x", got)
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func TestEqual(t *testing.T) {
	a, b := Sum256([]byte("x")), Sum256([]byte("x"))
	if !Equal(&a, &b) {
		t.Error("equal digests compare unequal")
	}
	for i := range b {
		c := b
		c[i] ^= 1
		if Equal(&a, &c) {
			t.Errorf("digests differing in byte %d compare equal", i)
		}
	}
}
