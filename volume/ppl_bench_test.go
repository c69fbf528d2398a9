package volume

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// BenchmarkWriteLog runs the write cases of BenchmarkVolume, and 4 KiB
// random writes with a flush every 64, on a 4+2
// volume with checksums, without the write log (format 2) and with it
// (format 3), one after the other, so that -count=N interleaves the two.
// cpu-s/GiB is the process's CPU time (getrusage: user and system, GC
// included) per GiB written, which a machine shared with other work does
// not inflate as it does ns/op. Without flushes the log flushes the
// volume itself whenever its ring is full of live records.
func BenchmarkWriteLog(b *testing.B) {
	cases := append(volumeBenchCases[:2:2], volumeBenchCase{name: "write-4KiB-random-flush64", bytes: 4096,
		run: func(b *testing.B, v *Volume, _ []*blockdev.Mem) { benchRandomFlush(b, v, 64) }})
	for _, c := range cases {
		for _, log := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/k4m2/log=%v", c.name, log), func(b *testing.B) {
				v, mems := benchLogVolume(b, log)
				runtime.GC() // not in the measured CPU time: the fill's garbage, earlier runs' devices
				start := cpuTime(b)
				c.run(b, v, mems)
				reportCPU(b, start, c.bytes)
			})
		}
	}
}

// benchRandomFlush writes 4 KiB at random offsets and flushes every
// every writes, as a file system commits its journal.
func benchRandomFlush(b *testing.B, v *Volume, every int) {
	rng := rand.New(rand.NewSource(1))
	p := testutil.Pattern(4096, 3)
	b.SetBytes(4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := v.WriteAt(context.Background(), p, rng.Int63n(v.Size()/4096)*4096); err != nil {
			b.Fatal(err)
		}
		if i%every == every-1 {
			if err := v.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchLogVolume is benchVolume's volume with checksums, and with the
// write log when log.
func benchLogVolume(b *testing.B, log bool) (*Volume, []*blockdev.Mem) {
	return filledBenchVolume(b, layout.Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 16 << 20, Checksums: true, Log: log})
}

// BenchmarkZeroStripes zeroes one whole stripe of a 4+2 volume with
// checksums (its data written just before, outside the timer, so that it
// is not all zeros), without the write log (format 2) and with it (a
// record of the zeroing first), one after the other, so that -count=N
// interleaves the two.
func BenchmarkZeroStripes(b *testing.B) {
	for _, log := range []bool{false, true} {
		b.Run(fmt.Sprintf("k4m2/log=%v", log), func(b *testing.B) {
			v, _ := benchLogVolume(b, log)
			ctx := context.Background()
			sd := v.g.StripeData()
			p, stripes := testutil.Pattern(int(sd), 5), v.Size()/sd
			b.SetBytes(sd)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := int64(i) % stripes * sd
				b.StopTimer()
				if err := v.WriteAt(ctx, p, off); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := v.WriteZeroes(ctx, off, sd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWriteLogAB is the write log's cost on 4 KiB random writes, A/B
// in one run: it alternates bursts of writes on a 4+2 volume with
// checksums without the log (format 2, "off") and one with it (format 3,
// "on"), many rounds, at QD1 (one writer) and QD32 (32 writers), plain
// and with a flush every 64 writes (as a file system commits its
// journal). Per side it reports the median burst's process CPU time per
// write (clock_gettime of the process: every thread, GC included), wall
// time per write at QD1 (the latency; the in-memory devices add none) and
// writes per second at QD32, and the ratios on/off. Run it once:
// -benchtime 1x.
func BenchmarkWriteLogAB(b *testing.B) {
	for _, qd := range []int{1, 32} {
		for _, every := range []int{0, 64} {
			name := fmt.Sprintf("qd%d", qd)
			if every > 0 {
				name += fmt.Sprintf("-flush%d", every)
			}
			b.Run(name, func(b *testing.B) { benchWriteLogAB(b, qd, every) })
		}
	}
}

func benchWriteLogAB(b *testing.B, qd, every int) {
	var vols [2]*Volume
	for i, log := range []bool{false, true} {
		vols[i], _ = benchLogVolume(b, log)
	}
	runtime.GC()
	const rounds, ops = 40, 1024
	var cpu, wall [2][]float64
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for j, v := range vols {
				c, w := burstWrites(b, v, qd, ops, every, int64(r))
				cpu[j] = append(cpu[j], c/ops)
				wall[j] = append(wall[j], w/ops)
			}
		}
	}
	var cpuNS, wallNS [2]float64
	for j := range vols {
		cpuNS[j], wallNS[j] = percentile(cpu[j], 0.5), percentile(wall[j], 0.5)
	}
	b.ReportMetric(cpuNS[0]/1e3, "off-cpu-us/op")
	b.ReportMetric(cpuNS[1]/1e3, "on-cpu-us/op")
	b.ReportMetric(cpuNS[1]/cpuNS[0], "cpu-ratio")
	if qd == 1 {
		b.ReportMetric(wallNS[0]/1e3, "off-lat-us")
		b.ReportMetric(wallNS[1]/1e3, "on-lat-us")
		b.ReportMetric(wallNS[1]/wallNS[0], "lat-ratio")
	} else {
		b.ReportMetric(1e9/wallNS[0], "off-iops")
		b.ReportMetric(1e9/wallNS[1], "on-iops")
		b.ReportMetric(wallNS[0]/wallNS[1], "iops-ratio")
	}
}

// burstWrites writes ops 4 KiB blocks at random offsets of v from qd
// writers (with a flush of the volume after every every-th write of the
// burst, when every > 0) and returns the process CPU time and the wall
// time they took, in ns.
func burstWrites(b *testing.B, v *Volume, qd, ops, every int, seed int64) (cpu, wall float64) {
	ctx := context.Background()
	p := testutil.Pattern(4096, 3)
	blocks := v.Size() / 4096
	errs := make(chan error, qd)
	var done atomic.Int64
	c0, w0 := processCPU(b), time.Now()
	var wg sync.WaitGroup
	for w := 0; w < qd; w++ {
		wg.Go(func() {
			rng := rand.New(rand.NewSource(seed*1000 + int64(w)))
			for i := 0; i < ops/qd; i++ {
				if err := v.WriteAt(ctx, p, rng.Int63n(blocks)*4096); err != nil {
					errs <- err
					return
				}
				if n := done.Add(1); every > 0 && n%int64(every) == 0 {
					if err := v.Flush(ctx); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	wall, cpu = float64(time.Since(w0)), float64(processCPU(b)-c0)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return cpu, wall
}
