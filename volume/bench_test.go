package volume

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

const benchReq = 1 << 20

// benchVolume is a 4+2 volume with 128 KiB chunks over in-memory namespaces,
// filled with data; with checksums when csum (volume format 2).
func benchVolume(b *testing.B, csum bool) (*Volume, []*blockdev.Mem) {
	g := layout.Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 16 << 20, Checksums: csum}
	size := 4 * g.SegmentData() // 256 MiB less the checksum areas
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
	for off := int64(0); off+benchReq <= size; off += benchReq {
		if err := v.WriteAt(context.Background(), buf, off); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC() // not in the measured CPU time: the fill's garbage, earlier runs' devices
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

// BenchmarkVolume runs each case without checksums (volume format 1) and
// with them (format 2), one after the other, so that -count=N interleaves
// the two. The devices complete IO on the calling goroutine, so ns/op is
// CPU time per op on an idle machine; cpu-s/GiB is the process's CPU time
// (getrusage: user and system, GC included) per GiB moved, which other
// load on the machine does not inflate.
func BenchmarkVolume(b *testing.B) {
	for _, c := range volumeBenchCases {
		for _, csum := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/k4m2/csum=%v", c.name, csum), func(b *testing.B) {
				v, mems := benchVolume(b, csum)
				c.run(b, v, mems)
			})
		}
	}
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time since start per GiB of perOp bytes.
func reportCPU(b *testing.B, start time.Duration, perOp int64) {
	b.ReportMetric((cpuTime(b)-start).Seconds()/(float64(b.N)*float64(perOp))*(1<<30), "cpu-s/GiB")
}

var volumeBenchCases = []struct {
	name  string
	bytes int64 // per op
	run   func(b *testing.B, v *Volume, mems []*blockdev.Mem)
}{
	{"write-fullstripe", benchReq, func(b *testing.B, v *Volume, _ []*blockdev.Mem) { benchSeq(b, v, v.WriteAt) }},
	{"write-4KiB-random", 4096, func(b *testing.B, v *Volume, _ []*blockdev.Mem) { benchRandom(b, v, v.WriteAt) }},
	{"read-seq", benchReq, func(b *testing.B, v *Volume, _ []*blockdev.Mem) { benchSeq(b, v, v.ReadAt) }},
	{"read-4KiB-random", 4096, func(b *testing.B, v *Volume, _ []*blockdev.Mem) { benchRandom(b, v, v.ReadAt) }},
	{"read-seq-degraded1", benchReq, func(b *testing.B, v *Volume, mems []*blockdev.Mem) {
		mems[1].SetUnavailable(true)
		benchSeq(b, v, v.ReadAt)
	}},
}

// benchSeq runs op over 1 MiB requests, sequentially over the volume.
func benchSeq(b *testing.B, v *Volume, op func(ctx context.Context, p []byte, off int64) error) {
	p := pattern(benchReq, 2)
	span := v.Size() / benchReq * benchReq
	b.SetBytes(benchReq)
	b.ResetTimer()
	start := cpuTime(b)
	for i := 0; i < b.N; i++ {
		if err := op(context.Background(), p, int64(i)*benchReq%span); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start, benchReq)
}

// benchRandom runs op over 4 KiB requests at random offsets.
func benchRandom(b *testing.B, v *Volume, op func(ctx context.Context, p []byte, off int64) error) {
	rng := rand.New(rand.NewSource(1))
	p := pattern(4096, 3)
	b.SetBytes(4096)
	b.ResetTimer()
	start := cpuTime(b)
	for i := 0; i < b.N; i++ {
		if err := op(context.Background(), p, rng.Int63n(v.Size()/4096)*4096); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start, 4096)
}

// BenchmarkScrub is the scrub rate over in-memory namespaces: every shard
// of every stripe read and verified, parity checked (MB/s of volume data).
func BenchmarkScrub(b *testing.B) {
	v, _ := benchVolume(b, true)
	segs := v.Geometry().Segments(v.Size())
	b.SetBytes(segs * v.Geometry().SegmentData())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := v.Scrub(context.Background(), 0, segs-1, nil); err != nil {
			b.Fatal(err)
		}
	}
	if st := v.ChecksumStats(); st.Mismatches != 0 {
		b.Fatalf("scrub of a clean volume found %+v", st)
	}
}
