package agent

import (
	"context"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
)

// BenchmarkServedDev compares the served device of a mapping (meter,
// swappable slot, fence, volume) with the chain before the slot existed
// (meter, fence, volume), on 4 KiB reads from memory so that the per-call
// cost shows. Run with -count to interleave them.
func BenchmarkServedDev(b *testing.B) {
	mem := benchMem(b)
	benchReads(b, []benchDev{
		{"before", servedBefore(mem, NewMetrics(), "bench")},
		{"swappable", newServed(mem, NewMetrics(), "bench", nil)},
	})
}

// benchMem is the memory device under the served-device benchmarks: 64
// MiB of 4 KiB blocks.
func benchMem(b *testing.B) *blockdev.Mem {
	mem, err := blockdev.NewMem(64<<20, 4096)
	if err != nil {
		b.Fatal(err)
	}
	return mem
}

// benchDev is one device a benchmark compares, named.
type benchDev struct {
	name string
	dev  blockdev.Device
}

// benchReads runs a sub-benchmark for each device of 4 KiB reads over the
// first 64 MiB in turn.
func benchReads(b *testing.B, devs []benchDev) {
	for _, c := range devs {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			buf := make([]byte, 4096)
			b.SetBytes(int64(len(buf)))
			for i := 0; b.Loop(); i++ {
				if err := c.dev.ReadAt(ctx, buf, int64(i%16384)*4096); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// servedBefore is newServed as it was before the swappable slot.
func servedBefore(dev blockdev.Device, m *Metrics, volume string) blockdev.Device {
	var ops [blockdev.NumOps]opMeter
	for op := range blockdev.NumOps {
		ops[op] = newOpMeter(m, volume, op.String())
	}
	return blockdev.NewMeter(blockdev.NewFence(dev), func(op blockdev.Op, n int64, lat time.Duration, err error) {
		ops[op].observe(n, lat, err)
	})
}
