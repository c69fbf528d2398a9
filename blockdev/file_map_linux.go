package blockdev

import (
	"os"
	"syscall"
	"unsafe"
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

// residentPages is the most pages resident checks; longer ranges are left
// to pread.
const residentPages = 64

// resident reports whether every page of mem[off:off+n] is in memory
// (mincore), so that reading it through the mapping allocates nothing.
func resident(mem []byte, off, n int64) bool {
	ps := int64(os.Getpagesize())
	start, end := off/ps*ps, (off+n+ps-1)/ps*ps
	var vec [residentPages]byte
	pages := (end - start) / ps
	if n == 0 || pages > residentPages {
		return false
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[start])), uintptr(end-start), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		return false
	}
	for _, v := range vec[:pages] {
		if v&1 == 0 {
			return false
		}
	}
	return true
}
