//go:build linux

package nbd

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// peerClosed tells a socket whose other end someone still holds (the
// kernel, after NBD_CMD_RECONFIGURE took it) from one whose other end is
// gone (the kernel did not take it).
func TestPeerClosed(t *testing.T) {
	kfd, nc, err := newPair()
	mustf(t, err, "pair")
	defer nc.Close()
	held, err := unix.Dup(kfd) // stands in for the kernel's reference
	mustf(t, err, "dup")
	unix.Close(kfd)
	if peerClosed(nc) {
		t.Fatal("peer reported closed while a reference is held")
	}
	unix.Close(held)
	if !peerClosed(nc) {
		t.Fatal("peer not reported closed once every reference is gone")
	}
}

// process finds the thread group and name of a thread id, as the kernel's
// pid attribute gives it.
func TestProcess(t *testing.T) {
	pid, comm := process(unix.Gettid())
	if pid != os.Getpid() || comm == "" {
		t.Fatalf("process(gettid) = %d %q, want %d", pid, comm, os.Getpid())
	}
	if pid, _ := process(-1); pid != 0 {
		t.Fatalf("process(-1) = %d", pid)
	}
	if !pidAlive(os.Getpid()) || pidAlive(1<<22+1) || pidAlive(0) {
		t.Fatal("pidAlive")
	}
}
