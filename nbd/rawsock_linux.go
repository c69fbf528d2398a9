package nbd

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawSock reads and writes a socket with RawSyscall. Go keeps sockets
// non-blocking and waits for readiness in its poller, so a read or writev
// never sleeps in the kernel: it only copies. The ordinary syscall path
// tells the scheduler the call may block, and copying a megabyte takes long
// enough for the scheduler's monitor to hand the goroutine's P to another
// thread, then park a thread when the call returns: a thread wakeup and a
// sleep per large request, visible as futex and nanosleep time in profiles
// of the plain net.Conn version. A raw call keeps its P for the copy, as a C
// server's thread would.
type rawSock struct {
	rc  syscall.RawConn
	iov []syscall.Iovec // writev's vector, reused; only the writer uses it
}

// newRawSock returns nil when nc is not a socket with a file descriptor.
func newRawSock(nc net.Conn) *rawSock {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &rawSock{rc: rc}
}

// Read implements io.Reader; deadlines set on the net.Conn apply.
func (s *rawSock) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n uintptr
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			if errno != syscall.EINTR {
				return errno != syscall.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}

// maxIov is the kernel's limit on one writev's vector (IOV_MAX).
const maxIov = 1024

// writev writes every byte of bufs, in as few writev calls as the socket
// buffer allows.
func (s *rawSock) writev(bufs [][]byte) error {
	for {
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
		if len(bufs) == 0 {
			return nil
		}
		n, err := s.writevOnce(bufs)
		if err != nil {
			return err
		}
		for n > 0 {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
}

// writevOnce makes one writev of up to maxIov buffers (waiting for room in
// the socket buffer first if it is full) and returns the bytes written.
func (s *rawSock) writevOnce(bufs [][]byte) (int, error) {
	s.iov = s.iov[:0]
	for _, b := range bufs {
		if len(s.iov) == maxIov {
			break
		}
		if len(b) > 0 {
			s.iov = append(s.iov, syscall.Iovec{Base: &b[0], Len: uint64(len(b))})
		}
	}
	var n uintptr
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&s.iov[0])), uintptr(len(s.iov)))
			if errno != syscall.EINTR {
				return errno != syscall.EAGAIN
			}
		}
	})
	clear(s.iov)
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("writev", errno)
	}
	return int(n), nil
}

// peerGone says, without waiting, whether the peer has shut its sending
// side of the socket down, even while data it sent earlier waits unread,
// and whether the socket is dead both ways (shut down, reset or closed).
// A ppoll with a zero timeout never sleeps, so it is made raw (see above).
func (s *rawSock) peerGone() (shutWrite, dead bool) {
	var revents int16
	var errno syscall.Errno
	err := s.rc.Control(func(fd uintptr) {
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		var zero unix.Timespec
		_, _, errno = syscall.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		revents = fds[0].Revents
	})
	dead = err != nil || errno == 0 && revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
	return dead || errno == 0 && revents&unix.POLLRDHUP != 0, dead
}
