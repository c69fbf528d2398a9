package nbd

import (
	"context"
	"sync"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// FastZeroer is an optional capability of a served Device: ZeroIsFast
// reports whether making [off, off+n) read as zeros (by Trim when mayTrim,
// else by WriteZeroes) is much cheaper than writing zeros. The server asks
// it for NBD_CMD_WRITE_ZEROES with NBD_CMD_FLAG_FAST_ZERO; a Device without
// it gets ENOTSUP for such requests.
type FastZeroer interface {
	ZeroIsFast(off, n int64, mayTrim bool) bool
}

// minBlock is the minimum block size the server advertises and the
// alignment every request must have.
const minBlock = 512

// export is the served state of one Export, shared by all its connections.
type export struct {
	name string
	Export
	bio *blockIO
	// conns counts the connections in transmission on this export.
	conns sync.WaitGroup
	// ctx is cancelled when the export is removed; its connections end.
	ctx    context.Context
	cancel context.CancelFunc
	// gone is set (REQUIRES: Server.mu held) once the export is removed.
	gone bool
}

func newExport(name string, e Export, bufs *bufPool) *export {
	x := &export{name: name, Export: e, bio: newBlockIO(e.Device, bufs)}
	x.ctx, x.cancel = context.WithCancel(context.Background())
	return x
}

// closeLocked marks the export removed and ends its connections.
// REQUIRES: Server.mu held.
func (e *export) closeLocked() {
	e.gone = true
	e.cancel()
}

// flags returns the transmission flags of the export.
func (e *export) flags(structured bool) proto.TransmissionFlags {
	f := proto.FlagHasFlags | proto.FlagSendFlush | proto.FlagCanMultiConn | proto.FlagSendCache
	if structured {
		f |= proto.FlagSendDF
	}
	if e.ReadOnly {
		return f | proto.FlagReadOnly
	}
	return f | proto.FlagSendFUA | proto.FlagSendTrim | proto.FlagSendWriteZeroes | proto.FlagSendFastZero
}

func (e *export) blockSize(maxRequest int) proto.BlockSize {
	return proto.BlockSize{
		Min:       minBlock,
		Preferred: uint32(max(4096, e.Device.BlockSize())),
		Max:       uint32(maxRequest),
	}
}

// blockIO does IO on a device at 512-byte granularity. A request that covers
// device blocks only partly is served by reading those blocks, patching them
// and writing them back (read-modify-write) while holding rmw exclusively;
// block-aligned writes hold rmw shared, so they run in parallel with each
// other but never interleave with a read-modify-write of the same block. On
// a 512-byte device everything is aligned and rmw is never taken.
type blockIO struct {
	dev  blockdev.Device
	bs   int64
	bufs *bufPool
	rmw  sync.RWMutex
}

func newBlockIO(dev blockdev.Device, bufs *bufPool) *blockIO {
	return &blockIO{dev: dev, bs: int64(dev.BlockSize()), bufs: bufs}
}

func (b *blockIO) aligned(off, n int64) bool { return off%b.bs == 0 && n%b.bs == 0 }

// span returns the device-aligned range covering [off, off+n).
func (b *blockIO) span(off, n int64) (int64, int64) {
	start := off - off%b.bs
	end := (off + n + b.bs - 1) / b.bs * b.bs
	return start, end - start
}

// read fills p from off.
func (b *blockIO) read(ctx context.Context, p []byte, off int64) error {
	if b.aligned(off, int64(len(p))) {
		return b.dev.ReadAt(ctx, p, off)
	}
	start, n := b.span(off, int64(len(p)))
	tmp := b.bufs.get(int(n))
	defer b.bufs.put(tmp)
	if err := b.dev.ReadAt(ctx, *tmp, start); err != nil {
		return err
	}
	copy(p, (*tmp)[off-start:])
	return nil
}

// write writes p at off, durably when fua.
func (b *blockIO) write(ctx context.Context, p []byte, off int64, fua bool) error {
	put := func(q []byte, at int64) error {
		if fua {
			return blockdev.WriteFUA(ctx, b.dev, q, at)
		}
		return b.dev.WriteAt(ctx, q, at)
	}
	if b.aligned(off, int64(len(p))) {
		if b.bs > minBlock {
			b.rmw.RLock()
			defer b.rmw.RUnlock()
		}
		return put(p, off)
	}
	return b.patch(ctx, off, int64(len(p)), func(buf []byte) { copy(buf, p) }, put)
}

// patch read-modify-writes the blocks covering [off, off+n): fill patches
// the bytes of the range, put writes the blocks back.
func (b *blockIO) patch(ctx context.Context, off, n int64, fill func([]byte), put func([]byte, int64) error) error {
	b.rmw.Lock()
	defer b.rmw.Unlock()
	start, sn := b.span(off, n)
	tmp := b.bufs.get(int(sn))
	defer b.bufs.put(tmp)
	buf := *tmp
	if err := b.dev.ReadAt(ctx, buf, start); err != nil {
		return err
	}
	fill(buf[off-start : off-start+n])
	return put(buf, start)
}

// zero makes [off, off+n) read as zeros: the whole device blocks inside it
// by Trim (or WriteZeroes when noHole), the partly covered blocks at its
// edges by read-modify-write.
func (b *blockIO) zero(ctx context.Context, off, n int64, noHole bool) error {
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
	if b.bs > minBlock {
		b.rmw.RLock()
		defer b.rmw.RUnlock()
	}
	if noHole {
		return b.dev.WriteZeroes(ctx, in0, in1-in0)
	}
	return b.dev.Trim(ctx, in0, in1-in0)
}

// trim discards the whole device blocks inside [off, off+n); a trim is a
// hint, so partly covered blocks are left alone.
func (b *blockIO) trim(ctx context.Context, off, n int64) error {
	in0, in1 := b.inner(off, n)
	if in0 >= in1 {
		return nil
	}
	if b.bs > minBlock {
		b.rmw.RLock()
		defer b.rmw.RUnlock()
	}
	return b.dev.Trim(ctx, in0, in1-in0)
}

// inner returns the device-aligned range inside [off, off+n) (empty when
// in0 >= in1).
func (b *blockIO) inner(off, n int64) (in0, in1 int64) {
	in0 = (off + b.bs - 1) / b.bs * b.bs
	in1 = (off + n) / b.bs * b.bs
	return in0, in1
}
