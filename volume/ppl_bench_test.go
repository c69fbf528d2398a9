package volume

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
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
	p := pattern(4096, 3)
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
			p, stripes := pattern(int(sd), 5), v.Size()/sd
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
