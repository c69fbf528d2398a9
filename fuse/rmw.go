package fuse

import (
	"context"
	"sync"

	"github.com/nvstripe/nvstripe/blockdev"
)

// blockIO does byte-granular IO on a block device: requests aligned to the
// device's block size go straight through under rmw held shared; others
// read the blocks they cover partly, patch them and write them back under
// rmw held exclusively, so no write is lost to a concurrent patch of the
// same block.
type blockIO struct {
	dev  blockdev.Device
	bs   int64
	pool sync.Pool // *[]byte scratch buffers
	rmw  sync.RWMutex
}

func newBlockIO(dev blockdev.Device) *blockIO {
	return &blockIO{dev: dev, bs: int64(dev.BlockSize())}
}

func (b *blockIO) aligned(off, n int64) bool { return off%b.bs == 0 && n%b.bs == 0 }

// span returns the block-aligned range covering [off, off+n).
func (b *blockIO) span(off, n int64) (int64, int64) {
	start := off - off%b.bs
	end := (off + n + b.bs - 1) / b.bs * b.bs
	return start, end - start
}

func (b *blockIO) scratch(n int64) *[]byte {
	if p, ok := b.pool.Get().(*[]byte); ok && int64(cap(*p)) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]byte, n, max(n, 1<<20))
	return &s
}

// read fills p from off.
func (b *blockIO) read(ctx context.Context, p []byte, off int64) error {
	if b.aligned(off, int64(len(p))) {
		return b.dev.ReadAt(ctx, p, off)
	}
	start, n := b.span(off, int64(len(p)))
	tmp := b.scratch(n)
	defer b.pool.Put(tmp)
	if err := b.dev.ReadAt(ctx, *tmp, start); err != nil {
		return err
	}
	copy(p, (*tmp)[off-start:])
	return nil
}

// write writes p at off.
func (b *blockIO) write(ctx context.Context, p []byte, off int64) error {
	if b.aligned(off, int64(len(p))) {
		b.rmw.RLock()
		defer b.rmw.RUnlock()
		return b.dev.WriteAt(ctx, p, off)
	}
	return b.patch(ctx, off, int64(len(p)), func(q []byte) { copy(q, p) })
}

// patch read-modify-writes the blocks covering [off, off+n).
func (b *blockIO) patch(ctx context.Context, off, n int64, fill func([]byte)) error {
	b.rmw.Lock()
	defer b.rmw.Unlock()
	start, sn := b.span(off, n)
	tmp := b.scratch(sn)
	defer b.pool.Put(tmp)
	buf := *tmp
	if err := b.dev.ReadAt(ctx, buf, start); err != nil {
		return err
	}
	fill(buf[off-start : off-start+n])
	return b.dev.WriteAt(ctx, buf, start)
}

// zero makes [off, off+n) read as zeros: whole blocks by Trim (or
// WriteZeroes when keep, to keep them allocated), partial blocks at the
// edges by read-modify-write.
func (b *blockIO) zero(ctx context.Context, off, n int64, keep bool) error {
	in0 := (off + b.bs - 1) / b.bs * b.bs
	in1 := (off + n) / b.bs * b.bs
	fill := func(q []byte) { clear(q) }
	if in0 >= in1 {
		return b.patch(ctx, off, n, fill)
	}
	if off < in0 {
		if err := b.patch(ctx, off, in0-off, fill); err != nil {
			return err
		}
	}
	if off+n > in1 {
		if err := b.patch(ctx, in1, off+n-in1, fill); err != nil {
			return err
		}
	}
	b.rmw.RLock()
	defer b.rmw.RUnlock()
	if keep {
		return b.dev.WriteZeroes(ctx, in0, in1-in0)
	}
	return b.dev.Trim(ctx, in0, in1-in0)
}
