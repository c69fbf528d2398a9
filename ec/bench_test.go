package ec

import (
	"fmt"
	"testing"
)

// benchGeometries are the layouts benchmarked; k4m2 is the default layout.
var benchGeometries = [][2]int{{4, 2}, {8, 3}, {16, 4}}

// BenchmarkEncode encodes one stripe of 128 KiB chunks (the default chunk).
// Throughput counts data bytes (k x chunk). "-purego" variants run the
// pure-Go kernels for comparison.
func BenchmarkEncode(b *testing.B) {
	for _, g := range benchGeometries {
		for _, v := range []struct {
			suffix string
			opts   []Option
		}{{"", nil}, {"-purego", []Option{WithSIMD(false)}}} {
			b.Run(fmt.Sprintf("k%dm%d/128KiB%s", g[0], g[1], v.suffix), func(b *testing.B) {
				benchEncode(b, g[0], g[1], 128<<10, v.opts...)
			})
		}
	}
}

func benchEncode(b *testing.B, k, m, size int, opts ...Option) {
	c := mustNew(b, k, m, opts...)
	shards := randomStripe(newRNG(1), k, m, size)
	b.SetBytes(int64(k * size))
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Encode(shards); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReconstruct rebuilds the first `missing` data shards of a stripe
// of 128 KiB chunks in place (the degraded-read path). Throughput counts
// data bytes (k x chunk).
func BenchmarkReconstruct(b *testing.B) {
	for _, g := range benchGeometries {
		for _, missing := range []int{1, g[1]} {
			b.Run(fmt.Sprintf("k%dm%d/128KiB-missing%d", g[0], g[1], missing), func(b *testing.B) {
				benchReconstruct(b, g[0], g[1], 128<<10, missing)
			})
			if missing == g[1] {
				break
			}
		}
	}
}

func benchReconstruct(b *testing.B, k, m, size, missing int) {
	c := mustNew(b, k, m)
	shards := encodedStripe(b, c, newRNG(2), size)
	want := make([]bool, k+m)
	for i := range missing {
		want[i] = true
	}
	work := make([][]byte, k+m)
	b.SetBytes(int64(k * size))
	b.ReportAllocs()
	for b.Loop() {
		copy(work, shards)
		for i := range missing {
			work[i] = shards[i][:0]
		}
		if err := c.ReconstructRange(work, want); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateParity applies a 4 KiB delta update to one data shard (the
// read-modify-write path of a 4 KiB write). Throughput counts the 4 KiB of
// new data.
func BenchmarkUpdateParity(b *testing.B) {
	for _, g := range benchGeometries {
		b.Run(fmt.Sprintf("k%dm%d/4KiB", g[0], g[1]), func(b *testing.B) {
			k, m, size := g[0], g[1], 4096
			c := mustNew(b, k, m)
			rng := newRNG(3)
			shards := randomStripe(rng, k, m, size)
			oldData, newData := make([][]byte, k), make([][]byte, k)
			oldData[0], newData[0] = shards[0], make([]byte, size)
			fill(rng, newData[0])
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.UpdateParity(oldData, newData, shards[k:]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
