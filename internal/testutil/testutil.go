// Package testutil holds the helpers that tests across the repository
// share: WaitFor (the one polling wait for a condition), WaitGoroutines
// (the goroutine leak check), Logf (a log
// function that outlives its test quietly), Serve and FreeAddr (loopback
// listeners), EMFILEListener (a listener out of file descriptors),
// BuildNvstripe (the binary, for process tests). It is imported by _test.go
// files only.
package testutil

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/retry"
)

// WaitLimit bounds every WaitFor. It only stops a test that would hang; no
// test asserts how long a wait took.
const WaitLimit = 90 * time.Second

// WaitFor polls cond until it holds, failing t ("timed out waiting for
// what") after WaitLimit. It polls at once, then after waits growing from
// 1ms to 50ms, so a condition that holds soon is seen soon and a slow one
// (an etcd read, a process starting) is not polled in a busy loop.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitFor(t, WaitLimit, what, cond)
}

func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(limit, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// poll calls cond until it holds (true) or limit has passed (false), at
// once, then after waits growing from 1ms to 50ms.
func poll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	waits := retry.NewBackoff(retry.Options{Initial: time.Millisecond, Max: 50 * time.Millisecond})
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(waits.Next())
	}
	return true
}

// Logf returns a log function that writes to t until t's cleanup and is
// silent after it, for goroutines (gossip, servers) that may still log
// while they wind down, when touching t would panic.
func Logf(t testing.TB) func(format string, args ...any) {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() { mu.Lock(); done = true; mu.Unlock() })
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Logf(format, args...)
		}
	}
}

// Serve listens on 127.0.0.1 (an ephemeral port), runs handle on its own
// goroutine for each connection until t's cleanup closes the listener, and
// returns the address.
func Serve(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return l.Addr().String()
}

// FreeAddr returns a loopback address that nobody listened on a moment
// ago, for a process that must be told its address before it starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// BuildNvstripe builds the nvstripe binary (with the build tags given, if
// any) into dir, or into a directory of t's when dir is "", and returns its
// path. It skips t when the go tool is missing.
func BuildNvstripe(t testing.TB, dir string, tags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go tool to build the nvstripe binary")
	}
	if dir == "" {
		dir = t.TempDir()
	}
	bin := filepath.Join(dir, "nvstripe")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command("go", append(args, "github.com/nvstripe/nvstripe/cmd/nvstripe")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// EMFILEListener fails its first N Accept calls with EMFILE (a process out
// of file descriptors), then accepts from Listener. Calls counts Accept
// calls.
type EMFILEListener struct {
	net.Listener
	N, Calls atomic.Int32
}

// Accept fails while N lasts, then accepts.
func (l *EMFILEListener) Accept() (net.Conn, error) {
	l.Calls.Add(1)
	if l.N.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}
