package qos

import (
	"context"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
)

// Device puts a Limiter in front of a blockdev.Device: reads and writes
// wait for their turn under the limits (counted in requests and bytes),
// trims and write-zeroes count as write requests of no bytes, flushes are
// not limited. The capabilities pass through, but for Synchronous: a
// device that may wait is not synchronous, so Synchronous says true only
// when the device behind is and nothing is limited at the moment it is
// asked (frontends ask when they start serving).
type Device struct {
	blockdev.Passthrough
	l      *Limiter
	waited func(op blockdev.Op, d time.Duration)
}

var (
	_ blockdev.Device             = (*Device)(nil)
	_ blockdev.FUAWriter          = (*Device)(nil)
	_ blockdev.AllocationReporter = (*Device)(nil)
	_ blockdev.FastZeroer         = (*Device)(nil)
	_ blockdev.OptimalIO          = (*Device)(nil)
	_ blockdev.Synchronous        = (*Device)(nil)
)

// NewDevice limits d's IO with l. waited, when set, is told of every
// request that had to wait, and for how long (it must not wait itself).
func NewDevice(d blockdev.Device, l *Limiter, waited func(op blockdev.Op, d time.Duration)) *Device {
	return &Device{Passthrough: blockdev.Passthrough{Device: d}, l: l, waited: waited}
}

// wait waits for the turn of a request of op moving n bytes.
func (d *Device) wait(ctx context.Context, op blockdev.Op, n int) error {
	dir := Write
	if op == blockdev.OpRead {
		dir = Read
	}
	w, err := d.l.Wait(ctx, dir, int64(n))
	if w > 0 && d.waited != nil {
		d.waited(op, w)
	}
	return err
}

func (d *Device) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := d.wait(ctx, blockdev.OpRead, len(p)); err != nil {
		return err
	}
	return d.Device.ReadAt(ctx, p, off)
}

func (d *Device) WriteAt(ctx context.Context, p []byte, off int64) error {
	if err := d.wait(ctx, blockdev.OpWrite, len(p)); err != nil {
		return err
	}
	return d.Device.WriteAt(ctx, p, off)
}

func (d *Device) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	if err := d.wait(ctx, blockdev.OpWrite, len(p)); err != nil {
		return err
	}
	return d.Passthrough.WriteAtFUA(ctx, p, off)
}

func (d *Device) WriteZeroes(ctx context.Context, off, n int64) error {
	if err := d.wait(ctx, blockdev.OpWriteZeroes, 0); err != nil {
		return err
	}
	return d.Device.WriteZeroes(ctx, off, n)
}

func (d *Device) Trim(ctx context.Context, off, n int64) error {
	if err := d.wait(ctx, blockdev.OpTrim, 0); err != nil {
		return err
	}
	return d.Device.Trim(ctx, off, n)
}

// Synchronous is the device's answer while nothing is limited, else false.
func (d *Device) Synchronous() bool { return !d.l.Limited() && d.Passthrough.Synchronous() }
