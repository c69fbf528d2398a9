package volume

import (
	"context"
	"math/rand"
	"runtime"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// BenchmarkProveFirstRead is what proving rows costs a new owner: 4 KiB
// random reads (QD1) of a filled format-4 4+2 volume (128 KiB chunks)
// just opened, whose rows are not proven yet ("first": each reads every
// shard of its row and checks it against parity), against the same reads
// once they are ("proven": the steady state, where the only cost is a bit
// test). Each round opens the volume anew and runs both bursts on it;
// the burst times are thread CPU, medians over the rounds. Run it once:
// -benchtime 1x.
func BenchmarkProveFirstRead(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g := layout.Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 16 << 20, Checksums: true, Log: true, Seed: 0x5eed}
	open := proveBenchVolume(b, g)
	const ops, rounds = 256, 40
	var first, proven []float64
	ctx := context.Background()
	p := make([]byte, 4096)
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			v := open()
			offs := make([]int64, ops)
			rng := rand.New(rand.NewSource(int64(r)))
			for j := range offs {
				offs[j] = rng.Int63n(v.Size()/4096) * 4096
			}
			for k, into := range []*[]float64{&first, &proven} {
				start := threadCPU(b)
				for _, off := range offs {
					if err := v.ReadAt(ctx, p, off); err != nil {
						b.Fatal(err)
					}
				}
				*into = append(*into, float64(threadCPU(b)-start)/ops)
				if k == 0 && v.ChecksumStats().Stale != 0 {
					b.Fatal("a filled volume has stale rows")
				}
			}
		}
	}
	f, pr := percentile(first, 0.5), percentile(proven, 0.5)
	perGiB := func(ns float64) float64 { return ns / 4096 * (1 << 30) / 1e9 }
	b.ReportMetric(f, "first-ns/op")
	b.ReportMetric(pr, "proven-ns/op")
	b.ReportMetric(perGiB(f), "first-cpu-s/GiB")
	b.ReportMetric(perGiB(pr), "proven-cpu-s/GiB")
}

// proveBenchVolume fills a volume of geometry g over in-memory namespaces
// and returns a function that opens it anew (a new owner, nothing proven).
func proveBenchVolume(b *testing.B, g layout.Geometry) func() *Volume {
	size := 4 * g.SegmentData()
	dm, slots, _ := memNamespaces(b, g, 5)
	alloc := NewMemAllocator(g.N(), slots)
	epoch := int64(0)
	open := func() *Volume {
		epoch++
		v, err := New(Options{Geometry: g, Size: size, Devices: dm, Alloc: alloc, LogEpoch: epoch})
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	v := open()
	buf := testutil.Pattern(benchReq, 1)
	for off := int64(0); off+benchReq <= size; off += benchReq {
		if err := v.WriteAt(context.Background(), buf, off); err != nil {
			b.Fatal(err)
		}
	}
	if err := v.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	return open
}
