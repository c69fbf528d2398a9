package volume

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/cputime"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

const benchReq = 1 << 20

// benchVols keeps benchVolume's volumes, by format, for the next benchmark
// run: the fill takes longer than a short run, and the testing package
// calls each benchmark function several times.
var benchVols = map[benchFormat]benchVol{}

// benchFormat is the on-disk format of a benchmark volume.
type benchFormat int

const (
	benchOff   benchFormat = iota // format 1: no checksums
	benchOn                       // format 2: checksums
	benchBound                    // format 4: checksums bound to their place
)

type benchVol struct {
	v    *Volume
	mems []*blockdev.Mem
}

// benchVolume is a 4+2 volume with 128 KiB chunks over in-memory namespaces,
// filled with data; with checksums when csum (volume format 2). Unless
// fresh, it is the one the last run used, if that run left it whole.
func benchVolume(b *testing.B, csum, fresh bool) (*Volume, []*blockdev.Mem) {
	f := benchOff
	if csum {
		f = benchOn
	}
	return benchVolumeOf(b, f, fresh)
}

// benchVolumeOf is benchVolume in format f.
func benchVolumeOf(b *testing.B, f benchFormat, fresh bool) (*Volume, []*blockdev.Mem) {
	if bv, ok := benchVols[f]; ok && !fresh {
		runtime.GC()
		return bv.v, bv.mems
	}
	delete(benchVols, f)
	g := layout.Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 16 << 20, Checksums: f != benchOff}
	if f == benchBound {
		g.Seed = 0x5eed
	}
	v, mems := filledBenchVolume(b, g)
	runtime.GC() // not in the measured CPU time: the fill's garbage, earlier runs' devices
	if !fresh {
		benchVols[f] = benchVol{v, mems}
	}
	return v, mems
}

// filledBenchVolume is a volume of geometry g over in-memory namespaces of
// five slots each, four segments long, filled with data.
func filledBenchVolume(b *testing.B, g layout.Geometry) (*Volume, []*blockdev.Mem) {
	size := 4 * g.SegmentData() // 256 MiB of 4+2, less the checksum and log areas
	dm, slots, mems := memNamespaces(b, g, 5)
	v, err := New(Options{Geometry: g, Size: size, Devices: dm, Alloc: NewMemAllocator(g.N(), slots), LogEpoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	buf := testutil.Pattern(benchReq, 1)
	for off := int64(0); off+benchReq <= size; off += benchReq {
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
			src := testutil.Pattern(benchReq, 1)
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
// with them (format 2), one after the other (-count=N repeats each run N
// times in a row; BenchmarkVolumeAB interleaves). The devices complete IO on the calling goroutine, so ns/op is
// CPU time per op on an idle machine; cpu-s/GiB is the process's CPU time
// (getrusage: user and system, GC included) per GiB moved, which other
// load on the machine does not inflate.
func BenchmarkVolume(b *testing.B) {
	for _, c := range volumeBenchCases {
		for _, csum := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/k4m2/csum=%v", c.name, csum), func(b *testing.B) {
				v, mems := benchVolume(b, csum, c.fresh)
				c.run(b, v, mems)
			})
		}
	}
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime(*testing.B) time.Duration { return cputime.Self() }

// reportCPU reports the CPU time since start per GiB of perOp bytes.
func reportCPU(b *testing.B, start time.Duration, perOp int64) {
	b.ReportMetric((cpuTime(b)-start).Seconds()/(float64(b.N)*float64(perOp))*(1<<30), "cpu-s/GiB")
}

// volumeBenchCase is one IO pattern of BenchmarkVolume.
type volumeBenchCase struct {
	name  string
	bytes int64 // per op
	fresh bool  // a volume of its own: the case leaves it degraded
	run   func(b *testing.B, v *Volume, mems []*blockdev.Mem)
}

var volumeBenchCases = []volumeBenchCase{
	{"write-fullstripe", benchReq, false, func(b *testing.B, v *Volume, _ []*blockdev.Mem) { benchSeq(b, v, v.WriteAt) }},
	{"write-4KiB-random", 4096, false, func(b *testing.B, v *Volume, _ []*blockdev.Mem) { benchRandom(b, v, v.WriteAt) }},
	{"read-seq", benchReq, false, func(b *testing.B, v *Volume, _ []*blockdev.Mem) { benchSeq(b, v, v.ReadAt) }},
	{"read-4KiB-random", 4096, false, func(b *testing.B, v *Volume, _ []*blockdev.Mem) { benchRandom(b, v, v.ReadAt) }},
	{"write-4KiB-random-flush64", 4096, false, func(b *testing.B, v *Volume, _ []*blockdev.Mem) { benchRandom(b, v, flushEvery64(v)) }},
	{"read-seq-degraded1", benchReq, true, func(b *testing.B, v *Volume, mems []*blockdev.Mem) {
		mems[1].SetUnavailable(true)
		benchSeq(b, v, v.ReadAt)
	}},
}

// benchSeq runs op over 1 MiB requests, sequentially over the volume.
func benchSeq(b *testing.B, v *Volume, op func(ctx context.Context, p []byte, off int64) error) {
	p := testutil.Pattern(benchReq, 2)
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

// flushEvery64 is v.WriteAt with a Flush after every 64th write: the
// checksum pages are written too.
func flushEvery64(v *Volume) func(ctx context.Context, p []byte, off int64) error {
	n := 0
	return func(ctx context.Context, p []byte, off int64) error {
		if err := v.WriteAt(ctx, p, off); err != nil {
			return err
		}
		if n++; n%64 == 0 {
			return v.Flush(ctx)
		}
		return nil
	}
}

// benchRandom runs op over 4 KiB requests at random offsets.
func benchRandom(b *testing.B, v *Volume, op func(ctx context.Context, p []byte, off int64) error) {
	rng := rand.New(rand.NewSource(1))
	p := testutil.Pattern(4096, 3)
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
// of every stripe read and verified, parity checked. MB/s and GB/s are of
// volume data per second of wall time; cpu-s/GiB is per GiB of it.
func BenchmarkScrub(b *testing.B) {
	v, _ := benchVolume(b, true, false)
	segs := v.Geometry().Segments(v.Size())
	data := segs * v.Geometry().SegmentData()
	b.SetBytes(data)
	b.ResetTimer()
	start := cpuTime(b)
	for i := 0; i < b.N; i++ {
		if _, err := v.Scrub(context.Background(), 0, segs-1, nil); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start, data)
	b.ReportMetric(float64(data)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	if st := v.ChecksumStats(); st.Mismatches != 0 {
		b.Fatalf("scrub of a clean volume found %+v", st)
	}
}

// BenchmarkVolumeAB is BenchmarkVolume's checksum A/B made to stand noise:
// for each case it alternates short bursts of ops on a volume without
// checksums and one with them, many rounds, timing each burst by the CPU
// time of the calling thread (the in-memory devices complete IO on it),
// and reports the 10th percentile of each side (the bursts least disturbed
// by other load on the machine: memory bandwidth is shared) and their
// ratio (off/on: the share of the speed without checksums kept with
// them). Run it once: -benchtime 1x.
func BenchmarkVolumeAB(b *testing.B) { benchAB(b, benchOff, benchOn) }

// BenchmarkVolumeBoundAB is BenchmarkVolumeAB between checksums of
// format 2 ("off" here) and checksums bound to their place (format 4,
// "on"): the cost of the tags, applied where checksum pages are read or
// written (the flush64 case writes them). Run it once: -benchtime 1x.
func BenchmarkVolumeBoundAB(b *testing.B) { benchAB(b, benchOn, benchBound) }

// benchAB is BenchmarkVolumeAB between formats a ("off") and b ("on").
func benchAB(b *testing.B, fa, fb benchFormat) {
	for _, c := range volumeBenchCases {
		b.Run(c.name, func(b *testing.B) {
			// b.Run runs this on a goroutine of its own: lock that one
			// (locking the parent left the bursts' thread clock reading
			// whichever thread the goroutine moved to: negative times).
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var vols [2]*Volume
			for i, f := range []benchFormat{fa, fb} {
				v, mems := benchVolumeOf(b, f, c.fresh)
				if c.fresh {
					mems[1].SetUnavailable(true)
				}
				vols[i] = v
			}
			ops, rounds := 16, 100
			if c.bytes < benchReq {
				ops = 512
			}
			p := testutil.Pattern(int(c.bytes), 2)
			var ns [2][]float64
			for i := 0; i < b.N; i++ {
				for r := 0; r < rounds; r++ {
					for j, v := range vols {
						ns[j] = append(ns[j], burstCPU(b, v, c.name, p, ops, r)/float64(ops))
					}
				}
			}
			off, on := percentile(ns[0], 0.1), percentile(ns[1], 0.1)
			b.ReportMetric(off, "off-ns/op")
			b.ReportMetric(on, "on-ns/op")
			b.ReportMetric(float64(c.bytes)/off*1e3, "off-MB/s")
			b.ReportMetric(float64(c.bytes)/on*1e3, "on-MB/s")
			b.ReportMetric(off/on, "ratio")
		})
	}
}

// burstCPU runs ops ops of case name on v with buffer p and returns the
// thread's CPU time for them in ns.
func burstCPU(b *testing.B, v *Volume, name string, p []byte, ops, round int) float64 {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(int64(round)))
	span := v.Size() / benchReq
	start := threadCPU(b)
	for i := 0; i < ops; i++ {
		var err error
		switch name {
		case "write-fullstripe":
			err = v.WriteAt(ctx, p, (int64(round*ops+i)%span)*benchReq)
		case "write-4KiB-random":
			err = v.WriteAt(ctx, p, rng.Int63n(v.Size()/4096)*4096)
		case "write-4KiB-random-flush64":
			err = v.WriteAt(ctx, p, rng.Int63n(v.Size()/4096)*4096)
			if err == nil && i%64 == 63 {
				err = v.Flush(ctx)
			}
		case "read-seq", "read-seq-degraded1":
			err = v.ReadAt(ctx, p, (int64(round*ops+i)%span)*benchReq)
		case "read-4KiB-random":
			err = v.ReadAt(ctx, p, rng.Int63n(v.Size()/4096)*4096)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return float64(threadCPU(b) - start)
}

// threadCPU is the calling thread's CPU time (REQUIRES: locked to it).
func threadCPU(b *testing.B) time.Duration { return clockCPU(b, clockThreadCPUTime) }

// processCPU is the process's CPU time (every thread).
func processCPU(b *testing.B) time.Duration { return clockCPU(b, clockProcessCPUTime) }

// The CPU-time clocks of clock_gettime.
const (
	clockProcessCPUTime = 2 // CLOCK_PROCESS_CPUTIME_ID
	clockThreadCPUTime  = 3 // CLOCK_THREAD_CPUTIME_ID
)

// clockCPU reads CPU-time clock id with clock_gettime (getrusage counts in
// ticks).
func clockCPU(b *testing.B, id uintptr) time.Duration {
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, id, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		b.Fatal(e)
	}
	return time.Duration(ts.Nano())
}

// percentile returns the p-quantile of xs (sorted in place).
func percentile(xs []float64, p float64) float64 {
	sort.Float64s(xs)
	return xs[int(p*float64(len(xs)-1))]
}
