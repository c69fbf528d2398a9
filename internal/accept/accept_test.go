package accept

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// failing returns err from its first n Accept calls, then accepts for real.
type failing struct {
	net.Listener
	mu    sync.Mutex
	n     int
	err   error
	calls int
}

func (f *failing) Accept() (net.Conn, error) {
	f.mu.Lock()
	f.calls++
	if f.n > 0 {
		f.n--
		f.mu.Unlock()
		return nil, f.err
	}
	f.mu.Unlock()
	return f.Listener.Accept()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// greet is a handler that writes "hi\n" and holds the connection until the
// client closes it.
func greet(nc net.Conn) {
	defer nc.Close()
	io.WriteString(nc, "hi\n")
	io.Copy(io.Discard, nc)
}

// expectGreeting dials addr and reads the greeting.
func expectGreeting(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil || line != "hi\n" {
		t.Fatalf("greeting: %q, %v", line, err)
	}
	return nc
}

// serveAsync runs Serve on ln with o (greeting each connection) until
// stop, which cancels it and fails t unless Serve then returns nil: it
// returns once every handler has ended.
func serveAsync(t *testing.T, ln net.Listener, o Options) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, o, greet) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Serve: %v", err)
		}
	}
}

func TestServeRetriesTemporaryErrors(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ECONNABORTED} {
		t.Run(errno.Error(), func(t *testing.T) {
			fl := &failing{Listener: listen(t), n: 4, err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}}
			var logs testutil.Buffer
			stop := serveAsync(t, fl, Options{Name: "test", Logf: logs.Logf})
			expectGreeting(t, fl.Addr().String()).Close()
			stop()
			fl.mu.Lock()
			calls := fl.calls
			fl.mu.Unlock()
			if calls < 5 {
				t.Fatalf("Accept called %d times, want the 4 failures and a success", calls)
			}
			if n := strings.Count(logs.String(), "retrying in"); n != 4 {
				t.Fatalf("%d retries logged, want 4:\n%s", n, logs.String())
			}
		})
	}
}

func TestServeEndsOnPermanentError(t *testing.T) {
	perm := errors.New("listener broken")
	fl := &failing{Listener: listen(t), n: 1, err: perm}
	defer fl.Close()
	if err := Serve(context.Background(), fl, Options{}, greet); !errors.Is(err, perm) {
		t.Fatalf("Serve = %v, want %v", err, perm)
	}
}

func TestServeCapsConnections(t *testing.T) {
	ln := listen(t)
	stop := serveAsync(t, ln, Options{MaxConns: 2})
	addr := ln.Addr().String()
	a, b := expectGreeting(t, addr), expectGreeting(t, addr)
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	extra.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := extra.Read(make([]byte, 8)); err == nil || n != 0 {
		t.Fatalf("third connection read %d bytes, %v: want it closed without a greeting", n, err)
	}
	a.Close()
	// Once a handler has ended the cap lets a new connection in.
	testutil.WaitFor(t, "a connection accepted after one closed", func() bool { return served(t, "127.0.0.1", addr) })
	b.Close()
	stop()
}

// TestServeOutOfDescriptors runs a server in a child process whose
// RLIMIT_NOFILE leaves room for two connections: the third accept fails
// with EMFILE, and once the client closes the first connections every other
// connection is still served.
func TestServeOutOfDescriptors(t *testing.T) {
	if os.Getenv("ACCEPT_CHILD") == "1" {
		childServe()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeOutOfDescriptors$")
	cmd.Env = append(os.Environ(), "ACCEPT_CHILD=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out := testutil.StartStdout(t, cmd)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	addr = strings.TrimSpace(addr)
	const n = 6
	conns := make([]net.Conn, n)
	for i := range conns {
		if conns[i], err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
	}
	for i, nc := range conns {
		nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReader(nc).ReadString('\n')
		if line != "hi\n" {
			t.Fatalf("connection %d: %q, %v (child log:\n%s)", i, line, err, stderr.String())
		}
		nc.Close()
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !strings.Contains(stderr.String(), "too many open files") {
		t.Fatalf("the child never ran out of descriptors, the test proved nothing:\n%s", stderr.String())
	}
}

// childServe listens, lowers RLIMIT_NOFILE to two descriptors above those
// open, prints the address and serves.
func childServe() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	lim, err := twoFreeBelow()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(ln.Addr())
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	err = Serve(context.Background(), ln, Options{Name: "child", Logf: logf}, greet)
	fmt.Fprintln(os.Stderr, "Serve:", err)
	os.Exit(1)
}

// twoFreeBelow is the RLIMIT_NOFILE under which exactly two descriptor
// numbers are free. The limit caps descriptor numbers, not their count:
// descriptors open above it (the race detector's, inherited ones) leave
// more numbers free below it than a count of the open ones says.
func twoFreeBelow() (uint64, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	self := int(d.Fd())
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 0, err
	}
	open := map[int]bool{}
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd != self {
			open[fd] = true
		}
	}
	lim, free := 0, 0
	for free < 2 {
		if !open[lim] {
			free++
		}
		lim++
	}
	return uint64(lim), nil
}

// dialFrom dials addr from the local IP from.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	nc := testutil.DialFrom(t, from, addr)
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	return nc
}

// greeted says whether nc got the greeting (false: closed without one).
func greeted(nc net.Conn) bool {
	line, _ := bufio.NewReader(nc).ReadString('\n')
	return line == "hi\n"
}

// served says whether a new connection from the local IP from to addr is
// greeted; the connection is closed before it returns.
func served(t *testing.T, from, addr string) bool {
	t.Helper()
	nc := dialFrom(t, from, addr)
	defer nc.Close()
	return greeted(nc)
}

// TestServeCapsConnectionsPerIP: with MaxConnsPerIP 2 a third connection
// from one address is closed unanswered while another address is served;
// the refusals of an address are logged once until its connections end.
func TestServeCapsConnectionsPerIP(t *testing.T) {
	ln := listen(t)
	var logs testutil.Buffer
	refusals := func() int { return strings.Count(logs.String(), "refusing connection from 127.0.0.1:") }
	var mu sync.Mutex
	var reasons []string
	refused := func(r string) { mu.Lock(); reasons = append(reasons, r); mu.Unlock() }
	stop := serveAsync(t, ln, Options{MaxConnsPerIP: 2, Logf: logs.Logf, Refused: refused})
	addr := ln.Addr().String()
	a, b := dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.1", addr)
	if !greeted(a) || !greeted(b) {
		t.Fatal("the first two connections of an address were not served")
	}
	for i := range 3 {
		if nc := dialFrom(t, "127.0.0.1", addr); greeted(nc) {
			t.Fatalf("connection %d beyond the cap was served", i+3)
		}
	}
	other := dialFrom(t, "127.0.0.2", addr)
	if !greeted(other) {
		t.Fatal("another address was refused: the cap is per address")
	}
	if n := refusals(); n != 1 {
		t.Fatalf("%d refusals of 127.0.0.1 logged, want 1:\n%s", n, logs.String())
	}
	mu.Lock()
	got := strings.Join(reasons, ",")
	mu.Unlock()
	if want := strings.Repeat(RefusedPerIP+",", 3); got+"," != want {
		t.Fatalf("Refused called with %q, want 3 times %q", got, RefusedPerIP)
	}
	a.Close()
	b.Close()
	testutil.WaitFor(t, "a connection served after the address's connections closed", func() bool { return served(t, "127.0.0.1", addr) })
	other.Close()
	stop()
}

// TestServeUnixNotCappedPerIP: peers on a unix socket have no IP address,
// so MaxConnsPerIP does not lump them together; MaxConns still caps them
// and Refused says which cap.
func TestServeUnixNotCappedPerIP(t *testing.T) {
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	reasons := make(chan string, 8)
	stop := serveAsync(t, ln, Options{MaxConns: 3, MaxConnsPerIP: 1, Refused: func(r string) { reasons <- r }})
	dial := func() net.Conn {
		nc, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		return nc
	}
	var conns []net.Conn
	for i := range 3 {
		nc := dial()
		if !greeted(nc) {
			t.Fatalf("unix connection %d refused with a per-IP cap of 1", i+1)
		}
		conns = append(conns, nc)
	}
	if nc := dial(); greeted(nc) {
		t.Fatal("a fourth unix connection was served beyond MaxConns 3")
	}
	if r := <-reasons; r != RefusedMaxConnections {
		t.Fatalf("refused for %q, want %q", r, RefusedMaxConnections)
	}
	for _, nc := range conns {
		nc.Close()
	}
	stop()
}
