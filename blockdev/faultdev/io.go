package faultdev

import (
	"context"
	"fmt"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/retry"
)

// call describes one request reaching the wrapper.
type call struct {
	op     Op
	fua    bool
	off, n int64
}

// plan is what the rules decided for a call.
type plan struct {
	delay   time.Duration
	err     error // non-nil: fail the call (after tearing, when tear >= 0)
	tear    int64 // blocks of a torn write to pass on; -1: none
	flipBit int64 // bit of a read result to flip; -1: none
	drop    bool  // report success without passing the call on
}

func (r *rule) matches(c call) bool {
	ops := r.Ops
	if ops == 0 {
		ops = OpAll
	}
	if ops&c.op == 0 || (r.Action == Corrupt && c.op != OpRead) || (r.Action == Drop && c.op == OpRead) {
		return false
	}
	if r.Len == 0 {
		return true
	}
	return c.op != OpFlush && c.off < r.Off+r.Len && r.Off < c.off+c.n
}

// countLocked adds c to the statistics. REQUIRES: d.mu held.
func (d *Dev) countLocked(c call) {
	s := &d.stats
	switch c.op {
	case OpRead:
		s.Reads++
		s.ReadBytes += c.n
	case OpWrite:
		s.Writes++
		s.WriteBytes += c.n
		if c.fua {
			s.FUAWrites++
		}
	case OpFlush:
		s.Flushes++
	case OpWriteZeroes:
		s.WriteZeroes++
	case OpTrim:
		s.Trims++
	}
}

// decide counts c and runs the rules over it.
func (d *Dev) decide(c call) plan {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.countLocked(c)
	pl := plan{tear: -1, flipBit: -1}
	if d.down.Load() {
		d.stats.Injected++
		pl.err = fmt.Errorf("faultdev: %s at off=%d len=%d: device set down: %w", c.op, c.off, c.n, blockdev.ErrUnavailable)
		return pl
	}
	if blockdev.CheckRange(d.inner.Size(), d.inner.BlockSize(), c.off, c.n) != nil {
		return pl // the wrapped device reports the bad request
	}
	for _, r := range d.rules {
		if !d.triggerLocked(r, c) {
			continue
		}
		if d.applyLocked(r, c, &pl) {
			break
		}
	}
	return pl
}

// triggerLocked reports whether r fires on c, counting the match and the
// firing. REQUIRES: d.mu held.
func (d *Dev) triggerLocked(r *rule, c call) bool {
	if !r.matches(c) {
		return false
	}
	r.matched++
	if r.matched <= r.After || (r.Times > 0 && r.fired >= r.Times) {
		return false
	}
	if r.Prob > 0 && r.Prob < 1 && d.rng.Float64() >= r.Prob {
		return false
	}
	r.fired++
	return true
}

// applyLocked adds the effect of fired rule r to pl and reports whether the
// call is now failing (no later rule matters). REQUIRES: d.mu held.
func (d *Dev) applyLocked(r *rule, c call, pl *plan) bool {
	switch r.Action {
	case Delay:
		pl.delay += r.Latency
		return false
	case Corrupt:
		if c.n > 0 && pl.flipBit < 0 {
			d.stats.Injected++
			pl.flipBit = d.rng.Int63n(c.n * 8)
		}
		return false
	case Drop:
		d.stats.Injected++
		pl.drop = true
		return true
	}
	d.stats.Injected++
	cause := r.Err
	if cause == nil {
		cause = blockdev.ErrUnavailable
	}
	what := "error"
	if blocks := c.n / int64(d.inner.BlockSize()); r.Action == Tear && c.op == OpWrite && blocks > 0 {
		pl.tear = d.rng.Int63n(blocks)
		what = fmt.Sprintf("torn write (%d of %d blocks written)", pl.tear, blocks)
	}
	pl.err = fmt.Errorf("faultdev: injected %s on %s at off=%d len=%d: %w", what, c.op, c.off, c.n, cause)
	return true
}

// wait sleeps for d, or until ctx is done.
func wait(ctx context.Context, d time.Duration) error {
	if err := retry.Sleep(ctx, d); err != nil {
		return fmt.Errorf("faultdev: delayed call: %w", err)
	}
	return nil
}

// run decides c and performs it with do, unless the plan fails it first.
func (d *Dev) run(ctx context.Context, c call, do func() error) (plan, error) {
	pl := d.decide(c)
	if err := wait(ctx, pl.delay); err != nil {
		return pl, err
	}
	if pl.err != nil {
		return pl, pl.err
	}
	if pl.drop {
		return pl, nil
	}
	return pl, do()
}

func (d *Dev) ReadAt(ctx context.Context, p []byte, off int64) error {
	pl, err := d.run(ctx, call{op: OpRead, off: off, n: int64(len(p))}, func() error {
		return d.inner.ReadAt(ctx, p, off)
	})
	if err == nil && pl.flipBit >= 0 {
		p[pl.flipBit/8] ^= 1 << (pl.flipBit % 8)
	}
	return err
}

func (d *Dev) WriteAt(ctx context.Context, p []byte, off int64) error {
	return d.write(ctx, p, off, false)
}

// WriteAtFUA passes an FUA write on with blockdev.WriteFUA.
func (d *Dev) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	return d.write(ctx, p, off, true)
}

func (d *Dev) write(ctx context.Context, p []byte, off int64, fua bool) error {
	inner := d.inner.WriteAt
	if fua {
		inner = func(ctx context.Context, p []byte, off int64) error {
			return blockdev.WriteFUA(ctx, d.inner, p, off)
		}
	}
	pl, err := d.run(ctx, call{op: OpWrite, fua: fua, off: off, n: int64(len(p))}, func() error {
		return inner(ctx, p, off)
	})
	if pl.tear > 0 && pl.err != nil && err == pl.err {
		if terr := inner(ctx, p[:pl.tear*int64(d.inner.BlockSize())], off); terr != nil {
			return fmt.Errorf("%w (tearing failed too: %w)", err, terr)
		}
	}
	return err
}

func (d *Dev) Flush(ctx context.Context) error {
	_, err := d.run(ctx, call{op: OpFlush}, func() error { return d.inner.Flush(ctx) })
	return err
}

func (d *Dev) WriteZeroes(ctx context.Context, off, n int64) error {
	_, err := d.run(ctx, call{op: OpWriteZeroes, off: off, n: n}, func() error {
		return d.inner.WriteZeroes(ctx, off, n)
	})
	return err
}

func (d *Dev) Trim(ctx context.Context, off, n int64) error {
	_, err := d.run(ctx, call{op: OpTrim, off: off, n: n}, func() error {
		return d.inner.Trim(ctx, off, n)
	})
	return err
}

// Allocated passes through to the wrapped device when it reports allocation,
// and reports the whole range otherwise. No rule applies to it; it fails
// while the device is down.
func (d *Dev) Allocated(ctx context.Context, off, n int64) ([]blockdev.Extent, error) {
	if d.down.Load() {
		return nil, fmt.Errorf("faultdev: allocated: device set down: %w", blockdev.ErrUnavailable)
	}
	if r, ok := d.inner.(blockdev.AllocationReporter); ok {
		return r.Allocated(ctx, off, n)
	}
	if err := blockdev.CheckRange(d.inner.Size(), d.inner.BlockSize(), off, n); err != nil {
		return nil, fmt.Errorf("faultdev: %w", err)
	}
	return []blockdev.Extent{{Off: off, Len: n}}, nil
}
