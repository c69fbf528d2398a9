package blockdev

import (
	"bytes"
	"math/rand"
	"testing"
)

// TestCopyCold checks copyCold against copy() over sizes around the
// threshold and every destination alignment, including the bytes around the
// destination range (which must not change).
func TestCopyCold(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	src := make([]byte, 300<<10)
	rng.Read(src)
	sizes := []int{0, 1, 63, coldCopyMin - 1, coldCopyMin, coldCopyMin + 1, coldCopyMin + 63, 128 << 10, 200<<10 + 17}
	for _, n := range sizes {
		for align := 0; align < 33; align++ {
			for _, srcOff := range []int{0, 1, 9} {
				dst := make([]byte, n+64)
				want := make([]byte, n+64)
				for i := range dst {
					dst[i], want[i] = 0xee, 0xee
				}
				got := copyCold(dst[align:align+n], src[srcOff:srcOff+n])
				copy(want[align:align+n], src[srcOff:srcOff+n])
				if got != n || !bytes.Equal(dst, want) {
					t.Fatalf("n %d align %d srcOff %d: copied %d, contents differ", n, align, srcOff, got)
				}
			}
		}
	}
	// A shorter source bounds the copy, as with copy().
	dst := make([]byte, 128<<10)
	if got := copyCold(dst, src[:coldCopyMin+5]); got != coldCopyMin+5 || !bytes.Equal(dst[:got], src[:got]) || dst[got] != 0 {
		t.Fatalf("short source: copied %d", got)
	}
}

// BenchmarkCopyCold compares copy() and copyCold for 128 KiB pieces (a
// volume's chunk) into a 256 MiB area that does not fit in cache, as a Mem's
// pages do not.
func BenchmarkCopyCold(b *testing.B) {
	for _, c := range []struct {
		name string
		fn   func(dst, src []byte) int
	}{{"copy", func(d, s []byte) int { return copy(d, s) }}, {"cold", copyCold}} {
		b.Run(c.name, func(b *testing.B) {
			const piece = 128 << 10
			src := make([]byte, piece)
			dst := make([]byte, 256<<20)
			b.SetBytes(piece)
			for i := 0; b.Loop(); i++ {
				off := (i * piece) % len(dst)
				c.fn(dst[off:off+piece], src)
			}
		})
	}
}
