package devtest

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

// Capable wraps a Device and gives it every optional capability, each
// answering so that a wrapper that passes it on can be told from one that
// answers for itself: FUA writes are counted (FUAWrites), Allocated reports
// only the first block of the range, ZeroIsFast says true, OptimalIOSize is
// 512 KiB and Synchronous says Sync.
type Capable struct {
	blockdev.Device
	Sync      bool
	FUAWrites atomic.Int64
}

var (
	_ blockdev.FUAWriter          = (*Capable)(nil)
	_ blockdev.AllocationReporter = (*Capable)(nil)
	_ blockdev.FastZeroer         = (*Capable)(nil)
	_ blockdev.OptimalIO          = (*Capable)(nil)
	_ blockdev.Synchronous        = (*Capable)(nil)
)

// CapableOptimal is Capable's optimal IO size.
const CapableOptimal = 512 << 10

func (c *Capable) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	c.FUAWrites.Add(1)
	return c.Device.WriteAt(ctx, p, off)
}

func (c *Capable) Allocated(_ context.Context, off, n int64) ([]blockdev.Extent, error) {
	return []blockdev.Extent{{Off: off, Len: min(n, int64(c.BlockSize()))}}, nil
}

func (c *Capable) ZeroIsFast(int64, int64, bool) bool { return true }
func (c *Capable) OptimalIOSize() int                 { return CapableOptimal }
func (c *Capable) Synchronous() bool                  { return c.Sync }

// PassesCapabilities checks that wrap passes every optional capability of
// the device it wraps through: FUA writes reach its FUA, Allocated,
// ZeroIsFast and OptimalIOSize are its answers, and it is Synchronous when
// the wrapped device is and synchronous is true (false for a wrapper that
// may wait). Over a device with no capability the wrapper claims none it
// cannot honour: no optimal IO size, not synchronous, zeroing not fast,
// everything allocated.
func PassesCapabilities(t *testing.T, wrap func(blockdev.Device) blockdev.Device, synchronous bool) {
	t.Helper()
	ctx := context.Background()
	mem, err := blockdev.NewMem(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for _, sync := range []bool{true, false} {
		inner := &Capable{Device: mem, Sync: sync}
		w := wrap(inner)
		if got := blockdev.OptimalIOSize(w); got != CapableOptimal {
			t.Errorf("%T: optimal IO size %d, want the wrapped device's %d", w, got, CapableOptimal)
		}
		if got := blockdev.IsSynchronous(w); got != (sync && synchronous) {
			t.Errorf("%T over a device that is synchronous=%v: synchronous=%v", w, sync, got)
		}
		if z, ok := w.(blockdev.FastZeroer); !ok || !z.ZeroIsFast(0, 4096, false) {
			t.Errorf("%T: ZeroIsFast is not the wrapped device's answer", w)
		}
		checkAllocated(t, w, []blockdev.Extent{{Off: 4096, Len: 4096}})
		if err := blockdev.WriteFUA(ctx, w, make([]byte, 4096), 0); err != nil || inner.FUAWrites.Load() != 1 {
			t.Errorf("%T: an FUA write did not reach the wrapped device's FUA (%d FUA writes): %v", w, inner.FUAWrites.Load(), err)
		}
	}
	w := wrap(struct{ blockdev.Device }{mem}) // no capability at all
	if got := blockdev.OptimalIOSize(w); got != 0 {
		t.Errorf("%T over a device without one: optimal IO size %d", w, got)
	}
	if blockdev.IsSynchronous(w) {
		t.Errorf("%T over a device that is not synchronous says it is", w)
	}
	if z, ok := w.(blockdev.FastZeroer); ok && z.ZeroIsFast(0, 4096, true) {
		t.Errorf("%T over a device that cannot tell says zeroing is fast", w)
	}
	checkAllocated(t, w, []blockdev.Extent{{Off: 4096, Len: 8192}})
}

// checkAllocated checks w's answer for [4096, 12288) when w reports
// allocation.
func checkAllocated(t *testing.T, w blockdev.Device, want []blockdev.Extent) {
	t.Helper()
	r, ok := w.(blockdev.AllocationReporter)
	if !ok {
		return
	}
	got, err := r.Allocated(context.Background(), 4096, 8192)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("%T: Allocated = %v, %v; want %v", w, got, err, want)
	}
}
