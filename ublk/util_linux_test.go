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

// alignedBuf returns n bytes aligned to 4096 for O_DIRECT.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := int(4096 - uintptr(unsafe.Pointer(&b[0]))%4096)
	return b[off%4096 : off%4096+n]
}
