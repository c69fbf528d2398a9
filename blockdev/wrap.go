package blockdev

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// This file is the decorator kit: Passthrough, the base every wrapper
// embeds so that the optional capabilities pass through in one place, and
// the wrappers built on it (Fence, Meter), a Swappable device and a Failing
// one.

// Passthrough is the base of a device wrapper: it forwards every Device call
// and every optional capability (FUAWriter, AllocationReporter, FastZeroer,
// OptimalIO, Synchronous) to Device, answering as Device does:
//   - WriteAtFUA uses Device's FUA, or WriteAt plus Flush (WriteFUA);
//   - Allocated reports everything allocated when Device cannot say;
//   - ZeroIsFast is false when Device cannot say;
//   - OptimalIOSize is 0 and Synchronous false when Device has none.
//
// A wrapper embeds Passthrough and overrides the calls it changes. One that
// intercepts writes overrides WriteAtFUA too (Passthrough's goes straight to
// Device); one that may wait (a delay, a gate) overrides Synchronous to say
// false.
type Passthrough struct {
	Device
}

var (
	_ Device             = Passthrough{}
	_ FUAWriter          = Passthrough{}
	_ AllocationReporter = Passthrough{}
	_ FastZeroer         = Passthrough{}
	_ OptimalIO          = Passthrough{}
	_ Synchronous        = Passthrough{}
)

// WriteAtFUA writes through Device's FUA capability, or WriteAt plus Flush.
func (p Passthrough) WriteAtFUA(ctx context.Context, b []byte, off int64) error {
	return WriteFUA(ctx, p.Device, b, off)
}

// Allocated passes through when Device reports allocation and reports the
// whole range allocated otherwise.
func (p Passthrough) Allocated(ctx context.Context, off, n int64) ([]Extent, error) {
	if r, ok := p.Device.(AllocationReporter); ok {
		return r.Allocated(ctx, off, n)
	}
	return []Extent{{Off: off, Len: n}}, nil
}

// ZeroIsFast passes Device's answer through (false when it cannot tell).
func (p Passthrough) ZeroIsFast(off, n int64, mayTrim bool) bool {
	z, ok := p.Device.(FastZeroer)
	return ok && z.ZeroIsFast(off, n, mayTrim)
}

// OptimalIOSize passes Device's through (0 when it has none).
func (p Passthrough) OptimalIOSize() int { return OptimalIOSize(p.Device) }

// Synchronous passes Device's through.
func (p Passthrough) Synchronous() bool { return IsSynchronous(p.Device) }

// Failing is a device on which every call (Allocated too) fails with one
// error: a namespace that cannot be reached (class ErrUnavailable), a volume
// that is fenced. Size and BlockSize answer as given; Close does nothing.
type Failing struct {
	err       error
	size      int64
	blockSize int
}

var (
	_ Device             = Failing{}
	_ AllocationReporter = Failing{}
)

// NewFailing returns a device of size bytes and blockSize-byte blocks on
// which every call fails with err (which should carry a class).
func NewFailing(size int64, blockSize int, err error) Failing {
	return Failing{err: err, size: size, blockSize: blockSize}
}

func (f Failing) ReadAt(context.Context, []byte, int64) error     { return f.err }
func (f Failing) WriteAt(context.Context, []byte, int64) error    { return f.err }
func (f Failing) Flush(context.Context) error                     { return f.err }
func (f Failing) WriteZeroes(context.Context, int64, int64) error { return f.err }
func (f Failing) Trim(context.Context, int64, int64) error        { return f.err }
func (f Failing) Allocated(context.Context, int64, int64) ([]Extent, error) {
	return nil, f.err
}
func (f Failing) Size() int64    { return f.size }
func (f Failing) BlockSize() int { return f.blockSize }
func (f Failing) Close() error   { return nil }

// Swappable is a device whose backing device can be replaced while IO runs:
// a namespace that could not be connected yet serves from a Failing stand-in
// until the connected device is swapped in. Each call goes to the device
// current when it starts. Size and BlockSize are those given to
// NewSwappable (or Resize), whatever the device behind. It is never Synchronous (the
// device behind may change to one that waits); the other capabilities are
// the current device's (see Passthrough). Close closes the current device.
type Swappable struct {
	size      atomic.Int64
	blockSize int
	cur       atomic.Pointer[Device]
}

var (
	_ Device             = (*Swappable)(nil)
	_ FUAWriter          = (*Swappable)(nil)
	_ AllocationReporter = (*Swappable)(nil)
	_ FastZeroer         = (*Swappable)(nil)
	_ OptimalIO          = (*Swappable)(nil)
)

// NewSwappable returns a Swappable of size bytes and blockSize-byte blocks
// serving from d.
func NewSwappable(size int64, blockSize int, d Device) *Swappable {
	s := &Swappable{blockSize: blockSize}
	s.size.Store(size)
	s.cur.Store(&d)
	return s
}

// Resize makes s answer size from now on (the device behind grew).
func (s *Swappable) Resize(size int64) { s.size.Store(size) }

// Swap makes d the device behind s and returns the one it replaces (which
// the caller closes when it should be).
func (s *Swappable) Swap(d Device) Device { return *s.cur.Swap(&d) }

// Current returns the device behind s.
func (s *Swappable) Current() Device { return *s.cur.Load() }

func (s *Swappable) pass() Passthrough { return Passthrough{*s.cur.Load()} }

func (s *Swappable) ReadAt(ctx context.Context, p []byte, off int64) error {
	return s.pass().ReadAt(ctx, p, off)
}
func (s *Swappable) WriteAt(ctx context.Context, p []byte, off int64) error {
	return s.pass().WriteAt(ctx, p, off)
}
func (s *Swappable) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	return s.pass().WriteAtFUA(ctx, p, off)
}
func (s *Swappable) Flush(ctx context.Context) error { return s.pass().Flush(ctx) }
func (s *Swappable) WriteZeroes(ctx context.Context, off, n int64) error {
	return s.pass().WriteZeroes(ctx, off, n)
}
func (s *Swappable) Trim(ctx context.Context, off, n int64) error { return s.pass().Trim(ctx, off, n) }
func (s *Swappable) Allocated(ctx context.Context, off, n int64) ([]Extent, error) {
	return s.pass().Allocated(ctx, off, n)
}
func (s *Swappable) ZeroIsFast(off, n int64, mayTrim bool) bool {
	return s.pass().ZeroIsFast(off, n, mayTrim)
}
func (s *Swappable) OptimalIOSize() int { return s.pass().OptimalIOSize() }
func (s *Swappable) Size() int64        { return s.size.Load() }
func (s *Swappable) BlockSize() int     { return s.blockSize }
func (s *Swappable) Close() error       { return s.pass().Close() }

// Fence wraps a device that a client may stop being allowed to use (lost
// ownership): once Fence is called, every call fails with the fencing
// error, class ErrFenced, before it reaches the device. A read (or an
// allocation report) that completes once the device is fenced fails too,
// with its buffer zeroed: the bytes may have been read after the client
// lost the right to them. The check is one atomic load; the capabilities
// pass through (ZeroIsFast says false once fenced).
//
// A fence over a lease (NewLeaseFence) also fences itself the first time
// the lease is not certainly held.
type Fence struct {
	Passthrough
	err   atomic.Pointer[error]
	valid func() error // the lease, or nil
}

var (
	_ Device             = (*Fence)(nil)
	_ FUAWriter          = (*Fence)(nil)
	_ AllocationReporter = (*Fence)(nil)
	_ FastZeroer         = (*Fence)(nil)
	_ OptimalIO          = (*Fence)(nil)
	_ Synchronous        = (*Fence)(nil)
)

// NewFence wraps d, not fenced.
func NewFence(d Device) *Fence { return &Fence{Passthrough: Passthrough{d}} }

// NewLeaseFence wraps d under a lease: valid returns nil while the client
// certainly still holds it (meta.Owner.Valid) and an error from the moment
// it may not. valid is asked before every call but a read, and after every
// read and allocation report, so a read that was issued in time but completes
// late (the process was paused with it in flight, its lease ran out, and
// the slot read may since belong to someone else) fails with ErrFenced
// instead of returning its bytes. The first error fences the device for
// good, as Fence does. valid must be cheap: it runs once per read.
func NewLeaseFence(d Device, valid func() error) *Fence {
	return &Fence{Passthrough: Passthrough{d}, valid: valid}
}

// Fence makes every later call fail with err, marked ErrFenced (say why:
// "ownership lost: ..."). The first error stays.
func (f *Fence) Fence(err error) {
	err = Mark(err, ErrFenced)
	f.err.CompareAndSwap(nil, &err)
}

// Fenced returns the fencing error, or nil while the device may be used.
func (f *Fence) Fenced() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	if f.valid == nil {
		return nil
	}
	if err := f.valid(); err != nil {
		f.Fence(err)
		return f.Fenced()
	}
	return nil
}

// ReadAt reads unless already fenced, then checks again (the lease too):
// the check after the read is the one that matters, and the only lease
// check a read pays for.
func (f *Fence) ReadAt(ctx context.Context, p []byte, off int64) error {
	if e := f.err.Load(); e != nil {
		return *e
	}
	if err := f.Device.ReadAt(ctx, p, off); err != nil {
		return err
	}
	if err := f.Fenced(); err != nil {
		clear(p) // read too late: never hand out its bytes
		return err
	}
	return nil
}

func (f *Fence) WriteAt(ctx context.Context, p []byte, off int64) error {
	if err := f.Fenced(); err != nil {
		return err
	}
	return f.Device.WriteAt(ctx, p, off)
}

func (f *Fence) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	if err := f.Fenced(); err != nil {
		return err
	}
	return f.Passthrough.WriteAtFUA(ctx, p, off)
}

func (f *Fence) Flush(ctx context.Context) error {
	if err := f.Fenced(); err != nil {
		return err
	}
	return f.Device.Flush(ctx)
}

func (f *Fence) WriteZeroes(ctx context.Context, off, n int64) error {
	if err := f.Fenced(); err != nil {
		return err
	}
	return f.Device.WriteZeroes(ctx, off, n)
}

func (f *Fence) Trim(ctx context.Context, off, n int64) error {
	if err := f.Fenced(); err != nil {
		return err
	}
	return f.Device.Trim(ctx, off, n)
}

func (f *Fence) Allocated(ctx context.Context, off, n int64) ([]Extent, error) {
	if err := f.Fenced(); err != nil {
		return nil, err
	}
	ext, err := f.Passthrough.Allocated(ctx, off, n)
	if err == nil {
		err = f.Fenced()
	}
	if err != nil {
		return nil, err
	}
	return ext, nil
}

func (f *Fence) ZeroIsFast(off, n int64, mayTrim bool) bool {
	return f.Fenced() == nil && f.Passthrough.ZeroIsFast(off, n, mayTrim)
}

// Op names the IO call a Meter observes.
type Op int

// The calls a Meter observes. A write with FUA is OpWrite.
const (
	OpRead Op = iota
	OpWrite
	OpFlush
	OpWriteZeroes
	OpTrim
	NumOps // the number of Ops, for arrays indexed by Op
)

// String returns the op's name as metrics label it: read, write, flush,
// write_zeroes, trim.
func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpFlush:
		return "flush"
	case OpWriteZeroes:
		return "write_zeroes"
	case OpTrim:
		return "trim"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Observer receives each call through a Meter once it returns: the call,
// the bytes it moved (reads and writes; 0 otherwise), how long it took and
// its error. It runs on the caller's goroutine, so it must not wait.
type Observer func(op Op, bytes int64, latency time.Duration, err error)

// Meter wraps a device and counts what passes through it, for throughput
// displays and the counters of a mapping: bytes and calls of reads and
// writes (bytes only of those that succeeded) and failed calls of any kind.
// An Observer, when given, also sees every call with its latency (for
// metrics, or a pacer that slows down when foreground IO suffers).
// Metering does not wait: the capabilities pass through, Synchronous too.
type Meter struct {
	Passthrough
	ReadBytes, WriteBytes, Reads, Writes, Errors atomic.Int64
	observe                                      Observer
}

var (
	_ Device             = (*Meter)(nil)
	_ FUAWriter          = (*Meter)(nil)
	_ AllocationReporter = (*Meter)(nil)
	_ FastZeroer         = (*Meter)(nil)
	_ OptimalIO          = (*Meter)(nil)
	_ Synchronous        = (*Meter)(nil)
)

// NewMeter wraps d; observe may be nil.
func NewMeter(d Device, observe Observer) *Meter {
	return &Meter{Passthrough: Passthrough{d}, observe: observe}
}

// start returns the time a call starts when it is observed.
func (m *Meter) start() time.Time {
	if m.observe == nil {
		return time.Time{}
	}
	return time.Now()
}

// done counts one call of op that moved n bytes (on success) and returns
// its error.
func (m *Meter) done(op Op, n int64, start time.Time, err error) error {
	switch op {
	case OpRead:
		m.counted(&m.Reads, &m.ReadBytes, n, err)
	case OpWrite:
		m.counted(&m.Writes, &m.WriteBytes, n, err)
	}
	if err != nil {
		m.Errors.Add(1)
	}
	if m.observe != nil {
		m.observe(op, n, time.Since(start), err)
	}
	return err
}

func (m *Meter) counted(calls, bytes *atomic.Int64, n int64, err error) {
	calls.Add(1)
	if err == nil {
		bytes.Add(n)
	}
}

func (m *Meter) ReadAt(ctx context.Context, p []byte, off int64) error {
	t := m.start()
	return m.done(OpRead, int64(len(p)), t, m.Device.ReadAt(ctx, p, off))
}

func (m *Meter) WriteAt(ctx context.Context, p []byte, off int64) error {
	t := m.start()
	return m.done(OpWrite, int64(len(p)), t, m.Device.WriteAt(ctx, p, off))
}

func (m *Meter) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	t := m.start()
	return m.done(OpWrite, int64(len(p)), t, m.Passthrough.WriteAtFUA(ctx, p, off))
}

func (m *Meter) Flush(ctx context.Context) error {
	t := m.start()
	return m.done(OpFlush, 0, t, m.Device.Flush(ctx))
}

func (m *Meter) WriteZeroes(ctx context.Context, off, n int64) error {
	t := m.start()
	return m.done(OpWriteZeroes, 0, t, m.Device.WriteZeroes(ctx, off, n))
}

func (m *Meter) Trim(ctx context.Context, off, n int64) error {
	t := m.start()
	return m.done(OpTrim, 0, t, m.Device.Trim(ctx, off, n))
}
