package testutil

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

// TestBufferConcurrent: writers and a reader at once (the race detector
// watches) lose no write.
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Fatalf("got %d bytes, want 400", len(got))
	}
}

// TestBufferLogf: Logf lines from many goroutines come out whole, one a
// line.
func TestBufferLogf(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				b.Logf("goroutine %d line %d", g, i)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 200 {
		t.Fatalf("%d lines, want 200", len(lines))
	}
	for _, l := range lines {
		var g, i int
		if n, err := fmt.Sscanf(l, "goroutine %d line %d", &g, &i); n != 2 || err != nil {
			t.Fatalf("line %q is not one whole Logf line", l)
		}
	}
}

// TestStartStdout: the process runs and its standard output reaches the
// caller; a command that cannot start fails the test.
func TestStartStdout(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	cmd := exec.Command("sh", "-c", "echo ready")
	out, err := io.ReadAll(StartStdout(t, cmd))
	if err != nil || strings.TrimSpace(string(out)) != "ready" {
		t.Fatalf("stdout %q, %v; want ready", out, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}

	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartStdout(f, exec.Command(filepath.Join(t.TempDir(), "missing")))
	}()
	<-done
	if f.failed == "" {
		t.Fatal("a command that cannot start did not fail the test")
	}
}

// TestDialFrom: the server sees the connection come from the asked
// address.
func TestDialFrom(t *testing.T) {
	from := make(chan string, 1)
	addr := Serve(t, func(c net.Conn) {
		from <- c.RemoteAddr().(*net.TCPAddr).IP.String()
		c.Close()
	})
	DialFrom(t, "127.0.0.2", addr)
	if got := <-from; got != "127.0.0.2" {
		t.Fatalf("server saw %s, want 127.0.0.2", got)
	}
}

// TestRSS: this process's resident memory is read (some MiB at least: the
// test binary runs), and a process that does not exist is an error.
func TestRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("needs /proc: %v", err)
	}
	if n, err := RSS(os.Getpid()); err != nil || n < 1<<20 {
		t.Fatalf("RSS of this process: %d, %v: want at least 1 MiB", n, err)
	}
	if _, err := RSS(-1); err == nil {
		t.Fatal("RSS of pid -1: no error")
	}
}

// TestAlignedBuf: the buffer has the length asked for, room for no more,
// and starts on a 4096-byte boundary.
func TestAlignedBuf(t *testing.T) {
	for _, n := range []int{1, 512, 4096, 1 << 20} {
		b := AlignedBuf(n)
		if len(b) != n || cap(b) != n || uintptr(unsafe.Pointer(&b[0]))%4096 != 0 {
			t.Errorf("AlignedBuf(%d): len %d cap %d at %p", n, len(b), cap(b), &b[0])
		}
	}
}

// TestPattern: the same seed gives the same bytes; another seed, or
// another 512-byte block of the same pattern, differs.
func TestPattern(t *testing.T) {
	a, b := Pattern(4096, 1), Pattern(4096, 2)
	if !bytes.Equal(a, Pattern(4096, 1)) || bytes.Equal(a, b) {
		t.Fatal("Pattern is not a function of its seed")
	}
	for blk := 1; blk < 8; blk++ {
		if bytes.Equal(a[:512], a[blk*512:(blk+1)*512]) {
			t.Errorf("block %d of the pattern equals block 0", blk)
		}
	}
}

// cleanupTB is a fakeTB that keeps the functions given to Cleanup.
type cleanupTB struct {
	fakeTB
	cleanups []func()
}

func (c *cleanupTB) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }

// TestStartReady: StartReady returns once the process prints "ready",
// with the last prefixed line before it (not one after), and the process
// still running; Wait gives its exit. A process that exits before it is
// ready fails the test.
func TestStartReady(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	p, value := StartReady(t, exec.Command("sh", "-c", `echo "addr: one"; echo "addr: two"; echo ready; echo "addr: late"; exec sleep 60`), "addr: ")
	if value != "two" {
		t.Fatalf("value %q, want two", value)
	}
	if err := p.Cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process is not running after ready: %v", err)
	}
	p.Cmd.Process.Kill()
	if err := p.Wait(); err == nil {
		t.Fatal("Wait of a killed process: no error")
	}

	f := &cleanupTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartReady(f, exec.Command("sh", "-c", `echo "addr: x"; exit 3`), "addr: ")
	}()
	<-done
	if !strings.Contains(f.failed, "exited before it printed ready") || !strings.Contains(f.failed, "exit status 3") {
		t.Fatalf("failure %q, want the exit before ready", f.failed)
	}
	for _, c := range f.cleanups {
		c()
	}
}
