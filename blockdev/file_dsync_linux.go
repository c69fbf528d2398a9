package blockdev

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// pwriteDsync writes all of p at off with pwritev2 and RWF_DSYNC: the write
// is durable when it returns, as with O_DSYNC for this write alone (on a
// block device with a volatile cache the block layer sends it with FUA
// rather than flushing the whole cache). errUnsupported where the kernel
// lacks the call or the flag.
func pwriteDsync(f *os.File, p []byte, off int64) error {
	return withFd(f, func(fd int) error {
		for len(p) > 0 {
			var n int
			err := retryEINTR(func() error {
				var err error
				n, err = unix.Pwritev2(fd, [][]byte{p}, off, unix.RWF_DSYNC)
				return err
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
