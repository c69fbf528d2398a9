package blockdev

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// Linux constants the syscall package lacks (linux/falloc.h, linux/fs.h,
// unistd.h).
const (
	fallocFlKeepSize  = 0x01
	fallocFlPunchHole = 0x02
	fallocFlZeroRange = 0x10

	ioctlBlkGetSize64 = 0x80081272 // _IOR(0x12, 114, size_t)
	ioctlBlkZeroOut   = 0x127f     // _IO(0x12, 127)

	seekData = 3
	seekHole = 4
)

func directFlag() (int, bool) { return syscall.O_DIRECT, true }

// withFd runs fn on the file's descriptor, keeping it open meanwhile.
func withFd(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// unsupported turns the errnos of a missing call into errUnsupported.
func unsupported(err error) error {
	switch {
	case errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.ENOTTY):
		return errUnsupported
	}
	return err
}

func fileFallocate(f *os.File, how fallocOp, off, n int64) error {
	mode := uint32(0)
	switch how {
	case fallocPunch:
		mode = fallocFlPunchHole | fallocFlKeepSize
	case fallocZero:
		mode = fallocFlZeroRange | fallocFlKeepSize
	}
	return withFd(f, func(fd int) error {
		return unsupported(retryEINTR(func() error { return syscall.Fallocate(fd, mode, off, n) }))
	})
}

func retryEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func fileSync(f *os.File) error {
	return withFd(f, func(fd int) error {
		return retryEINTR(func() error { return syscall.Fdatasync(fd) })
	})
}

func blockDevSize(f *os.File) (int64, error) {
	var size uint64
	err := withFd(f, func(fd int) error {
		return ioctl(fd, ioctlBlkGetSize64, unsafe.Pointer(&size))
	})
	return int64(size), err
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// blockDevZero zeroes a block device range: fallocate (punch: zero-out with
// unmap; else zero-out in place), then BLKZEROOUT, else errUnsupported.
func blockDevZero(f *os.File, off, n int64, punch bool) error {
	if punch {
		if err := fileFallocate(f, fallocPunch, off, n); !errors.Is(err, errUnsupported) {
			return err
		}
	}
	if err := fileFallocate(f, fallocZero, off, n); !errors.Is(err, errUnsupported) {
		return err
	}
	r := [2]uint64{uint64(off), uint64(n)}
	return withFd(f, func(fd int) error {
		return unsupported(ioctl(fd, ioctlBlkZeroOut, unsafe.Pointer(&r)))
	})
}

// fileDataExtents lists the data extents in [off, off+n) with SEEK_DATA and
// SEEK_HOLE, rounded out to bs and clipped to the range.
func fileDataExtents(f *os.File, off, n, bs int64) ([]Extent, error) {
	var ext []Extent
	err := withFd(f, func(fd int) error {
		for pos, end := off, off+n; pos < end; {
			d, err := syscall.Seek(fd, pos, seekData)
			if errors.Is(err, syscall.ENXIO) || err == nil && d >= end {
				return nil
			}
			if err != nil {
				return seekUnsupported(err)
			}
			h, err := syscall.Seek(fd, d, seekHole)
			if err != nil {
				return seekUnsupported(err)
			}
			e := Extent{Off: max(d-d%bs, off)}
			e.Len = min((h+bs-1)/bs*bs, end) - e.Off
			ext = appendExtent(ext, e)
			pos = h
		}
		return nil
	})
	return ext, err
}

func seekUnsupported(err error) error {
	if errors.Is(err, syscall.EINVAL) {
		return errUnsupported
	}
	return unsupported(err)
}

// appendExtent appends e to ext, merging it with the last extent when they
// touch or overlap.
func appendExtent(ext []Extent, e Extent) []Extent {
	if k := len(ext) - 1; k >= 0 && e.Off <= ext[k].Off+ext[k].Len {
		ext[k].Len = max(ext[k].Off+ext[k].Len, e.Off+e.Len) - ext[k].Off
		return ext
	}
	return append(ext, e)
}

// classifyErrno classes the Linux errnos that the block layer returns; see
// File for the reasoning.
func classifyErrno(err error, read bool) error {
	var en syscall.Errno
	if !errors.As(err, &en) {
		return nil
	}
	switch en {
	case syscall.EIO:
		if read {
			return ErrCorrupt
		}
		return ErrUnavailable
	case syscall.ENODATA, syscall.EILSEQ:
		return ErrCorrupt
	case syscall.EBADE:
		return ErrFenced
	case syscall.EINVAL:
		return ErrInvalid
	case syscall.ENOSPC, syscall.EDQUOT:
		return ErrNoSpace
	}
	return ErrUnavailable
}
