//go:build linux

package fuse

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/nvstripe/nvstripe/blockdev"
)

// fallocate(2) modes (linux/falloc.h).
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
	fallocZeroRange = 0x10
)

// fileNode is one device shown as a regular file.
type fileNode struct {
	fs.Inode
	dev  blockdev.Device
	bio  *blockdev.ByteIO
	name string
	opts *Options
	told int64 // the size the kernel was last told of (FS.Resized, under FS.mu)
}

var (
	_ = (fs.NodeGetattrer)((*fileNode)(nil))
	_ = (fs.NodeSetattrer)((*fileNode)(nil))
	_ = (fs.NodeOpener)((*fileNode)(nil))
	_ = (fs.NodeReader)((*fileNode)(nil))
	_ = (fs.NodeWriter)((*fileNode)(nil))
	_ = (fs.NodeFsyncer)((*fileNode)(nil))
	_ = (fs.NodeFlusher)((*fileNode)(nil))
	_ = (fs.NodeAllocater)((*fileNode)(nil))
)

func (f *fileNode) fillAttr(a *gofuse.Attr) {
	a.Mode = syscall.S_IFREG | 0o644
	if f.opts.ReadOnly {
		a.Mode = syscall.S_IFREG | 0o444
	}
	a.Size = uint64(f.dev.Size())
	a.Blocks = a.Size / 512
	// st_blksize is the IO size programs such as cp use: the device's
	// optimal IO size (a volume's full stripe) when it has one.
	a.Blksize = uint32(max(f.dev.BlockSize(), 4096, blockdev.OptimalIOSize(f.dev)))
	a.Nlink = 1
}

func (f *fileNode) Getattr(ctx context.Context, fh fs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	f.fillAttr(&out.Attr)
	return 0
}

// Setattr refuses size changes; other attributes (mode, times) are ignored.
func (f *fileNode) Setattr(ctx context.Context, fh fs.FileHandle, in *gofuse.SetAttrIn, out *gofuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok && int64(size) != f.dev.Size() {
		return syscall.EINVAL
	}
	f.fillAttr(&out.Attr)
	return 0
}

// Open opens for direct IO with parallel writes; no file handle is kept.
func (f *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if f.opts.ReadOnly && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EROFS
	}
	return nil, gofuse.FOPEN_DIRECT_IO | gofuse.FOPEN_PARALLEL_DIRECT_WRITES, 0
}

// Read reads up to len(dest) bytes at off; reads at or past the end return
// nothing (end of file).
func (f *fileNode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	size := f.dev.Size()
	if off < 0 {
		return nil, syscall.EINVAL
	}
	if off >= size {
		return gofuse.ReadResultData(nil), 0
	}
	p := dest[:min(int64(len(dest)), size-off)]
	if err := f.bio.ReadAt(ctx, p, off); err != nil {
		return nil, f.errno(err, "read", off, len(p))
	}
	return gofuse.ReadResultData(p), 0
}

// Write writes data at off; a write crossing the end is cut short, one at
// or past the end fails with ENOSPC.
func (f *fileNode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if f.opts.ReadOnly {
		return 0, syscall.EROFS
	}
	size := f.dev.Size()
	if off < 0 {
		return 0, syscall.EINVAL
	}
	if off >= size && len(data) > 0 {
		return 0, syscall.ENOSPC
	}
	p := data[:min(int64(len(data)), size-off)]
	if err := f.bio.WriteAt(ctx, p, off, false); err != nil {
		return 0, f.errno(err, "write", off, len(p))
	}
	return uint32(len(p)), 0
}

// Fsync makes every completed write durable (Device.Flush).
func (f *fileNode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if err := f.dev.Flush(ctx); err != nil {
		return f.errno(err, "flush", 0, 0)
	}
	return 0
}

// Flush (close(2)) needs no work: no data is cached here.
func (f *fileNode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

// Allocate implements fallocate: PUNCH_HOLE trims, ZERO_RANGE writes zeros,
// plain allocation inside the file is a no-op; the size never changes.
func (f *fileNode) Allocate(ctx context.Context, fh fs.FileHandle, off, n uint64, mode uint32) syscall.Errno {
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	size := uint64(f.dev.Size())
	if off > size || n > size-off {
		if mode&(fallocPunchHole|fallocKeepSize) == 0 {
			return syscall.EFBIG // would grow the file
		}
		n = size - min(off, size)
	}
	var err error
	switch mode &^ fallocKeepSize {
	case 0:
		return 0
	case fallocPunchHole:
		if mode&fallocKeepSize == 0 {
			return syscall.EINVAL // punch-hole requires keep-size
		}
		err = f.zero(ctx, int64(off), int64(n), false)
	case fallocZeroRange:
		err = f.zero(ctx, int64(off), int64(n), true)
	default:
		return syscall.EOPNOTSUPP
	}
	if err != nil {
		return f.errno(err, "fallocate", int64(off), int(n))
	}
	return 0
}

func (f *fileNode) zero(ctx context.Context, off, n int64, keep bool) error {
	if n == 0 {
		return nil
	}
	return f.bio.Zero(ctx, off, n, keep)
}

// errno maps a device error to the errno the kernel gets.
func (f *fileNode) errno(err error, op string, off int64, n int) syscall.Errno {
	switch {
	case errors.Is(err, blockdev.ErrFenced):
		return syscall.EPERM
	case errors.Is(err, blockdev.ErrNoSpace):
		return syscall.ENOSPC
	case errors.Is(err, blockdev.ErrOutOfRange):
		if op == "write" {
			return syscall.ENOSPC
		}
		return syscall.EINVAL
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	}
	f.opts.Logf("fuse: %s: %s at %d+%d: %v", f.name, op, off, n, err)
	return syscall.EIO
}
