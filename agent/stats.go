package agent

import (
	"context"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
)

// Counted wraps a Device and counts the bytes and calls that pass through it,
// for throughput displays and metrics.
type Counted struct {
	blockdev.Device
	ReadBytes, WriteBytes, Reads, Writes, Errors atomic.Int64
}

var (
	_ blockdev.Device             = (*Counted)(nil)
	_ blockdev.FUAWriter          = (*Counted)(nil)
	_ blockdev.AllocationReporter = (*Counted)(nil)
	_ blockdev.FastZeroer         = (*Counted)(nil)
	_ blockdev.OptimalIO          = (*Counted)(nil)
	_ blockdev.Synchronous        = (*Counted)(nil)
)

// NewCounted wraps d.
func NewCounted(d blockdev.Device) *Counted { return &Counted{Device: d} }

func (c *Counted) count(n int, err error, bytes, calls *atomic.Int64) error {
	calls.Add(1)
	if err != nil {
		c.Errors.Add(1)
		return err
	}
	bytes.Add(int64(n))
	return nil
}

func (c *Counted) ReadAt(ctx context.Context, p []byte, off int64) error {
	return c.count(len(p), c.Device.ReadAt(ctx, p, off), &c.ReadBytes, &c.Reads)
}

func (c *Counted) WriteAt(ctx context.Context, p []byte, off int64) error {
	return c.count(len(p), c.Device.WriteAt(ctx, p, off), &c.WriteBytes, &c.Writes)
}

func (c *Counted) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	return c.count(len(p), blockdev.WriteFUA(ctx, c.Device, p, off), &c.WriteBytes, &c.Writes)
}

// Allocated passes through when the wrapped device reports allocation and
// reports everything allocated otherwise.
func (c *Counted) Allocated(ctx context.Context, off, n int64) ([]blockdev.Extent, error) {
	if r, ok := c.Device.(blockdev.AllocationReporter); ok {
		return r.Allocated(ctx, off, n)
	}
	return []blockdev.Extent{{Off: off, Len: n}}, nil
}

// ZeroIsFast passes the wrapped device's answer through (false when it
// cannot tell).
func (c *Counted) ZeroIsFast(off, n int64, mayTrim bool) bool {
	z, ok := c.Device.(blockdev.FastZeroer)
	return ok && z.ZeroIsFast(off, n, mayTrim)
}

// OptimalIOSize passes the wrapped device's through (0 when it has none).
func (c *Counted) OptimalIOSize() int { return blockdev.OptimalIOSize(c.Device) }

// Synchronous passes the wrapped device's through: counting does not wait.
func (c *Counted) Synchronous() bool { return blockdev.IsSynchronous(c.Device) }
