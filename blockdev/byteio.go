package blockdev

import (
	"context"
	"sync"
)

// ByteIO gives byte-granular access to a Device for servers whose clients
// may send requests smaller than, or not aligned to, the device's block
// size (NBD clients at 512 bytes, the kernel's FUSE requests). Aligned
// requests go straight through; others read the blocks they cover partly,
// patch them and write them back (read-modify-write). A read-modify-write
// holds an exclusive lock and aligned writes hold it shared, so no write is
// lost to a concurrent patch of the same block. Share one ByteIO between all
// the servers of one device for that guarantee to hold across them.
//
// A ByteIO is safe for concurrent use.
type ByteIO struct {
	dev  Device
	bs   int64
	rmw  sync.RWMutex
	pool sync.Pool // *[]byte scratch buffers
}

// NewByteIO returns byte-granular access to dev.
func NewByteIO(dev Device) *ByteIO {
	return &ByteIO{dev: dev, bs: int64(dev.BlockSize())}
}

// Device returns the underlying device.
func (b *ByteIO) Device() Device { return b.dev }

// Aligned reports whether [off, off+n) is aligned to the device's blocks.
func (b *ByteIO) Aligned(off, n int64) bool { return off%b.bs == 0 && n%b.bs == 0 }

// Span returns the block-aligned range covering [off, off+n).
func (b *ByteIO) Span(off, n int64) (start, length int64) {
	start = off - off%b.bs
	end := (off + n + b.bs - 1) / b.bs * b.bs
	return start, end - start
}

// inner returns the block-aligned range inside [off, off+n) (empty when
// in0 >= in1).
func (b *ByteIO) inner(off, n int64) (in0, in1 int64) {
	return (off + b.bs - 1) / b.bs * b.bs, (off + n) / b.bs * b.bs
}

func (b *ByteIO) scratch(n int64) *[]byte {
	if p, ok := b.pool.Get().(*[]byte); ok && int64(cap(*p)) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]byte, n, max(n, 1<<20))
	return &s
}

// ReadAt fills p from off.
func (b *ByteIO) ReadAt(ctx context.Context, p []byte, off int64) error {
	if b.Aligned(off, int64(len(p))) {
		return b.dev.ReadAt(ctx, p, off)
	}
	start, n := b.Span(off, int64(len(p)))
	tmp := b.scratch(n)
	defer b.pool.Put(tmp)
	if err := b.dev.ReadAt(ctx, *tmp, start); err != nil {
		return err
	}
	copy(p, (*tmp)[off-start:])
	return nil
}

// WriteAt writes p at off, durably (FUA) when fua.
func (b *ByteIO) WriteAt(ctx context.Context, p []byte, off int64, fua bool) error {
	put := func(q []byte, at int64) error {
		if fua {
			return WriteFUA(ctx, b.dev, q, at)
		}
		return b.dev.WriteAt(ctx, q, at)
	}
	if b.Aligned(off, int64(len(p))) {
		b.rmw.RLock()
		defer b.rmw.RUnlock()
		return put(p, off)
	}
	return b.patch(ctx, off, int64(len(p)), func(q []byte) { copy(q, p) }, put)
}

// patch read-modify-writes the blocks covering [off, off+n): fill patches
// the bytes of the range, put writes the blocks back.
func (b *ByteIO) patch(ctx context.Context, off, n int64, fill func([]byte), put func([]byte, int64) error) error {
	b.rmw.Lock()
	defer b.rmw.Unlock()
	start, sn := b.Span(off, n)
	tmp := b.scratch(sn)
	defer b.pool.Put(tmp)
	buf := *tmp
	if err := b.dev.ReadAt(ctx, buf, start); err != nil {
		return err
	}
	fill(buf[off-start : off-start+n])
	return put(buf, start)
}

// Zero makes [off, off+n) read as zeros: the whole blocks inside it by Trim
// (or WriteZeroes when keep, to keep them allocated), the partly covered
// blocks at its edges by read-modify-write.
func (b *ByteIO) Zero(ctx context.Context, off, n int64, keep bool) error {
	in0, in1 := b.inner(off, n)
	put := func(q []byte, at int64) error { return b.dev.WriteAt(ctx, q, at) }
	fill := func(q []byte) { clear(q) }
	if in0 >= in1 {
		return b.patch(ctx, off, n, fill, put)
	}
	if off < in0 {
		if err := b.patch(ctx, off, in0-off, fill, put); err != nil {
			return err
		}
	}
	if off+n > in1 {
		if err := b.patch(ctx, in1, off+n-in1, fill, put); err != nil {
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

// TrimInner discards the whole blocks inside [off, off+n); partly covered
// blocks are left alone (a discard is a hint).
func (b *ByteIO) TrimInner(ctx context.Context, off, n int64) error {
	in0, in1 := b.inner(off, n)
	if in0 >= in1 {
		return nil
	}
	b.rmw.RLock()
	defer b.rmw.RUnlock()
	return b.dev.Trim(ctx, in0, in1-in0)
}
