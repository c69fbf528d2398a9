package ublk

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func unsafePtr[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

func ioctlU64(f *os.File, req uint, out *uint64) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(unsafe.Pointer(out))); errno != 0 {
		return errno
	}
	return nil
}
