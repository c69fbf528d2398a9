package blockdev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// errUnsupported is returned by the system helpers when the system or file
// system lacks a call; the caller falls back.
var errUnsupported = errors.New("not supported by the system")

// fallocOp is what fileFallocate does to a range.
type fallocOp uint8

const (
	fallocReserve fallocOp = iota // allocate space, keep contents
	fallocPunch                   // release space, read as zeros
	fallocZero                    // read as zeros, keep the space
)

func (fl *File) check(ctx context.Context, off, n int64) error {
	if fl.closed.Load() {
		return fmt.Errorf("file %s: closed: %w", fl.path, ErrUnavailable)
	}
	if err := CheckRange(fl.size, fl.bs, off, n); err != nil {
		return fmt.Errorf("file %s: %w", fl.path, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("file %s: %w", fl.path, err)
	}
	return nil
}

// fail wraps a system error of op with the request and its class.
func (fl *File) fail(op string, off, n int64, err error) error {
	return fmt.Errorf("file %s: %s off=%d len=%d: %w", fl.path, op, off, n, Mark(err, classify(err, op == "read")))
}

// classify returns the class of a system error; see File.
func classify(err error, read bool) error {
	if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrUnavailable
	}
	if c := classifyErrno(err, read); c != nil {
		return c
	}
	return ErrUnavailable
}

func (fl *File) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := fl.check(ctx, off, int64(len(p))); err != nil {
		return err
	}
	if fl.readMapped(p, off) {
		return nil
	}
	if err := fl.transfer(p, off, read); err != nil {
		return fl.fail("read", off, int64(len(p)), err)
	}
	return nil
}

func (fl *File) WriteAt(ctx context.Context, p []byte, off int64) error {
	if err := fl.check(ctx, off, int64(len(p))); err != nil {
		return err
	}
	if fl.writeMapped(p, off) {
		return nil
	}
	if err := fl.transfer(p, off, write); err != nil {
		return fl.fail("write", off, int64(len(p)), err)
	}
	return nil
}

// WriteAtFUA writes p at off and returns nil once it is durable. A file on
// tmpfs (mapped) has no medium behind its pages, so the write is all
// there is (tmpfs's fdatasync does nothing). Elsewhere the write is made
// durable alone (pwriteDsync: on a block device a FUA write, where
// WriteAt and Flush would flush the device's whole cache); a kernel
// without pwritev2 gets WriteAt and Flush.
func (fl *File) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	if err := fl.check(ctx, off, int64(len(p))); err != nil {
		return err
	}
	if fl.writeMapped(p, off) {
		return nil
	}
	err := fl.transfer(p, off, writeDsync)
	if errors.Is(err, errUnsupported) {
		if err := fl.transfer(p, off, write); err != nil {
			return fl.fail("write", off, int64(len(p)), err)
		}
		return fl.Flush(ctx)
	}
	if err != nil {
		return fl.fail("write", off, int64(len(p)), err)
	}
	return nil
}

// writeMapped copies p into the mapping at off and reports whether it did.
// A fault (no page to give, or the file shrank) is left to pwrite, which
// writes all of p again and says what went wrong.
func (fl *File) writeMapped(p []byte, off int64) bool {
	fl.memMu.RLock()
	defer fl.memMu.RUnlock()
	return fl.mem != nil && copyGuarded(fl.mem[off:off+int64(len(p))], p, copyCold)
}

// readMapped copies [off, off+len(p)) out of the mapping when every page
// of it is in memory, and reports whether it did. A page that is not (a
// hole, or swapped out) is left to pread: touching a hole through the
// mapping would allocate it, and a sparse file must stay sparse.
func (fl *File) readMapped(p []byte, off int64) bool {
	fl.memMu.RLock()
	defer fl.memMu.RUnlock()
	if fl.mem == nil || !resident(fl.mem, off, int64(len(p))) {
		return false
	}
	return copyGuarded(p, fl.mem[off:off+int64(len(p))], copyPlain)
}

func copyPlain(dst, src []byte) int { return copy(dst, src) }

// Lend lends the mapping's bytes of [off, off+n) when every page of the
// range is in memory (see Lender); a File without a mapping, a range with
// a page not in memory, a bad range and a closed File lend nothing.
// Close waits for the release.
func (fl *File) Lend(off, n int64) (b []byte, release func(), ok bool) {
	if n <= 0 || fl.closed.Load() || CheckRange(fl.size, fl.bs, off, n) != nil {
		return nil, nil, false
	}
	fl.memMu.RLock()
	if fl.mem == nil || !resident(fl.mem, off, n) {
		fl.memMu.RUnlock()
		return nil, nil, false
	}
	return fl.mem[off : off+n : off+n], fl.memMu.RUnlock, true
}

// copyGuarded copies src to dst with cp, one of them in the mapping, and
// reports false instead of crashing when the mapping faults. Writes go
// with copyCold: the file's pages are not read again soon, and ordinary
// stores would first read every destination line from memory.
func copyGuarded(dst, src []byte, cp func(dst, src []byte) int) (done bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			done = false
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	cp(dst, src)
	return true
}

// ioMode is what transfer does.
type ioMode uint8

const (
	read       ioMode = iota
	write             // pwrite
	writeDsync        // pwritev2 with RWF_DSYNC (pwriteDsync)
)

// transfer reads or writes p at off, through bounce buffers when O_DIRECT
// needs an aligned buffer and p is not one.
func (fl *File) transfer(p []byte, off int64, mode ioMode) error {
	if len(p) == 0 {
		return nil
	}
	if !fl.direct || addrOf(p)%dioAlign == 0 {
		return fl.rw(p, off, mode)
	}
	bp := fl.bounce.Get().(*[]byte)
	defer fl.bounce.Put(bp)
	for done := 0; done < len(p); {
		b := (*bp)[:min(len(*bp), len(p)-done)]
		if mode != read {
			copy(b, p[done:])
		}
		if err := fl.rw(b, off+int64(done), mode); err != nil {
			return err
		}
		if mode == read {
			copy(p[done:], b)
		}
		done += len(b)
	}
	return nil
}

// rw is one pread, pwrite or pwriteDsync of all of p (os.File retries
// short transfers).
func (fl *File) rw(p []byte, off int64, mode ioMode) error {
	var err error
	switch mode {
	case read:
		_, err = fl.f.ReadAt(p, off)
	case write:
		_, err = fl.f.WriteAt(p, off)
	case writeDsync:
		err = pwriteDsync(fl.f, p, off)
	}
	return err
}

// Flush makes every completed write durable (fdatasync).
func (fl *File) Flush(ctx context.Context) error {
	if err := fl.check(ctx, 0, 0); err != nil {
		return err
	}
	if err := fileSync(fl.f); err != nil {
		return fl.fail("flush", 0, 0, err)
	}
	return nil
}

// Trim punches a hole (releasing the space) or zeroes with unmap on a block
// device, falling back to writing zeros.
func (fl *File) Trim(ctx context.Context, off, n int64) error {
	return fl.zero(ctx, "trim", off, n, fallocPunch)
}

// WriteZeroes zeroes the range in place, falling back to writing zeros.
func (fl *File) WriteZeroes(ctx context.Context, off, n int64) error {
	return fl.zero(ctx, "write-zeroes", off, n, fallocZero)
}

func (fl *File) zero(ctx context.Context, op string, off, n int64, how fallocOp) error {
	if err := fl.check(ctx, off, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	var err error
	if fl.blockDev {
		err = blockDevZero(fl.f, off, n, how == fallocPunch)
	} else {
		err = fileFallocate(fl.f, how, off, n)
	}
	if errors.Is(err, errUnsupported) {
		err = fl.writeZeros(off, n)
	}
	if err != nil && how == fallocZero && !fl.blockDev && classify(err, false) == ErrNoSpace {
		// No space to keep the range allocated: a punched hole reads as
		// zeros too, and frees space instead of taking it.
		err = fileFallocate(fl.f, fallocPunch, off, n)
	}
	if err != nil {
		return fl.fail(op, off, n, err)
	}
	return nil
}

// writeZeros writes zero bytes over the range.
func (fl *File) writeZeros(off, n int64) error {
	bp := fl.bounce.Get().(*[]byte)
	defer fl.bounce.Put(bp)
	clear(*bp)
	for done := int64(0); done < n; {
		b := (*bp)[:min(int64(len(*bp)), n-done)]
		if err := fl.rw(b, off+done, write); err != nil {
			return err
		}
		done += int64(len(b))
	}
	return nil
}

// Allocated reports the data extents of a regular file, rounded out to
// blocks; for block devices, and where the system cannot tell, the whole
// range.
func (fl *File) Allocated(ctx context.Context, off, n int64) ([]Extent, error) {
	if err := fl.check(ctx, off, n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	if !fl.blockDev {
		ext, err := fileDataExtents(fl.f, off, n, int64(fl.bs))
		if !errors.Is(err, errUnsupported) {
			if err != nil {
				return nil, fl.fail("allocated", off, n, err)
			}
			return ext, nil
		}
	}
	return []Extent{{Off: off, Len: n}}, nil
}
