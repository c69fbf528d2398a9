package rawsock

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Conn is a socket's raw reads and writes (see the package doc).
type Conn struct {
	rc   syscall.RawConn
	iov  []syscall.Iovec  // Writev's vector, reused; only the writer uses it
	riov [2]syscall.Iovec // Readv's vector; only the reader uses it
}

// New returns nil when nc is not a socket with a file descriptor.
func New(nc net.Conn) *Conn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &Conn{rc: rc}
}

// Read implements io.Reader.
func (s *Conn) Read(p []byte) (int, error) {
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
	return readResult(n, errno, err, "read")
}

// Readv reads into p and, once p is full, on into spill, in one readv: it
// returns the bytes read in all (at least one, or an error; io.EOF when
// the peer closed). A reader that knows how much belongs in p (the rest
// of a message's payload) gets it there without an intermediate copy, and
// what follows it (the next message's header) in the same call.
func (s *Conn) Readv(p, spill []byte) (int, error) {
	if len(p) == 0 {
		return s.Read(spill)
	}
	s.riov[0] = syscall.Iovec{Base: &p[0], Len: uint64(len(p))}
	cnt := 1
	if len(spill) > 0 {
		s.riov[1] = syscall.Iovec{Base: &spill[0], Len: uint64(len(spill))}
		cnt = 2
	}
	var n uintptr
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.RawSyscall(syscall.SYS_READV, fd, uintptr(unsafe.Pointer(&s.riov[0])), uintptr(cnt))
			if errno != syscall.EINTR {
				return errno != syscall.EAGAIN
			}
		}
	})
	s.riov = [2]syscall.Iovec{}
	return readResult(n, errno, err, "readv")
}

func readResult(n uintptr, errno syscall.Errno, err error, call string) (int, error) {
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError(call, errno)
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}

// maxIov is the kernel's limit on one writev's vector (IOV_MAX).
const maxIov = 1024

// Writev writes every byte of bufs, in as few writev calls as the socket
// buffer allows. It consumes bufs (its slices are advanced past what was
// written).
func (s *Conn) Writev(bufs [][]byte) error {
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
func (s *Conn) writevOnce(bufs [][]byte) (int, error) {
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

// PeerGone says, without waiting, whether the peer has shut its sending
// side of the socket down, even while data it sent earlier waits unread,
// and whether the socket is dead both ways (shut down, reset or closed).
// A ppoll with a zero timeout never sleeps, so it is made raw (see the
// package doc).
func (s *Conn) PeerGone() (shutWrite, dead bool) {
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
