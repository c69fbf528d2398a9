package testutil

import (
	"runtime"
	"testing"
	"time"
)

// WaitGoroutines waits until at most n goroutines run (those the code
// under test started have ended), failing t with the stack of every
// goroutine after WaitLimit: the leak check of a Close or a shutdown.
func WaitGoroutines(t testing.TB, n int) {
	t.Helper()
	waitGoroutines(t, WaitLimit, n)
}

func waitGoroutines(t testing.TB, limit time.Duration, n int) {
	t.Helper()
	if poll(limit, func() bool { return runtime.NumGoroutine() <= n }) {
		return
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	t.Fatalf("goroutine leak: %d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf)
}
