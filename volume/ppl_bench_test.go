package volume

import (
	"context"
	"fmt"
	"math/rand"
	"syscall"
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
				start := cpuSeconds(b)
				c.run(b, v, mems)
				b.ReportMetric((cpuSeconds(b)-start)/(float64(b.N)*float64(c.bytes))*(1<<30), "cpu-s/GiB")
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

// cpuSeconds is the CPU time the process has used.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// benchLogVolume is benchVolume's volume with checksums, and with the
// write log when log.
func benchLogVolume(b *testing.B, log bool) (*Volume, []*blockdev.Mem) {
	g := layout.Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 16 << 20, Checksums: true, Log: log}
	size := 4 * g.SegmentData()
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
	v, err := New(Options{Geometry: g, Size: size, Devices: dm, Alloc: NewMemAllocator(g.N(), slots), LogEpoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	buf := pattern(benchReq, 1)
	for off := int64(0); off+benchReq <= size; off += benchReq {
		if err := v.WriteAt(context.Background(), buf, off); err != nil {
			b.Fatal(err)
		}
	}
	return v, mems
}
