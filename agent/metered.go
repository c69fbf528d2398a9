package agent

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nvstripe/nvstripe/blockdev"
)

// opMeter holds the metric children of one operation of one volume, looked
// up once so that the IO path does no map lookups.
type opMeter struct {
	bytes, ops, errs prometheus.Counter
	lat              prometheus.Observer
}

func newOpMeter(m *Metrics, volume, op string) opMeter {
	return opMeter{
		bytes: m.bytes.WithLabelValues(volume, op), ops: m.ops.WithLabelValues(volume, op),
		errs: m.errs.WithLabelValues(volume, op), lat: m.latency.WithLabelValues(volume, op),
	}
}

// metered is the device a mapping serves: the volume behind a fence (once
// ownership is lost every call fails with blockdev.ErrFenced, before reaching
// the volume) and meters (Prometheus metrics and the counters of List).
type metered struct {
	dev    blockdev.Device
	fenced atomic.Pointer[error]
	// observe, when set, receives the latency of every read and write (the
	// pacer of shard moves slows down when foreground IO suffers).
	observe func(time.Duration)

	readBytes, writeBytes, reads, writes, errors atomic.Int64

	read, write, flush, trim, zero opMeter
}

var (
	_ blockdev.Device             = (*metered)(nil)
	_ blockdev.FUAWriter          = (*metered)(nil)
	_ blockdev.AllocationReporter = (*metered)(nil)
	_ blockdev.FastZeroer         = (*metered)(nil)
	_ blockdev.OptimalIO          = (*metered)(nil)
	_ blockdev.Synchronous        = (*metered)(nil)
)

func newMetered(dev blockdev.Device, m *Metrics, volume string) *metered {
	return &metered{
		dev: dev, read: newOpMeter(m, volume, "read"), write: newOpMeter(m, volume, "write"),
		flush: newOpMeter(m, volume, "flush"), trim: newOpMeter(m, volume, "trim"), zero: newOpMeter(m, volume, "write_zeroes"),
	}
}

// fence makes every later call fail with ErrFenced, citing cause.
func (d *metered) fence(cause error) {
	err := blockdev.Mark(fmt.Errorf("ownership lost, volume fenced: %w", cause), blockdev.ErrFenced)
	d.fenced.CompareAndSwap(nil, &err)
}

// gate returns the fencing error, or nil while the device may be used.
func (d *metered) gate() error {
	if p := d.fenced.Load(); p != nil {
		return *p
	}
	return nil
}

// do runs one call through the fence and the meters.
func (d *metered) do(m *opMeter, bytes int64, call func() error) error {
	start := time.Now()
	err := d.gate()
	if err == nil {
		err = call()
	}
	lat := time.Since(start)
	m.lat.Observe(lat.Seconds())
	if d.observe != nil && (m == &d.read || m == &d.write) {
		d.observe(lat)
	}
	m.ops.Inc()
	if err != nil {
		m.errs.Inc()
		d.errors.Add(1)
		return err
	}
	if bytes > 0 {
		m.bytes.Add(float64(bytes))
	}
	return nil
}

func (d *metered) ReadAt(ctx context.Context, p []byte, off int64) error {
	err := d.do(&d.read, int64(len(p)), func() error { return d.dev.ReadAt(ctx, p, off) })
	if d.reads.Add(1); err == nil {
		d.readBytes.Add(int64(len(p)))
	}
	return err
}

func (d *metered) WriteAt(ctx context.Context, p []byte, off int64) error {
	return d.written(len(p), d.do(&d.write, int64(len(p)), func() error { return d.dev.WriteAt(ctx, p, off) }))
}

func (d *metered) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	return d.written(len(p), d.do(&d.write, int64(len(p)), func() error { return blockdev.WriteFUA(ctx, d.dev, p, off) }))
}

func (d *metered) written(n int, err error) error {
	if d.writes.Add(1); err == nil {
		d.writeBytes.Add(int64(n))
	}
	return err
}

func (d *metered) Flush(ctx context.Context) error {
	return d.do(&d.flush, 0, func() error { return d.dev.Flush(ctx) })
}

func (d *metered) WriteZeroes(ctx context.Context, off, n int64) error {
	return d.do(&d.zero, 0, func() error { return d.dev.WriteZeroes(ctx, off, n) })
}

func (d *metered) Trim(ctx context.Context, off, n int64) error {
	return d.do(&d.trim, 0, func() error { return d.dev.Trim(ctx, off, n) })
}

func (d *metered) Size() int64    { return d.dev.Size() }
func (d *metered) BlockSize() int { return d.dev.BlockSize() }

// OptimalIOSize passes the volume's through.
func (d *metered) OptimalIOSize() int { return blockdev.OptimalIOSize(d.dev) }

// Synchronous passes the volume's through: metering does not wait.
func (d *metered) Synchronous() bool { return blockdev.IsSynchronous(d.dev) }

// Close does nothing: the mapping closes the volume itself.
func (d *metered) Close() error { return nil }

// Allocated passes through when the volume reports allocation.
func (d *metered) Allocated(ctx context.Context, off, n int64) ([]blockdev.Extent, error) {
	if err := d.gate(); err != nil {
		return nil, err
	}
	if r, ok := d.dev.(blockdev.AllocationReporter); ok {
		return r.Allocated(ctx, off, n)
	}
	return []blockdev.Extent{{Off: off, Len: n}}, nil
}

// ZeroIsFast passes the volume's answer through (false once fenced, or for a
// device that cannot say).
func (d *metered) ZeroIsFast(off, n int64, mayTrim bool) bool {
	z, ok := d.dev.(blockdev.FastZeroer)
	return ok && d.gate() == nil && z.ZeroIsFast(off, n, mayTrim)
}
