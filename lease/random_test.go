package lease_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

// NewID gives 128 random bits in hex, a fresh value each time; Random
// fills a buffer of any size (getrandom(2) may return less than asked
// for above 32 MiB, and Random asks again), and so does its fallback.
func TestNewIDAndRandom(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := lease.NewID()
		if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
			t.Fatalf("NewID() = %q: want 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("NewID() gave %q twice", id)
		}
		seen[id] = true
	}
	for name, fill := range map[string]func([]byte){"Random": lease.Random, "its /dev/urandom fallback": lease.URandom} {
		for _, n := range []int{0, 1, 16, 4096, 33 << 20} {
			b := make([]byte, n)
			fill(b)
			if n >= 16 && bytes.Count(b, []byte{0}) > n/64+8 {
				t.Errorf("%s(%d bytes) left %d zero bytes: not filled", name, n, bytes.Count(b, []byte{0}))
			}
		}
	}
}
