package blockdev

import (
	"os"
	"syscall"
	"unsafe"
)

// rwfDsync is pwritev2's per-write O_DSYNC (linux/fs.h RWF_DSYNC).
const rwfDsync = 0x2

// pwriteDsync writes all of p at off with pwritev2 and RWF_DSYNC: the write
// is durable when it returns, as with O_DSYNC for this write alone (on a
// block device with a volatile cache the block layer sends it with FUA
// rather than flushing the whole cache). errUnsupported where the kernel
// or the architecture lacks the call.
func pwriteDsync(f *os.File, p []byte, off int64) error {
	if sysPwritev2 == 0 {
		return errUnsupported
	}
	return withFd(f, func(fd int) error {
		for len(p) > 0 {
			iov := syscall.Iovec{Base: &p[0]}
			iov.SetLen(len(p))
			var n uintptr
			err := retryEINTR(func() error {
				var e syscall.Errno
				// pos_l, pos_h: on 64-bit kernels the offset is pos_l alone.
				n, _, e = syscall.Syscall6(sysPwritev2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), 0, rwfDsync)
				if e != 0 {
					return e
				}
				return nil
			})
			if err != nil {
				return unsupported(err)
			}
			if n == 0 {
				return syscall.EIO // no progress: never loop forever
			}
			p, off = p[n:], off+int64(n)
		}
		return nil
	})
}
