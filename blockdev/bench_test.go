package blockdev_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
)

// The benchmarks move 1 MiB per op at a fixed offset, so the data stays in
// cache as it does for BenchmarkMemcpy: they measure the device's overhead
// over a plain copy.

func BenchmarkMemcpy(b *testing.B) {
	b.Run("1MiB", func(b *testing.B) {
		src, dst := fill(1<<20, 1), make([]byte, 1<<20)
		b.SetBytes(1 << 20)
		for b.Loop() {
			copy(dst, src)
		}
	})
}

func BenchmarkMem(b *testing.B) {
	m, err := blockdev.NewMem(64<<20, 4096)
	if err != nil {
		b.Fatal(err)
	}
	benchDevice(b, m)
}

func BenchmarkFile(b *testing.B) {
	for _, c := range []struct {
		suffix string
		direct blockdev.DirectMode
	}{{"", blockdev.DirectAuto}, {"-buffered", blockdev.DirectOff}} {
		f, err := blockdev.OpenFile(filepath.Join(b.TempDir(), "dev"), &blockdev.FileOptions{Size: 64 << 20, Direct: c.direct})
		if err != nil {
			b.Fatal(err)
		}
		if c.suffix == "" && !f.Direct() {
			b.Logf("File without O_DIRECT: %s", f.DirectReason())
		}
		benchDevice(b, suffixed{f, c.suffix})
		f.Close()
	}
}

// suffixed renames the sub-benchmarks of a device variant.
type suffixed struct {
	blockdev.Device
	suffix string
}

func benchDevice(b *testing.B, d blockdev.Device) {
	name := ""
	if s, ok := d.(suffixed); ok {
		d, name = s.Device, s.suffix
	}
	ctx := context.Background()
	buf := fill(1<<20, 7)
	for off := int64(0); off < 32<<20; off += 1 << 20 {
		if err := d.WriteAt(ctx, buf, off); err != nil { // the parallel reads' range
			b.Fatal(err)
		}
	}
	b.Run("read-1MiB"+name, func(b *testing.B) {
		b.SetBytes(1 << 20)
		for b.Loop() {
			if err := d.ReadAt(ctx, buf, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write-1MiB"+name, func(b *testing.B) {
		b.SetBytes(1 << 20)
		for b.Loop() {
			if err := d.WriteAt(ctx, buf, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-1MiB-parallel"+name, func(b *testing.B) {
		b.SetBytes(1 << 20)
		b.RunParallel(func(pb *testing.PB) {
			p := make([]byte, 1<<20)
			for i := int64(0); pb.Next(); i++ {
				if err := d.ReadAt(ctx, p, (i%32)<<20); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkFenceRead is the A/B of the fences on the read path: 4 KiB
// reads from a Mem bare, behind a Fence, and behind a lease fence whose
// lease is checked as meta.Owner.Valid checks it (a monotonic clock read
// against a deadline), before and after each read.
func BenchmarkFenceRead(b *testing.B) {
	m, err := blockdev.NewMem(64<<20, 4096)
	if err != nil {
		b.Fatal(err)
	}
	base := time.Now()
	var until atomic.Int64
	until.Store(int64(time.Hour))
	lease := func() error {
		if int64(time.Since(base)) < until.Load() {
			return nil
		}
		return blockdev.ErrFenced
	}
	for _, c := range []struct {
		name string
		dev  blockdev.Device
	}{{"bare", m}, {"fence", blockdev.NewFence(m)}, {"lease", blockdev.NewLeaseFence(m, lease)}} {
		b.Run(c.name, func(b *testing.B) {
			ctx, buf := context.Background(), make([]byte, 4096)
			b.SetBytes(4096)
			for b.Loop() {
				if err := c.dev.ReadAt(ctx, buf, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
