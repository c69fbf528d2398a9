package testutil

import (
	"fmt"
	"runtime"
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
