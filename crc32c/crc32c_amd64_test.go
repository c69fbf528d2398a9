package crc32c

import (
	"math/bits"
	"testing"
)

// xnmod returns x^n mod P, bit-reflected (the coefficient of x^31 in bit 0).
func xnmod(n int) uint32 {
	const poly = 0x1EDC6F41 // CRC-32C without its x^32 term, x^31 in bit 31
	r := uint32(1)
	for ; n > 0; n-- {
		carry := r>>31 == 1
		r <<= 1
		if carry {
			r ^= poly
		}
	}
	return bits.Reverse32(r)
}

// TestKeys derives the folding constants from the polynomial.
func TestKeys(t *testing.T) {
	for i, d := range []int{2048, 1536, 1024, 512, 384, 256, 128} {
		if lo, hi := uint64(xnmod(d+31)), uint64(xnmod(d-33)); keys[2*i] != lo || keys[2*i+1] != hi {
			t.Errorf("fold over %d bits: keys %#x %#x, want %#x %#x", d, keys[2*i], keys[2*i+1], lo, hi)
		}
	}
	if keys[14] != 0 || keys[15] != 0 {
		t.Errorf("last lane's keys %#x %#x, want zero", keys[14], keys[15])
	}
}
