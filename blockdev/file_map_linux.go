package blockdev

import (
	"os"
	"syscall"
)

// tmpfsMagic is statfs's f_type for tmpfs (linux/magic.h).
const tmpfsMagic = 0x01021994

// mapTmpfs maps the first size bytes of f, a regular file, shared and
// writable when it is on tmpfs; errUnsupported elsewhere.
func mapTmpfs(f *os.File, size int64) ([]byte, error) {
	var mem []byte
	err := withFd(f, func(fd int) error {
		var st syscall.Statfs_t
		if err := syscall.Fstatfs(fd, &st); err != nil {
			return err
		}
		if st.Type != tmpfsMagic || int64(int(size)) != size {
			return errUnsupported
		}
		m, err := syscall.Mmap(fd, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		mem = m
		return err
	})
	return mem, err
}

func unmap(mem []byte) { syscall.Munmap(mem) }
