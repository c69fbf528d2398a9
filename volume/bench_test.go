package volume

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

const benchReq = 1 << 20

// benchVolume is a 4+2 volume with 128 KiB chunks over in-memory namespaces,
// filled with data.
func benchVolume(b *testing.B) (*Volume, []*blockdev.Mem) {
	g := layout.Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 16 << 20}
	size := 4 * g.SegmentData() // 256 MiB
	dm := DeviceMap{}
	slots := map[string]int64{}
	var mems []*blockdev.Mem
	for i := 0; i < g.N(); i++ {
		m, err := blockdev.NewMem(5*g.SlotSize, 4096)
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("ns%d", i)
		dm[name], slots[name] = m, 5
		mems = append(mems, m)
	}
	v, err := New(Options{Geometry: g, Size: size, Devices: dm, Alloc: NewMemAllocator(g.N(), slots)})
	if err != nil {
		b.Fatal(err)
	}
	buf := pattern(benchReq, 1)
	for off := int64(0); off < size; off += benchReq {
		if err := v.WriteAt(context.Background(), buf, off); err != nil {
			b.Fatal(err)
		}
	}
	return v, mems
}

// BenchmarkMemcpy is the machine's limit for the volume benchmarks: a plain
// copy() of 1 MiB into a 256 MiB area, as the volume copies into its devices.
// 1MiB-as-128KiB copies the same bytes in 128 KiB pieces, the size of the
// volume's chunk copies: Go's memmove uses non-temporal stores only from
// 1 MiB up, so this is the limit the volume's chunk copies actually face.
func BenchmarkMemcpy(b *testing.B) {
	bench := func(piece int) func(b *testing.B) {
		return func(b *testing.B) {
			src := pattern(benchReq, 1)
			dst := make([]byte, 256<<20)
			b.SetBytes(benchReq)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := (i * benchReq) % len(dst)
				for p := 0; p < benchReq; p += piece {
					copy(dst[off+p:off+p+piece], src[p:])
				}
			}
		}
	}
	b.Run("1MiB", bench(benchReq))
	b.Run("1MiB-as-128KiB", bench(128<<10))
}

func BenchmarkVolume(b *testing.B) {
	ctx := context.Background()
	seq := func(b *testing.B, v *Volume, op func(p []byte, off int64) error) {
		p := pattern(benchReq, 2)
		b.SetBytes(benchReq)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			off := int64(i*benchReq) % v.Size()
			if err := op(p, off); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("write-fullstripe/k4m2", func(b *testing.B) {
		v, _ := benchVolume(b)
		seq(b, v, func(p []byte, off int64) error { return v.WriteAt(ctx, p, off) })
	})
	b.Run("write-4KiB-random/k4m2", func(b *testing.B) {
		v, _ := benchVolume(b)
		rng := rand.New(rand.NewSource(1))
		p := pattern(4096, 3)
		b.SetBytes(4096)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := v.WriteAt(ctx, p, rng.Int63n(v.Size()/4096)*4096); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-seq/k4m2", func(b *testing.B) {
		v, _ := benchVolume(b)
		seq(b, v, func(p []byte, off int64) error { return v.ReadAt(ctx, p, off) })
	})
	b.Run("read-4KiB-random/k4m2", func(b *testing.B) {
		v, _ := benchVolume(b)
		rng := rand.New(rand.NewSource(1))
		p := make([]byte, 4096)
		b.SetBytes(4096)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := v.ReadAt(ctx, p, rng.Int63n(v.Size()/4096)*4096); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-seq-degraded1/k4m2", func(b *testing.B) {
		v, mems := benchVolume(b)
		mems[1].SetUnavailable(true)
		seq(b, v, func(p []byte, off int64) error { return v.ReadAt(ctx, p, off) })
	})
}
