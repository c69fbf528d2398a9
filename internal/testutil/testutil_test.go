package testutil

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitForPollsUntilTrue(t *testing.T) {
	var n atomic.Int32
	WaitFor(t, "the fifth poll", func() bool { return n.Add(1) >= 5 })
	if n.Load() != 5 {
		t.Fatalf("cond called %d times, want 5", n.Load())
	}
}

// fakeTB records a Fatalf and ends its goroutine, as testing.T does.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWaitForFailsAtTheLimit(t *testing.T) {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitFor(f, 10*time.Millisecond, "a condition that never holds", func() bool { return false })
	}()
	<-done
	if want := "timed out waiting for a condition that never holds"; f.failed != want {
		t.Fatalf("failure %q, want %q", f.failed, want)
	}
}

// TestServeAndFreeAddr: Serve hands each connection to its handler; the
// address FreeAddr returns can be listened on.
// checkGreeting connects to addr and fails t unless the server says "hi"
// and closes.
func checkGreeting(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(b) != "hi" {
		t.Fatalf("read %q, %v: want the server's greeting", b, err)
	}
}

func TestServeAndFreeAddr(t *testing.T) {
	addr := Serve(t, func(c net.Conn) {
		defer c.Close()
		c.Write([]byte("hi"))
	})
	for range 2 {
		checkGreeting(t, addr)
	}
	l, err := net.Listen("tcp", FreeAddr(t))
	if err != nil {
		t.Fatalf("listening on FreeAddr's address: %v", err)
	}
	l.Close()
}

// TestLogfQuietAfterCleanup: the log function writes while the test runs
// and is a no-op after its cleanup (a real t would panic).
func TestLogfQuietAfterCleanup(t *testing.T) {
	var logf func(string, ...any)
	t.Run("sub", func(t *testing.T) {
		logf = Logf(t)
		logf("while the test runs: %d", 1)
	})
	logf("after the subtest's cleanup: %d", 2) // must not panic
}

// TestWaitGoroutines: the wait fails with the stacks of the goroutines
// that run, the leaked one named, while more run than allowed (none, here),
// and returns once the goroutine started in the test has ended.
func TestWaitGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	stop := make(chan struct{})
	go leakedForTest(stop)
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitGoroutines(f, 10*time.Millisecond, 0)
	}()
	<-done
	if !strings.HasPrefix(f.failed, "goroutine leak:") || !strings.Contains(f.failed, "leakedForTest") {
		t.Fatalf("failure %q, want a leak report with the running goroutine's stack", f.failed)
	}
	close(stop)
	WaitGoroutines(t, before)
}

// leakedForTest runs until stop closes: a goroutine whose name the leak
// report must show.
func leakedForTest(stop <-chan struct{}) { <-stop }
