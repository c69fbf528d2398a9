//go:build linux

package nbd

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// kernelServer skips unless NVSTRIPE_KERNEL_NBD=1 (set by vmtest's
// nbd-kernel scenario, in a VM as root with the nbd module), then returns a
// server exporting a fresh in-memory device.
func kernelServer(t *testing.T, size int64) *Server {
	t.Helper()
	if os.Getenv("NVSTRIPE_KERNEL_NBD") != "1" {
		t.Skip("needs the kernel nbd driver and root: set NVSTRIPE_KERNEL_NBD=1 (vmtest runs this in a VM)")
	}
	s, err := NewServer(Options{Logf: t.Logf, ShutdownGrace: 200 * time.Millisecond,
		Exports: map[string]Export{"mem": {Device: newMem(t, size, 4096)}}})
	mustf(t, err, "server")
	t.Cleanup(func() { s.Close() })
	return s
}

// deviceIO writes p at off through the kernel device (O_DIRECT) and reads
// it back.
func deviceIO(t *testing.T, path string, p []byte, off int64) {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_DIRECT, 0)
	mustf(t, err, "open %s", path)
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, len(p), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // aligned
	mustf(t, err, "mmap")
	defer unix.Munmap(buf)
	copy(buf, p)
	if n, err := unix.Pwrite(fd, buf, off); err != nil || n != len(p) {
		t.Fatalf("write %s: %d, %v", path, n, err)
	}
	clear(buf)
	if n, err := unix.Pread(fd, buf, off); err != nil || n != len(p) {
		t.Fatalf("read %s: %d, %v", path, n, err)
	}
	if !bytes.Equal(buf, p) {
		t.Fatalf("%s: read back differs at offset %d", path, off)
	}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

// TestKernelAttach: attach to the first free device with two connections
// under a context that ends at once, IO through it, a second attach of the busy device refused, a server-side
// connection dropped and replaced (NBD_CMD_RECONFIGURE) with IO going on,
// and Close leaving the device at size 0.
func TestKernelAttach(t *testing.T) {
	s := kernelServer(t, 32<<20)
	d, err := PickDevice("mem")
	mustf(t, err, "pick")
	// The attaching context ends once AttachKernel returns, as the agent's
	// does: the attachment must live on.
	actx, cancel := context.WithCancel(t.Context())
	a, err := s.AttachKernel(actx, "mem", "", AttachOptions{Connections: 2, DeadConnTimeout: 5 * time.Second})
	cancel()
	mustf(t, err, "attach")
	time.Sleep(2 * s.opts.ShutdownGrace) // long enough for connections tied to actx to close
	if a.Path != d.Path {
		t.Errorf("attached %s, PickDevice said %s", a.Path, d.Path)
	}
	got, err := WaitSize(t.Context(), a.Path)
	mustf(t, err, "wait size")
	if got.Size != 32<<20 || got.Backend != "mem" || !got.Connected() {
		t.Fatalf("device after attach: %+v", got)
	}
	if pid, _ := process(got.PID); pid != os.Getpid() {
		t.Fatalf("device pid %d is of process %d, want this one (%d)", got.PID, pid, os.Getpid())
	}
	deviceIO(t, a.Path, randBytes(1<<20), 4<<20)

	_, err = s.AttachKernel(t.Context(), "mem", a.Path, AttachOptions{})
	if !errors.Is(err, ErrDeviceBusy) {
		t.Fatalf("second attach of %s: %v, want ErrDeviceBusy", a.Path, err)
	}
	t.Logf("second attach refused: %v", err)

	a.mu.Lock()
	a.serving[0].Close() // our side of connection 0 ends
	a.mu.Unlock()
	testutil.WaitFor(t, "a reconnect after dropping a connection", func() bool { return a.Reconnects() > 0 })
	if a.Reconnects() != 1 {
		t.Fatalf("%d reconnects after dropping a connection, want 1", a.Reconnects())
	}
	for i := range 8 { // spread over both connections
		deviceIO(t, a.Path, randBytes(256<<10), int64(i)<<20)
	}

	mustf(t, a.Close(), "close")
	after, err := Device(a.Path)
	mustf(t, err, "device after close")
	if after.Size != 0 || after.Connected() {
		t.Fatalf("device after Close: %+v", after)
	}
	select {
	case <-a.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
}
