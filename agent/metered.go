package agent

import (
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

// observe records one call in the metrics.
func (om *opMeter) observe(n int64, lat time.Duration, err error) {
	om.lat.Observe(lat.Seconds())
	om.ops.Inc()
	if err != nil {
		om.errs.Inc()
	} else if n > 0 {
		om.bytes.Add(float64(n))
	}
}

// servedDev is the device a mapping serves: the volume behind a fence (once
// ownership is lost every call fails with blockdev.ErrFenced before it
// reaches the volume), the fence in a swappable slot (a mapping that takes
// its volume again serves the new one behind a new fence, through the same
// frontend), all inside a meter (Prometheus metrics and the counters of
// List; calls refused by the fence count as failed).
type servedDev struct {
	*blockdev.Meter
	slot  *blockdev.Swappable
	fence atomic.Pointer[blockdev.Fence]
}

// sameKind is a Swappable whose devices are all of one kind: it is
// Synchronous when the first was (a Swappable alone never is).
type sameKind struct {
	*blockdev.Swappable
	sync bool
}

func (k sameKind) Synchronous() bool { return k.sync }

// newServed wraps the volume dev of mapping volume; latency, when set,
// receives the latency of every read and write (the pacer of shard moves
// slows down when foreground IO suffers).
func newServed(dev blockdev.Device, m *Metrics, volume string, latency func(time.Duration)) *servedDev {
	var ops [blockdev.NumOps]opMeter
	for op := range blockdev.NumOps {
		ops[op] = newOpMeter(m, volume, op.String())
	}
	d := &servedDev{}
	fence := blockdev.NewFence(dev)
	d.fence.Store(fence)
	d.slot = blockdev.NewSwappable(dev.Size(), dev.BlockSize(), fence)
	d.Meter = blockdev.NewMeter(sameKind{d.slot, blockdev.IsSynchronous(dev)}, func(op blockdev.Op, n int64, lat time.Duration, err error) {
		ops[op].observe(n, lat, err)
		if latency != nil && (op == blockdev.OpRead || op == blockdev.OpWrite) {
			latency(lat)
		}
	})
	return d
}

// fenceLost makes every later call fail with ErrFenced, citing cause.
func (d *servedDev) fenceLost(cause error) {
	d.fence.Load().Fence(fmt.Errorf("ownership lost, volume fenced: %w", cause))
}

// serveAgain serves dev (the volume opened again) from now on.
func (d *servedDev) serveAgain(dev blockdev.Device) {
	f := blockdev.NewFence(dev)
	d.fence.Store(f)
	d.slot.Swap(f)
}

// Close does nothing: the mapping closes the volume itself.
func (d *servedDev) Close() error { return nil }
