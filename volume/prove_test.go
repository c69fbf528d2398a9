package volume

import (
	"math/rand"
	"testing"
)

// TestRowBits compares the proven-rows bitmap with a plain []bool over
// random ranges, across word boundaries.
func TestRowBits(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const n = 300
	b, ref := newRowBits(n), make([]bool, n)
	for range 2000 {
		lo := rng.Int63n(n)
		hi := lo + rng.Int63n(n-lo+1)
		want := true
		for r := lo; r < hi; r++ {
			want = want && ref[r]
		}
		if got := b.all(lo, hi); got != want {
			t.Fatalf("all(%d, %d) = %v, want %v", lo, hi, got, want)
		}
		if rng.Intn(4) == 0 {
			hi = min(lo+rng.Int63n(70), n)
			b.set(lo, hi)
			for r := lo; r < hi; r++ {
				ref[r] = true
			}
		}
	}
	if !b.all(0, 0) {
		t.Fatal("an empty range must be all set")
	}
}
