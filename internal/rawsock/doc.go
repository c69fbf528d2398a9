// Package rawsock reads and writes a connected socket with raw system
// calls, for the data paths that move most bytes (the NBD server, the
// NVMe/TCP initiator).
//
// Go keeps sockets non-blocking and waits for readiness in its poller, so
// a read or writev never sleeps in the kernel: it only copies. The
// ordinary syscall path tells the scheduler the call may block, and
// copying a large buffer takes long enough for the scheduler's monitor to
// hand the goroutine's P to another thread, then park a thread when the
// call returns: a thread wakeup and a sleep per large transfer, visible as
// futex and nanosleep time in profiles of the plain net.Conn version. A
// raw call keeps its P for the copy, as a C program's thread would.
//
// New returns nil for a connection without a file descriptor (a TLS
// session, a test wrapper) and on systems other than Linux; callers then
// use the net.Conn itself. One goroutine at a time may read (Read, Readv)
// and one at a time may write (Writev); the two may run at once.
// Deadlines set on the net.Conn apply.
package rawsock
