package blockdev

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Window is a view of the range [Base, Base+Len) of a parent device, like
// io.SectionReader: offset 0 of the window is Base of the parent. It is how a
// volume addresses one slot of a namespace. Closing a Window does not close
// the parent.
type Window struct {
	parent Device
	base   int64
	size   int64
	closed atomic.Bool
}

var (
	_ Device             = (*Window)(nil)
	_ FUAWriter          = (*Window)(nil)
	_ AllocationReporter = (*Window)(nil)
)

// NewWindow returns the view of [base, base+size) of parent. base and size must
// be aligned to the parent's block size and lie inside it.
func NewWindow(parent Device, base, size int64) (*Window, error) {
	if err := CheckRange(parent.Size(), parent.BlockSize(), base, size); err != nil {
		return nil, fmt.Errorf("window: %w", err)
	}
	return &Window{parent: parent, base: base, size: size}, nil
}

// Parent returns the device the window looks into.
func (w *Window) Parent() Device { return w.parent }

// Base returns the window's offset in its parent.
func (w *Window) Base() int64 { return w.base }

func (w *Window) check(off, n int64) error {
	if w.closed.Load() {
		return fmt.Errorf("window: closed: %w", ErrUnavailable)
	}
	return CheckRange(w.size, w.parent.BlockSize(), off, n)
}

func (w *Window) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := w.check(off, int64(len(p))); err != nil {
		return err
	}
	return w.parent.ReadAt(ctx, p, w.base+off)
}

func (w *Window) WriteAt(ctx context.Context, p []byte, off int64) error {
	if err := w.check(off, int64(len(p))); err != nil {
		return err
	}
	return w.parent.WriteAt(ctx, p, w.base+off)
}

func (w *Window) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	if err := w.check(off, int64(len(p))); err != nil {
		return err
	}
	return WriteFUA(ctx, w.parent, p, w.base+off)
}

func (w *Window) Flush(ctx context.Context) error {
	if err := w.check(0, 0); err != nil {
		return err
	}
	return w.parent.Flush(ctx)
}

func (w *Window) WriteZeroes(ctx context.Context, off, n int64) error {
	if err := w.check(off, n); err != nil {
		return err
	}
	return w.parent.WriteZeroes(ctx, w.base+off, n)
}

func (w *Window) Trim(ctx context.Context, off, n int64) error {
	if err := w.check(off, n); err != nil {
		return err
	}
	return w.parent.Trim(ctx, w.base+off, n)
}

// Allocated reports allocation through the parent when it can, and the whole
// range as allocated otherwise.
func (w *Window) Allocated(ctx context.Context, off, n int64) ([]Extent, error) {
	if err := w.check(off, n); err != nil {
		return nil, err
	}
	r, ok := w.parent.(AllocationReporter)
	if !ok {
		return []Extent{{Off: off, Len: n}}, nil
	}
	ext, err := r.Allocated(ctx, w.base+off, n)
	for i := range ext {
		ext[i].Off -= w.base
	}
	return ext, err
}

func (w *Window) Size() int64    { return w.size }
func (w *Window) BlockSize() int { return w.parent.BlockSize() }

// Close makes later calls on the window fail with ErrUnavailable; the parent
// stays open.
func (w *Window) Close() error {
	w.closed.Store(true)
	return nil
}
