package admission

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// secretSize is the length of the stored hash secret: "TGk1" and two 64-bit words.
const secretSize = 20

// LoadSecret reads the hash secret every VM of the plugin shares, or stores a new one drawn
// from random if there is none yet. Call it before the first Admit, outside the request path
// (Envoy allows shared data from proxy_on_configure on). A value under the secret's key that is
// not a secret is an error, never overwritten: running VMs may still hash with the old secret,
// and a second one would give every key a second bucket.
func (p *Policy) LoadSecret(store Store, random func() uint64) error {
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		value, _, err := store.Get(p.secretKey)
		switch {
		case err == nil && len(value) == secretSize && string(value[:4]) == "TGk1":
			p.secret = [2]uint64{binary.LittleEndian.Uint64(value[4:]), binary.LittleEndian.Uint64(value[12:])}
			return nil
		case err == nil:
			return errors.New("the shared-data key " + p.secretKey + " holds a value Tollgate did not write " +
				"(another plugin with the same name and vm_id?): give this plugin another name")
		case !isNotFound(err):
			return err
		}
		// Absent: propose one. Another VM may store its own first; then this write fails the
		// CAS and the loop reads the winner's.
		var fresh [secretSize]byte
		copy(fresh[:], "TGk1")
		binary.LittleEndian.PutUint64(fresh[4:], random())
		binary.LittleEndian.PutUint64(fresh[12:], random())
		if err := store.Set(p.secretKey, fresh[:], CasCreate); err != nil && !isCasMismatch(err) {
			return err
		}
	}
	return errContended
}

// owner is the keyed hash that names a bucket: the rule, the limit and the partition key. Each
// limit hashes in a buffer of its own that keeps its prefix, so only the key is copied.
func (g *Gate) owner(l *limit, partitionKey []byte) uint64 {
	buf := g.ownerBufs[l.seq]
	buf = append(buf[:len(l.ownerPrefix)], partitionKey...)
	g.ownerBufs[l.seq] = buf
	return sipHash24(g.secret[0], g.secret[1], buf)
}

// sipHash24 is SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012)
// of msg under the key (k0, k1).
func sipHash24(k0, k1 uint64, msg []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n, i := len(msg), 0
	for ; n-i >= 8; i += 8 {
		m := binary.LittleEndian.Uint64(msg[i:])
		v3 ^= m
		round()
		round()
		v0 ^= m
	}
	// The last block: the r bytes left, then the length in the top byte. A message of 8 bytes
	// or more (every owner's but the shortest) has them at the top of its last 8, read as one
	// number; a shorter one is read a byte at a time, in a loop whose every turn, in upstream
	// Go's Wasm, goes through the function's dispatch loop.
	last := uint64(n) << 56
	if r := n - i; r > 0 && n >= 8 {
		last |= binary.LittleEndian.Uint64(msg[n-8:]) >> (64 - 8*r)
	} else {
		for j, b := range msg[i:] {
			last |= uint64(b) << (8 * j)
		}
	}
	v3 ^= last
	round()
	round()
	v0 ^= last
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

// KeyedHash is the keyed hash that names buckets, SipHash-2-4 of msg under the key (k0, k1),
// for the benchmarks' direct-decision probe (bench/testdata/direct), which hashes as Tollgate does.
func KeyedHash(k0, k1 uint64, msg []byte) uint64 { return sipHash24(k0, k1, msg) }
